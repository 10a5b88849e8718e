"""Check primitives: each turns one raw value (from YAML, a flag or code) into a model value, or raises a
one-line :class:`~ddpctl.errors.SpecError` naming the key (and its line in the file) and the fix.

The field table (:mod:`ddpctl.spec.fields`) says which primitive checks which key. Value rules shared with the
renderers and the manifest validator live in :mod:`ddpctl.rules`; these wrap them with the key in front.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ddpctl import rules
from ddpctl.errors import SpecError
from ddpctl.rules import RuleError
from ddpctl.secrets import SecretEnv
from ddpctl.spec.model import Volume

if TYPE_CHECKING:
    from ddpctl.spec.lines import Lines

# Patterns are matched with fullmatch (``$`` would also accept a trailing newline).
HOST_RE = rules.HOST_RE  # one host rule: ddpctl.rules.hosts
DOCKER_HOST_RE = re.compile(r"[A-Za-z0-9][^\s,]{0,511}")  # a URL or a context name (ddpctl.dockerengine.host_address checks it)
IFNAME_RE = re.compile(r"[A-Za-z0-9_.\-]{1,15}")
SLURM_TIME_RE = re.compile(r"(\d{1,4}-)?\d{1,3}(:\d{2}){0,2}", re.ASCII)
SLURM_MEM_RE = re.compile(r"\d{1,15}[KMGT]?", re.ASCII)
USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,31}(:[A-Za-z0-9_][A-Za-z0-9_.\-]{0,31})?")
NAME_WHAT = "a DNS-1035 label (lowercase letters, digits and '-', starting with a letter)"


def type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a mapping", type(None): "null"}.get(type(value), type(value).__name__)


def show(value: Any) -> str:
    """A value for an error message: repr, shortened (a 5,000-digit number is not printed in full)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"a {len(str(abs(value)))}-digit number"
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + f"... ({len(text)} characters)"


class Checker:
    def __init__(self, lines: Lines) -> None:
        self.lines = lines

    def fail(self, path: tuple[str, ...], problem: str, fix: str, shown: tuple[str, ...] | None = None) -> SpecError:
        return SpecError(f"{self.lines.where(path, shown)} {problem}", fix)

    def rule(self, path, fn: Callable[..., Any], value: Any, **kw: Any) -> Any:
        """Apply a :mod:`ddpctl.rules` rule; its error gets this key (and line) in front."""
        try:
            return fn(value, **kw)
        except RuleError as exc:
            raise self.fail(path, exc.problem, exc.fix) from None

    def integer(self, path, value, lo: int | None = None, hi: int | None = None) -> int:
        if isinstance(value, float) or not isinstance(value, (int, str)) or isinstance(value, bool):
            raise self.fail(path, f"must be an integer, got {type_name(value)} {show(value)}",
                            "write a whole number")
        return self.rule(path, rules.integer, value, lo=lo, hi=hi, what="the value")

    def boolean(self, path, value) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
            return value.lower() in ("true", "yes", "1", "on")
        raise self.fail(path, f"must be true or false, got {type_name(value)} {show(value)}",
                        "write true or false")

    def string(self, path, value, pattern: re.Pattern | None = None, what: str = "") -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.fail(path, f"must be a string, got {type_name(value)} {show(value)}", "write a string")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(path, f"must be a string, got {value}", "write a string")
        value = str(value) if not isinstance(value, int) or abs(value) < 10**30 else show(value)
        if not value:
            raise self.fail(path, "must not be empty", "give a value or remove the key")
        self.rule(path, rules.text, value)
        if pattern is not None and not pattern.fullmatch(value):
            raise self.fail(path, f"{show(value)} is not {what}", f"use {what}")
        return value

    def choice(self, path, value, choices: tuple[str, ...]) -> str:
        value = self.string(path, value)
        if value not in choices:
            raise self.fail(path, f"must be one of {', '.join(choices)}, got {show(value)}",
                            f"use one of {', '.join(choices)}")
        return value

    def str_list(self, path, value, pattern: re.Pattern | None = None, what: str = "") -> tuple[str, ...]:
        if isinstance(value, str):
            value = rules.split_list(value)
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list, got {type_name(value)} {show(value)}", "write a YAML list")
        return tuple(self.string(path, v, pattern, what) for v in value)

    def size(self, path, value) -> int:
        return self.rule(path, rules.size_bytes, value)

    def mapping(self, path, value) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a mapping, got {type_name(value)} {show(value)}",
                            "write 'key: value' pairs under it")
        return value


def unknown(ck: Checker, path: tuple[str, ...], key: str, known: set[str]) -> SpecError:
    import difflib

    close = difflib.get_close_matches(key, sorted(known), n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(sorted(known))}"
    return ck.fail(path + (key,), "is not a known key", hint)


def volume(ck: Checker, path, value) -> Volume:
    if isinstance(value, str):
        ck.rule(path, rules.text, value, what="volume")
        parts = value.split(":")
        if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
            raise ck.fail(path, f"volume {show(value)} is not SOURCE:TARGET[:ro] (paths cannot contain ':')",
                          "write e.g. ./data:/data:ro")
        mode = parts[2] if len(parts) == 3 else "rw"
        if mode not in ("ro", "rw"):
            raise ck.fail(path, f"volume mode {show(mode)} is not ro or rw", "end the volume with :ro or :rw")
        source, target, ro = parts[0], parts[1], mode == "ro"
    elif isinstance(value, dict):
        extra = set(value) - {"source", "target", "read_only"}
        if extra:
            raise ck.fail(path, f"volume has unknown key(s) {', '.join(sorted(map(str, extra)))}",
                          "use source, target and read_only")
        if "source" not in value or "target" not in value:
            raise ck.fail(path, "volume needs both source and target", "add the missing key")
        source = ck.string(path, value["source"])
        target = ck.string(path, value["target"])
        ro = ck.boolean(path, value.get("read_only", False))
    else:
        raise ck.fail(path, f"volume must be a string or a mapping, got {type_name(value)}",
                      "write e.g. ./data:/data:ro")
    if "/" not in source and not source.startswith((".", "~")):
        raise ck.fail(path, f"volume source {show(source)} is a name, not a path (Docker and compose would "
                            "make a named volume, Kubernetes and Slurm cannot)",
                      f"write ./{source} for a directory here, or an absolute path")
    source = ck.rule(path, rules.host_path, source, what="volume source")
    target = ck.rule(path, rules.container_path, target, what="volume target")
    return Volume(source, target, ro)


def env(ck: Checker, path, value) -> tuple[tuple[str, str], ...]:
    if isinstance(value, list):  # ["K=V", ...]
        pairs = []
        for item in value:
            if not isinstance(item, str):  # never shown: a mapping or list item may hold a value
                raise ck.fail(path, f"env entry is {type_name(item)}, not KEY=VALUE", "write KEY=VALUE")
            if "=" not in item:  # at most its name: HF_TOKEN:hf_... must not show the token
                raise ck.fail(path, f"env entry {rules.shown_name(item)} has no '=' (what may be a value is "
                                    "not shown)", "write KEY=VALUE")
            k, v = item.split("=", 1)
            pairs.append((k, v))
    elif isinstance(value, dict):
        pairs = list(value.items())
    else:  # not shown: 'env: HF_TOKEN=hf_...' holds a value
        raise ck.fail(path, f"must be a mapping or a list of KEY=VALUE, got {type_name(value)} (not shown)",
                      "write 'KEY: VALUE' pairs under it")
    if len(pairs) > rules.MAX_ENV_ENTRIES:
        raise ck.fail(path, f"has {len(pairs)} entries (more than {rules.MAX_ENV_ENTRIES})",
                      "pass large configuration as a file in a volume")
    out = []
    for k, v in pairs:
        kp = path + (str(k),)
        if not isinstance(k, str):
            raise ck.fail(kp, "is not a valid environment variable name", "use letters, digits and _")
        try:
            rules.user_env_name(k)
        except RuleError as exc:  # 'env.HF_TOKEN:hf_...' must not show the token: at most the name part
            raise ck.fail(kp, exc.problem, exc.fix, shown=path + (rules.shown_name(k, quoted=False),)) from None
        if isinstance(v, bool):
            v = "1" if v else "0"
        if v is None or isinstance(v, (list, dict)):
            raise ck.fail(kp, f"must be a scalar value, got {type_name(v)}", "write a string or number")
        if isinstance(v, float) and not math.isfinite(v):
            raise ck.fail(kp, f"is {v}, which every target would write differently", "quote the value")
        if isinstance(v, int) and abs(v) >= 10**30:
            raise ck.fail(kp, f"is {show(v)}", "quote the value")
        v = str(v)
        ck.rule(kp, rules.env_value, v)
        out.append((k, v))
    merged: dict[str, str] = {}
    for k, v in out:  # a key given twice is refused, in the list form as in the mapping form
        if k in merged:
            raise ck.fail(path + (k,), "is given twice", "give each variable once")
        merged[k] = v
    return tuple(merged.items())


def secret_env(ck: Checker, path, value) -> tuple[SecretEnv, ...]:
    from ddpctl import secrets

    try:
        return secrets.parse(value)
    except RuleError as exc:
        raise ck.fail(path, exc.problem, exc.fix) from None


def k8s_name(fn: Callable[..., str], what: str, label_value: bool = False) -> Callable[..., str]:
    """A Kubernetes object name (``fn``: a DNS rule), also a label value when ``label_value``."""
    def check(ck: Checker, p, v) -> str:
        v = ck.string(p, v)
        ck.rule(p, fn, v, what=what)
        if label_value:
            ck.rule(p, rules.label_value, v, what=what)
        return v
    return check


def node_selector(ck: Checker, p, v) -> tuple[tuple[str, str], ...]:
    out = []
    for k, x in ck.mapping(p, v).items():
        kp = p + (str(k),)
        ck.rule(kp, rules.label_key, k, what="node selector key")
        x = ck.string(kp, x) if not isinstance(x, str) else x
        ck.rule(kp, rules.label_value, x, what="node selector value")
        out.append((k, x))
    return tuple(out)


def tolerations(ck: Checker, path, value) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(value, list):
        raise ck.fail(path, f"must be a list of tolerations, got {type_name(value)}", "write a YAML list")
    return tuple(ck.rule(path, rules.toleration, item) for item in value)




def job_name(ck: Checker, p, value, max_len: int) -> str:
    value = ck.string(p, value)
    if len(value) > max_len or not rules.DNS1035_LABEL_RE.fullmatch(value):
        raise ck.fail(p, f"{show(value)} is not {NAME_WHAT} of at most {max_len} characters",
                      "use e.g. 'resnet-ddp'")
    return value


def command(ck: Checker, p, value) -> tuple[str, ...]:
    if isinstance(value, str):
        import shlex

        try:
            value = shlex.split(value)
        except ValueError as exc:
            raise ck.fail(p, f"cannot be split into words ({exc})", "balance the quotes") from None
    if isinstance(value, list) and not value:
        raise ck.fail(p, "must not be empty", "give a command such as ['python', 'train.py']")
    if not isinstance(value, list):
        raise ck.fail(p, f"must be a list or a string, got {type_name(value)}",
                      "give a command such as ['python', 'train.py']")
    return ck.rule(p, rules.command, [ck.string(p, w) for w in value])


def volumes(ck: Checker, p, value) -> tuple[Volume, ...]:
    if not isinstance(value, list):
        raise ck.fail(p, f"must be a list, got {type_name(value)}", "write a YAML list of SOURCE:TARGET")
    return tuple(volume(ck, p, v) for v in value)


def cpus(ck: Checker, p, value) -> float:
    if isinstance(value, str) or isinstance(value, bool):
        raise ck.fail(p, f"must be a number, got {type_name(value)} {show(value)}", "write a number")
    return ck.rule(p, rules.cpus, value, what="the value")


_RANGE_RE = re.compile(r"\s*(\d+)\s*:\s*(\d+)\s*")


def nodes(ck: Checker, p, value) -> int | tuple[int, int]:
    """``nodes``: a count, or ``MIN:MAX`` (an elastic job; :func:`ddpctl.spec.build.spec_from_dict` splits it)."""
    from ddpctl.spec.model import MAX_NODES

    if isinstance(value, str) and ":" in value:
        m = _RANGE_RE.fullmatch(value)
        if not m:
            raise ck.fail(p, f"must be a node count or MIN:MAX, got {show(value)}", "write e.g. 2, or 1:4")
        lo = ck.integer(p, m.group(1), 1, MAX_NODES)
        hi = ck.integer(p, m.group(2), 1, MAX_NODES)
        if lo > hi:
            raise ck.fail(p, f"is {value}: MIN is above MAX", "write nodes: MIN:MAX with MIN <= MAX")
        return (lo, hi)
    if isinstance(value, str) and not value.strip().isdigit():
        raise ck.fail(p, f"must be a node count or MIN:MAX, got {show(value)}", "write e.g. 2, or 1:4")
    return ck.integer(p, value, 1, MAX_NODES)
