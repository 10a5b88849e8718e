"""Environment variable names (reserved ones refused with the reason) and values."""

from __future__ import annotations

import re
from typing import Any

from ddpctl.rules.base import RuleError, text

# ------------------------------------------------------------------------------------------------ env

ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

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
    "EXECIGNORE": "it makes bash skip programs when it looks up a command (the script's srun); remove it",
    "POSIXLY_CORRECT": "it puts bash in POSIX mode, which changes how the job script runs; remove it",
    "UID": "it is read-only in bash; remove it",
    "EUID": "it is read-only in bash; remove it",
    "PPID": "it is read-only in bash; remove it",
    "_": "bash sets it to the last argument of every command; use another name",
}
_APPTAINER_FIX = ("apptainer reads it as one of its options; use volumes: for mounts, and export apptainer's own "
                  "settings (APPTAINER_CACHEDIR) before sbatch, which passes them on")
RESERVED_ENV_PREFIXES: dict[str, str] = {
    "SLURM_": "Slurm sets it; use --nodes and the slurm: options",
    "PET_": "the Kubeflow operators set it; use --nodes, --nproc-per-node and --port",
    "TORCHELASTIC_": "torchrun sets it; use --max-restarts",
    "BASH_": "it changes how the job script runs; remove it",
    # srun's input environment (SRUN_EXPORT_ENV, SRUN_CPUS_PER_TASK, ...) overrides the script's srun options.
    # SBATCH_* and SALLOC_* are read only by sbatch and salloc, which the script does not run: allowed.
    "SRUN_": "srun reads it as one of its options; set the job with --nodes, --gpus-per-node and the slurm: "
             "options (partition, time, cpus_per_task, mem, ...)",
    # apptainer reads APPTAINER_BIND, APPTAINER_CONTAINALL, ... as its options: an extra mount or option
    # that the script does not show. Its own settings (APPTAINER_CACHEDIR) belong to sbatch's environment.
    "APPTAINER_": _APPTAINER_FIX,
    "SINGULARITY_": _APPTAINER_FIX,
}
# Allowed on purpose: LD_PRELOAD and LD_LIBRARY_PATH (legitimate tuning knobs, e.g. an NCCL plugin or a
# different libnccl; docs/security.md says so). In the sbatch script they also reach srun and apptainer,
# which run as the user for this job only: nothing a spec's command could not do itself.

# Apptainer (and Singularity) set X inside the container from APPTAINERENV_X / SINGULARITYENV_X, and PATH
# from *_PREPEND_PATH / *_APPEND_PATH: such a name is refused when X is.
CONTAINER_ENV_PREFIXES = ("APPTAINERENV_", "SINGULARITYENV_")
_CONTAINER_ENV_ALIASES = {"PREPEND_PATH": "PATH", "APPEND_PATH": "PATH"}


def env_name(name: Any) -> str:
    """A POSIX-style environment variable name, matched against the whole string."""
    if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
        shown = shown_name(name) if isinstance(name, str) else repr(name)  # never a value typed after ':'
        raise RuleError(f"{shown} is not a valid environment variable name",
                        "use letters, digits and _ and start with a letter or _")
    if len(name) > 256:
        raise RuleError(f"environment variable name {name[:20]}... is longer than 256 characters", "shorten it")
    return name


def container_env_target(name: str) -> str | None:
    """The variable apptainer sets inside the container from ``name`` (``APPTAINERENV_RANK`` -> ``RANK``,
    ``SINGULARITYENV_PREPEND_PATH`` -> ``PATH``), else None."""
    for prefix in CONTAINER_ENV_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            inner = name[len(prefix):]
            return _CONTAINER_ENV_ALIASES.get(inner, inner)
    return None


def reserved_env_fix(name: str) -> str | None:
    """The fix to quote when ``name`` is reserved, else None."""
    inner = container_env_target(name)
    if inner is not None:
        return reserved_env_fix(inner)
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
    if fix is None:
        return name
    inner = container_env_target(name)
    if inner is not None:
        raise RuleError(f"{name} is reserved: apptainer sets {inner} from it inside the container, and {inner} "
                        "is reserved (setting it would change the job's topology or break its script)", fix)
    raise RuleError(f"{name} is reserved (setting it would change the job's topology or break its script)", fix)


_NAME_END = re.compile(r"[=: ]")


def shown_name(entry: str, *, quoted: bool = True) -> str:
    """The name part of an env entry or a secret reference, for an error line: what comes before the first '=',
    ':' or space (at most 64 characters), then '...' when more follows; ``quoted``: as a repr (control
    characters escaped). Never the value: ``HF_TOKEN:hf_...`` (a ':' typed for the '=') shows as
    ``'HF_TOKEN...'``."""
    m = _NAME_END.search(entry)
    head = entry[:min(m.start() if m else len(entry), 64)]
    head = head + "..." if len(head) < len(entry) else head
    return repr(head) if quoted else head


def env_value(value: str) -> str:
    """An env value: any text, newlines and tabs included (it is always quoted), no other controls."""
    return text(value, allow_newline=True, what="value")
