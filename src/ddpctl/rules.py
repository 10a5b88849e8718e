"""One rule per kind of value: the single place that says what a valid name, path, image, quantity... is.

Every rule is a pure function (no I/O, no environment) that takes a value and either returns it (sometimes
normalised, as documented) or raises :class:`RuleError` with a one-line ``problem`` and ``fix``. The spec layer
(:mod:`ddpctl.spec`) applies them once per kind of value, with the key and line of the offending value in front
of the message, so every target (compose, PyTorchJob, TrainJob, Slurm) and ``ddpctl up`` sees only values that
passed; a manifest validator can call the same functions on hand-written files.

The names below are a stable API (other modules import them):

========================== ===============================================================================
``text``                   any string: no NUL, control characters, Unicode line breaks or lone surrogates
``env_name``               ``[A-Za-z_][A-Za-z0-9_]*`` (the whole string; a trailing newline is not allowed)
``user_env_name``          ``env_name`` and not reserved (:data:`RESERVED_ENV`, :data:`RESERVED_ENV_PREFIXES`)
``env_value``              ``text`` that may also carry ``\\n`` and ``\\t``
``image_ref``              a Docker image reference (distribution/reference grammar), never starting with ``-``
``container_image``        a Slurm container image (pyxis/enroot or apptainer forms), never starting with ``-``
``host_path``              a bind-mount source on the host: no ``:`` ``,`` ``..`` or control characters
``container_path``         an absolute mount target in the container, same characters, not ``/`` or ``/dev/shm``
``dns1123_label``          Kubernetes DNS-1123 label: ``[a-z0-9]([-a-z0-9]*[a-z0-9])?``, at most 63
``dns1123_subdomain``      Kubernetes DNS-1123 subdomain: labels joined by ``.``, at most 253
``dns1035_label``          Kubernetes DNS-1035 label (starts with a letter), at most 63 (or ``max_len``)
``label_key``              Kubernetes label key: ``[prefix/]name``, prefix a subdomain, name at most 63
``label_value``            Kubernetes label value: empty or ``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?``, at most 63
``int32`` / ``int64``      an integer in the signed 32/64-bit range (and ``lo``..``hi``)
``integer``                an ``int`` (or a decimal string of at most 20 digits) within ``lo``..``hi``
``cpus``                   a finite CPU count, rounded to whole millicores, at least 1m: returns the float
``cpu_quantity``           CPUs as a Kubernetes quantity: ``"2"`` or ``"2500m"``
``size_bytes``             ``16g``/``2Gi``/``512m``/bytes -> a positive int of at most :data:`MAX_BYTES`
``k8s_quantity``           the syntax of a Kubernetes quantity string (``500m``, ``16Gi``, ``1e3``)
``device_id``              a GPU index (normalised: ``"00"`` -> ``"0"``) or a ``GPU-``/``MIG-`` UUID
``toleration``             a Kubernetes toleration mapping (operator, effect, seconds, key, value)
``command``                a user command: non-empty words, the first not starting with ``-``
========================== ===============================================================================

Input limits for whole files (YAML) are here too (:data:`MAX_SPEC_BYTES`, :data:`MAX_YAML_NODES`,
:data:`MAX_YAML_DEPTH`) with :func:`compose_yaml_bounded`, which turns YAML text into a node tree without
ever expanding aliases beyond those limits. docs/security.md explains why each rule exists.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from ddpctl.errors import SpecError


class RuleError(SpecError):
    """A value broke a rule. ``problem`` describes the value (no key); callers prefix the key and location."""


# --------------------------------------------------------------------------------------------- limits

MAX_SPEC_BYTES = 1024 * 1024  # a job spec file; real ones are a few hundred bytes
MAX_YAML_NODES = 20_000  # scalars + collections after alias expansion
MAX_YAML_DEPTH = 32
MAX_SCALAR_CHARS = 64 * 1024
MAX_ENV_ENTRIES = 1000
MAX_INT_DIGITS = 20
MAX_BYTES = 2**63 - 1  # Docker and Kubernetes keep sizes in a signed 64-bit integer
MAX_CPUS = 100_000.0
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_PATH_LEN = 4096
MAX_IMAGE_LEN = 4096

# ----------------------------------------------------------------------------------------------- text

# C0 controls except \t and \n (checked separately), DEL, C1 controls (U+0085 NEL among them), the Unicode
# line/paragraph separators and BOM: YAML and shells read these back as something else (a space, a newline).
_BAD_CHARS_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff]")


def text(value: str, *, allow_newline: bool = False, what: str = "value") -> str:
    """Any user string that reaches a manifest or script: printable, one line unless ``allow_newline``."""
    if not isinstance(value, str):
        raise RuleError(f"{what} must be a string, got {type(value).__name__}", "write a string")
    if len(value) > MAX_SCALAR_CHARS:
        raise RuleError(f"{what} is {len(value)} characters long (more than {MAX_SCALAR_CHARS})", "shorten it")
    m = _BAD_CHARS_RE.search(value)
    if m:
        raise RuleError(f"{what} contains the control or line-break character U+{ord(m.group()):04X}",
                        "remove it (write plain text)")
    if not allow_newline and "\n" in value:
        raise RuleError(f"{what} must not contain a newline", "write it on one line")
    return value


# ------------------------------------------------------------------------------------------------ env

_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Names that would silently change the job's topology, or break/hijack the generated shell script.
# Each maps to the flag or key to use instead (the error message quotes it).
_TOPOLOGY_FIX = "ddpctl sets it for every process from --nodes, --nproc-per-node and --port"
RESERVED_ENV: dict[str, str] = {
    "RANK": _TOPOLOGY_FIX,
    "LOCAL_RANK": _TOPOLOGY_FIX,
    "WORLD_SIZE": _TOPOLOGY_FIX,
    "LOCAL_WORLD_SIZE": _TOPOLOGY_FIX,
    "GROUP_RANK": _TOPOLOGY_FIX,
    "GROUP_WORLD_SIZE": _TOPOLOGY_FIX,
    "ROLE_RANK": _TOPOLOGY_FIX,
    "ROLE_NAME": _TOPOLOGY_FIX,
    "ROLE_WORLD_SIZE": _TOPOLOGY_FIX,
    "MASTER_ADDR": "use master_addr: in the job file (or --hosts with network: host)",
    "MASTER_PORT": "use --port",
    "CUDA_VISIBLE_DEVICES": "use --gpus-per-node and --device-ids",
    "NVIDIA_VISIBLE_DEVICES": "use --gpus-per-node and --device-ids",
    # bash/sh: read-only or behaviour-changing variables (the Slurm script exports env with `export`)
    "PATH": "the image / cluster sets PATH; call programs by absolute path or wrap the command in a script",
    "SHELLOPTS": "it changes how the job script runs; remove it",
    "BASHOPTS": "it changes how the job script runs; remove it",
    "BASH_ENV": "it makes every bash run a file first; remove it",
    "ENV": "it makes every sh run a file first; remove it",
    "IFS": "it changes how the job script splits words; remove it",
    "PS4": "it is evaluated by shells that trace; remove it",
    "PROMPT_COMMAND": "it is evaluated by shells; remove it",
    "CDPATH": "it changes how the job script runs; remove it",
    "GLOBIGNORE": "it changes how the job script runs; remove it",
    "UID": "it is read-only in bash; remove it",
    "EUID": "it is read-only in bash; remove it",
    "PPID": "it is read-only in bash; remove it",
    "_": "bash sets it to the last argument of every command; use another name",
}
RESERVED_ENV_PREFIXES: dict[str, str] = {
    "SLURM_": "Slurm sets it; use --nodes and the slurm: options",
    "PET_": "the Kubeflow operators set it; use --nodes, --nproc-per-node and --port",
    "TORCHELASTIC_": "torchrun sets it; use --max-restarts",
    "BASH_": "it changes how the job script runs; remove it",
}


def env_name(name: Any) -> str:
    """A POSIX-style environment variable name, matched against the whole string."""
    if not isinstance(name, str) or not _ENV_NAME_RE.fullmatch(name):
        shown = name if not isinstance(name, str) else name.encode("unicode_escape").decode("ascii")
        raise RuleError(f"{shown!r} is not a valid environment variable name",
                        "use letters, digits and _ and start with a letter or _")
    if len(name) > 256:
        raise RuleError(f"environment variable name {name[:20]}... is longer than 256 characters", "shorten it")
    return name


def reserved_env_fix(name: str) -> str | None:
    """The fix to quote when ``name`` is reserved, else None."""
    if name in RESERVED_ENV:
        return RESERVED_ENV[name]
    for prefix, fix in RESERVED_ENV_PREFIXES.items():
        if name.startswith(prefix):
            return fix
    return None


def user_env_name(name: Any) -> str:
    """``env_name`` that is not reserved for ddpctl, torchrun, Slurm, the operators or the shell."""
    name = env_name(name)
    fix = reserved_env_fix(name)
    if fix is not None:
        raise RuleError(f"{name} is reserved (setting it would change the job's topology or break its script)",
                        fix)
    return name


def env_value(value: str) -> str:
    """An env value: any text, newlines and tabs included (it is always quoted), no other controls."""
    return text(value, allow_newline=True, what="value")


# -------------------------------------------------------------------------------------------- images

# github.com/distribution/reference (regexp.go): the grammar Docker uses to parse image references.
_ALNUM = r"[a-z0-9]+"
_SEP = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEP}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_NAME}|{_IPV6})(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_IMAGE_RE = re.compile(
    rf"(?P<name>(?:(?P<domain>{_DOMAIN})/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?"
)
MAX_IMAGE_NAME_LEN = 255


def image_ref(ref: Any) -> str:
    """A Docker image reference: ``[registry[:port]/]path[:tag][@digest]``, lowercase path, name <= 255."""
    if not isinstance(ref, str) or not ref:
        raise RuleError("image reference must be a non-empty string", "write e.g. pytorch/pytorch:2.13.0")
    text(ref, what="image reference")
    fix = "write e.g. pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime or registry.example:5000/team/img@sha256:..."
    if ref.startswith("-"):
        raise RuleError(f"image reference {ref!r} starts with '-' (it would be read as an option)", fix)
    m = _IMAGE_RE.fullmatch(ref)
    if not m:
        hint = " (repository names are lowercase)" if ref.lower() != ref and _IMAGE_RE.fullmatch(ref.lower()) else ""
        raise RuleError(f"{ref!r} is not a valid image reference{hint}", fix)
    domain = m.group("domain")
    if domain is not None and not ("." in domain or ":" in domain or domain == "localhost"):
        # Docker reads a first component without '.' or ':' as part of the path: it must be lowercase.
        if domain != domain.lower():
            raise RuleError(f"{ref!r} is not a valid image reference (repository names are lowercase)", fix)
    if len(m.group("name")) > MAX_IMAGE_NAME_LEN:
        raise RuleError(f"image name of {ref[:40]!r}... is longer than {MAX_IMAGE_NAME_LEN} characters", fix)
    return ref


def container_image(value: Any, runtime: str = "pyxis") -> str:
    """A Slurm container image: ``docker://REF`` (then an :func:`image_ref`), another URI (``oras://``,
    ``library://``, ``docker-daemon:``), a path to an image file, or a pyxis/enroot ``[USER@][REGISTRY#]IMAGE``.

    It is always passed as one quoted word, so any printable text is safe for the shell; what matters is that
    it never starts with ``-`` (``apptainer exec -x`` would read an option) and has no control characters.
    """
    if not isinstance(value, str) or not value:
        raise RuleError("container image must be a non-empty string", "write e.g. docker://pytorch/pytorch:2.13.0")
    text(value, what="container image")
    fix = "write e.g. docker://pytorch/pytorch:2.13.0, nvcr.io#nvidia/pytorch:25.08-py3 or /images/train.sif"
    if value.startswith("-"):
        raise RuleError(f"container image {value!r} starts with '-' (it would be read as an option)", fix)
    if len(value) > MAX_IMAGE_LEN:
        raise RuleError(f"container image is longer than {MAX_IMAGE_LEN} characters", fix)
    if value.startswith("docker://"):
        image_ref(value[len("docker://"):])
    return value


# --------------------------------------------------------------------------------------------- paths

_PATH_BAD = (":", ",")


def _path_common(path: Any, what: str) -> str:
    if not isinstance(path, str) or not path:
        raise RuleError(f"{what} must be a non-empty path", "give a path")
    text(path, what=what)
    if len(path) > MAX_PATH_LEN:
        raise RuleError(f"{what} is longer than {MAX_PATH_LEN} characters", "shorten it")
    for ch in _PATH_BAD:
        if ch in path:
            raise RuleError(f"{what} {path!r} contains {ch!r}, which compose, pyxis and apptainer --bind "
                            "read as a separator", "rename or symlink the directory to a path without ':' or ','")
    if any(part == ".." for part in path.split("/")):
        raise RuleError(f"{what} {path!r} contains a '..' component (Kubernetes rejects it in a hostPath)",
                        "write the path without '..'")
    return path


def host_path(path: Any, *, what: str = "host path") -> str:
    """A bind-mount source. Absolute (``/data``), home-relative (``~/data``) or relative (``./data``,
    ``data/x``); a relative path without a leading ``./`` gets one, so compose never reads it as a named volume.
    """
    path = _path_common(path, what)
    if path.startswith(("/", "~")) or path == "." or path.startswith("./"):
        return path
    return "./" + path


def is_relative_path(path: str) -> bool:
    """True when ``path`` (after :func:`host_path`) is resolved against a directory (``./x``, ``~/x``)."""
    return not path.startswith("/")


def container_path(path: Any, *, what: str = "volume target") -> str:
    """An absolute path inside the container, not ``/`` and not ``/dev/shm`` (ddpctl mounts /dev/shm)."""
    path = _path_common(path, what)
    if not path.startswith("/"):
        raise RuleError(f"{what} {path!r} is not an absolute path", "start it with /")
    norm = re.sub(r"/+", "/", path).rstrip("/") or "/"
    if norm == "/":
        raise RuleError(f"{what} must not be '/'", "mount the directory somewhere below /, e.g. /data")
    if norm == "/dev/shm" or norm.startswith("/dev/shm/"):
        raise RuleError(f"{what} {path!r} is /dev/shm, which ddpctl mounts itself",
                        "use --shm-size (or ipc: host) for shared memory, and mount data elsewhere")
    return norm


# ------------------------------------------------------------------------------------ Kubernetes names

_DNS1123_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL_RE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LABEL_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def dns1123_label(value: Any, *, what: str = "name", max_len: int = 63) -> str:
    if not isinstance(value, str) or len(value) > max_len or not _DNS1123_LABEL_RE.fullmatch(value):
        raise RuleError(f"{what} {value!r} is not a DNS-1123 label (lowercase letters, digits and '-', "
                        f"starting and ending with a letter or digit, at most {max_len} characters)",
                        "use e.g. 'team-a'")
    return value


def dns1123_subdomain(value: Any, *, what: str = "name") -> str:
    if (not isinstance(value, str) or len(value) > 253
            or not all(_DNS1123_LABEL_RE.fullmatch(p) for p in value.split("."))):
        raise RuleError(f"{what} {value!r} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', "
                        "at most 253 characters)", "use e.g. 'high-priority'")
    return value


def dns1035_label(value: Any, *, what: str = "name", max_len: int = 63) -> str:
    if not isinstance(value, str) or len(value) > max_len or not _DNS1035_LABEL_RE.fullmatch(value):
        raise RuleError(f"{what} {value!r} is not a DNS-1035 label (lowercase letters, digits and '-', "
                        f"starting with a letter, at most {max_len} characters)", "use e.g. 'resnet-ddp'")
    return value


def label_value(value: Any, *, what: str = "label value") -> str:
    if not isinstance(value, str) or len(value) > 63 or (value and not _LABEL_NAME_RE.fullmatch(value)):
        raise RuleError(f"{what} {value!r} is not a Kubernetes label value (at most 63 letters, digits, '-', "
                        "'_' and '.', starting and ending with a letter or digit)", "use e.g. 'H100'")
    return value


def label_key(value: Any, *, what: str = "label key") -> str:
    if not isinstance(value, str):
        raise RuleError(f"{what} {value!r} is not a string", "write e.g. nvidia.com/gpu.product")
    prefix, _, name = value.rpartition("/")
    ok = bool(name) and len(name) <= 63 and _LABEL_NAME_RE.fullmatch(name) is not None
    if "/" in value:
        try:
            dns1123_subdomain(prefix)
        except RuleError:
            ok = False
    if not ok:
        raise RuleError(f"{what} {value!r} is not a Kubernetes label key ([prefix/]name: name at most 63 "
                        "letters, digits, '-', '_', '.'; prefix a DNS subdomain)", "write e.g. nvidia.com/gpu.product")
    return value


# ------------------------------------------------------------------------------------------- numbers


def integer(value: Any, *, lo: int | None = None, hi: int | None = None, what: str = "value") -> int:
    """An int, or a string of decimal digits (at most :data:`MAX_INT_DIGITS`), within ``lo``..``hi``."""
    if isinstance(value, bool):
        raise RuleError(f"{what} must be an integer, got a boolean {value!r}", "write a whole number")
    if isinstance(value, str):
        s = value.strip()
        if not re.fullmatch(r"-?\d{1,%d}" % MAX_INT_DIGITS, s):
            shown = s if len(s) <= 30 else s[:20] + f"... ({len(s)} characters)"
            raise RuleError(f"{what} must be an integer, got {shown!r}", "write a whole number")
        value = int(s)
    if isinstance(value, float) and value.is_integer() and math.isfinite(value) and abs(value) < 2**63:
        value = int(value)
    if not isinstance(value, int):
        raise RuleError(f"{what} must be an integer, got {value!r}", "write a whole number")
    if lo is not None and value < lo:
        raise RuleError(f"{what} must be at least {lo}, got {_short(value)}", f"use a value >= {lo}")
    if hi is not None and value > hi:
        raise RuleError(f"{what} must be at most {hi}, got {_short(value)}", f"use a value <= {hi}")
    return value


def _short(n: int) -> str:
    s = str(n) if abs(n) < 10**30 else f"a {len(str(abs(n)))}-digit number"
    return s


def int32(value: Any, *, lo: int = -(2**31), hi: int = INT32_MAX, what: str = "value") -> int:
    return integer(value, lo=max(lo, -(2**31)), hi=min(hi, INT32_MAX), what=what)


def int64(value: Any, *, lo: int = -(2**63), hi: int = INT64_MAX, what: str = "value") -> int:
    return integer(value, lo=max(lo, -(2**63)), hi=min(hi, INT64_MAX), what=what)


def cpus(value: Any, *, what: str = "cpus") -> float:
    """A finite, positive CPU count rounded to whole millicores (Kubernetes' precision), at least 0.001.

    Every target then agrees: compose ``cpus``, Docker ``nano_cpus``, Kubernetes ``cpu`` and Slurm
    ``--cpus-per-task`` (rounded up) all come from the rounded value.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise RuleError(f"{what} must be a number, got {value[:30]!r}", "write a number such as 2 or 0.5") from None
        else:
            raise RuleError(f"{what} must be a number, got {type(value).__name__}", "write a number such as 2 or 0.5")
    if isinstance(value, int) and value > MAX_CPUS:
        raise RuleError(f"{what} must be at most {MAX_CPUS:g}, got {_short(value)}", f"use a value <= {MAX_CPUS:g}")
    value = float(value)
    if not math.isfinite(value):
        raise RuleError(f"{what} must be a finite number, got {value}", "write a number such as 2 or 0.5")
    if value > MAX_CPUS:
        raise RuleError(f"{what} must be at most {MAX_CPUS:g}, got {value:g}", f"use a value <= {MAX_CPUS:g}")
    millis = round(value * 1000)
    if millis < 1:
        raise RuleError(f"{what} must be at least 0.001 (one millicore), got {value:g}",
                        "use a positive value of at least 0.001")
    return millis / 1000


def cpu_quantity(value: float) -> str:
    """CPUs (already :func:`cpus`-checked) as a Kubernetes quantity: whole cores ``"2"``, else ``"2500m"``."""
    millis = round(cpus(value) * 1000)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


_SIZE_RE = re.compile(r"\s*(\d{1,30}(?:\.\d{1,30})?)\s*([kmgtp]?)(i?b?)?\s*", re.IGNORECASE)


def size_bytes(value: Any, *, what: str = "size") -> int:
    """'16g', '16G', '16gb', '16Gi', '512m', 1024 -> bytes (binary units), 1 .. :data:`MAX_BYTES`."""
    fix = "write a size such as 16g, 512m or 2Gi"
    if isinstance(value, bool):
        raise RuleError(f"{what} must be a number of bytes or a string such as 16g, got {value!r}", fix)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise RuleError(f"{what} must be a whole number of bytes or a string such as 16g, got {value!r}", fix)
        if abs(value) > MAX_BYTES:
            raise RuleError(f"{what} {value!r} is larger than {MAX_BYTES} bytes", "use a smaller size")
        value = int(value)
    if isinstance(value, int):
        result = value
    elif isinstance(value, str):
        m = _SIZE_RE.fullmatch(value)
        if not m:
            shown = value if len(value) <= 30 else value[:20] + "..."
            raise RuleError(f"{what} {shown!r} is not understood", fix)
        from decimal import Decimal

        number, unit = Decimal(m.group(1)), m.group(2).lower()
        result = int(number * 1024 ** "bkmgtp".index(unit or "b"))
    else:
        raise RuleError(f"{what} must be a string such as 16g, got {type(value).__name__}", fix)
    if not isinstance(result, int) or result <= 0:
        raise RuleError(f"{what} must be positive, got {value!r}", fix)
    if result > MAX_BYTES:
        raise RuleError(f"{what} {str(value)[:30]!r} is larger than {MAX_BYTES} bytes", "use a smaller size")
    return result


_QUANTITY_RE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?\d+)?")


def k8s_quantity(value: Any, *, what: str = "quantity") -> str:
    """The syntax of a Kubernetes resource quantity (``500m``, ``16Gi``, ``2``, ``1e3``), at most 64 characters."""
    s = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    if s is None or len(s) > 64 or not _QUANTITY_RE.fullmatch(s):
        raise RuleError(f"{what} {value!r} is not a Kubernetes quantity", "write e.g. 500m, 2 or 16Gi")
    return s


# -------------------------------------------------------------------------------------------- devices

_GPU_UUID_RE = re.compile(r"(GPU|MIG)-[0-9a-fA-F][0-9a-fA-F/-]{0,126}")


def device_id(value: Any) -> str:
    """A GPU index (leading zeros dropped, so '00' and '0' are the same GPU) or a GPU-/MIG- UUID."""
    s = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if re.fullmatch(r"\d{1,4}", s):
        return str(int(s))
    if _GPU_UUID_RE.fullmatch(s):
        return s
    raise RuleError(f"{s[:40]!r} is not a GPU index or UUID", "write e.g. 0, 1 or GPU-6f3b...")


# ------------------------------------------------------------------------------------ Kubernetes misc

TOLERATION_OPERATORS = ("Exists", "Equal")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationSeconds")


def toleration(item: Any) -> dict[str, Any]:
    """A core v1 Toleration as the API server validates it (ValidateTolerations)."""
    if not isinstance(item, Mapping):
        raise RuleError(f"toleration must be a mapping, got {type(item).__name__}",
                        "write key/operator/value/effect entries")
    extra = set(item) - set(TOLERATION_KEYS)
    if extra:
        raise RuleError(f"toleration has unknown key(s) {', '.join(sorted(map(str, extra)))}",
                        f"use {', '.join(TOLERATION_KEYS)}")
    out: dict[str, Any] = {}
    op = item.get("operator", "Equal")
    if op not in TOLERATION_OPERATORS:
        raise RuleError(f"toleration operator {op!r} is not Exists or Equal", "use Exists or Equal")
    key = item.get("key")
    if key is not None and key != "":
        out["key"] = label_key(key, what="toleration key")
    elif op != "Exists":
        raise RuleError("a toleration without a key must use operator Exists", "add a key or use operator: Exists")
    if "operator" in item:
        out["operator"] = op
    value = item.get("value")
    if value is not None and value != "":
        if op == "Exists":
            raise RuleError("a toleration with operator Exists must not have a value", "drop the value")
        out["value"] = label_value(str(value) if isinstance(value, (int, float)) and not isinstance(value, bool)
                                   else value, what="toleration value")
    effect = item.get("effect")
    if effect is not None and effect != "":
        if effect not in TOLERATION_EFFECTS:
            raise RuleError(f"toleration effect {effect!r} is not one of {', '.join(TOLERATION_EFFECTS)}",
                            f"use one of {', '.join(TOLERATION_EFFECTS)}")
        out["effect"] = effect
    if item.get("tolerationSeconds") is not None:
        if effect != "NoExecute":
            raise RuleError("tolerationSeconds needs effect NoExecute", "set effect: NoExecute or drop the seconds")
        out["tolerationSeconds"] = int64(item["tolerationSeconds"], what="tolerationSeconds")
    return out


# -------------------------------------------------------------------------------------------- command


def command(words: Any) -> tuple[str, ...]:
    """A user command: at least one word, each :func:`text`, the first not an option (``-...``).

    torchrun parses words before ``--no-python``'s program as its own flags; ddpctl puts the user command
    after ``--no-python``, but a first word such as ``--node-rank=5`` would still be read by the launcher.
    """
    if not isinstance(words, (list, tuple)) or not words:
        raise RuleError("command must not be empty", "give a command such as ['python', 'train.py']")
    out = tuple(text(w, what="command word") for w in words)
    if out[0].startswith("-"):
        raise RuleError(f"command starts with {out[0]!r}, which the launcher would read as its own option",
                        "start the command with a program (e.g. python train.py); set the topology with "
                        "--nodes, --nproc-per-node and --port")
    return out


# ----------------------------------------------------------------------------------------------- YAML


def compose_yaml_bounded(text_: str, source: str) -> Any:
    """``yaml.compose`` with limits: input size, nesting depth, node count (aliases counted every time they
    are used, so a "billion laughs" document fails fast), no recursive aliases. Returns the root node or None.

    Raises :class:`RuleError` (one line, with ``source``) for every YAML problem.
    """
    import yaml

    if len(text_) > MAX_SPEC_BYTES:
        raise RuleError(f"{source} is {len(text_)} bytes (more than {MAX_SPEC_BYTES})",
                        "a job spec is a few hundred bytes; check that this is the right file")
    # The parser is iterative: check depth and event count before the (recursive) composer runs.
    depth = 0
    events = 0
    try:
        for event in yaml.parse(text_, Loader=yaml.SafeLoader):
            events += 1
            if events > MAX_YAML_NODES * 2:
                raise RuleError(f"{source} has more than {MAX_YAML_NODES} values", "split or shrink the file")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else 0
                    raise RuleError(f"{source}:{line} nests deeper than {MAX_YAML_DEPTH} levels",
                                    "flatten the structure")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        root = yaml.compose(text_, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from None
    except RecursionError:  # pragma: no cover - depth is bounded above
        raise RuleError(f"{source} nests too deeply", "flatten the structure") from None
    if root is None:
        return None
    # Walk once to bound the expanded size and find recursive aliases (a node inside itself).
    count = 0
    stack: list[tuple[Any, int]] = [(root, 0)]
    on_path: list[Any] = []
    while stack:
        node, state = stack.pop()
        if state == 1:
            on_path.pop()
            continue
        count += 1
        if count > MAX_YAML_NODES:
            raise RuleError(f"{source} expands to more than {MAX_YAML_NODES} values (YAML aliases?)",
                            "write the values out instead of repeating anchors")
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            if any(node is p for p in on_path):
                raise RuleError(f"{source}:{node.start_mark.line + 1}: a YAML alias refers to the node that "
                                "contains it", "remove the recursive anchor")
            on_path.append(node)
            stack.append((node, 1))
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    stack.append((v, 0))
                    stack.append((k, 0))
            else:
                stack.extend((v, 0) for v in node.value)
    return root


def _yaml_error(exc: Exception, source: str) -> RuleError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    at = f"{source}:{mark.line + 1}" if mark else source
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return RuleError(f"{at} is not valid YAML ({problem})", "fix the syntax at that line")


def construct_scalar(node: Any, source: str) -> Any:
    """The Python value of a scalar node with the safe loader's types; unknown tags, YAML merge keys and
    numbers too long to convert are one-line errors instead of tracebacks."""
    import yaml

    line = node.start_mark.line + 1
    if node.tag == "tag:yaml.org,2002:merge":
        raise RuleError(f"{source}:{line}: YAML merge keys ('<<') are not supported", "write the keys out")
    if not isinstance(node, yaml.ScalarNode):
        raise RuleError(f"{source}:{line}: unexpected YAML node", "write a plain value")
    if node.tag.startswith("tag:yaml.org,2002:") and node.tag.rsplit(":", 1)[-1] in ("int", "float"):
        if len(node.value) > 64:
            raise RuleError(f"{source}:{line}: a number of {len(node.value)} characters is too long",
                            "write a smaller number")
    try:
        return yaml.SafeLoader("").construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RuleError(f"{source}:{line}: {problem}", "remove the tag or write a plain value") from None
    except (ValueError, OverflowError) as exc:
        raise RuleError(f"{source}:{line}: cannot read {node.value[:30]!r} ({exc.__class__.__name__})",
                        "write a plain value") from None
