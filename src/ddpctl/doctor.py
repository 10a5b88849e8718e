"""``ddpctl doctor``: check that this machine has what a target needs, and say how to fix what it lacks.

Plan -> executor: :func:`plan` lists the checks a target needs (pure); :func:`run` evaluates them against a
:class:`Probes` object, the only place with side effects (processes, sockets, files, the Docker Engine).
Tests inject their own probes or run the real ones against real engines; every check function is pure
given its probe results.

Each check gives one :class:`Check`: ``ok``, ``warn`` or ``fail``, what was found, and for warn/fail the fix.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Callable

TARGETS = ("local", "compose", "k8s", "slurm")
CONTAINERS = ("none", "pyxis", "apptainer")
HOOK = "nvidia-container-runtime-hook"
CRDS = {"PyTorchJob": "pytorchjobs.kubeflow.org", "TrainJob": "trainjobs.trainer.kubeflow.org"}
STACK_MIN = 64 * 1024**2  # NVIDIA's recommended stack limit (bytes), also what ddpctl gives containers
# /dev/shm a DataLoader needs: each worker keeps prefetch_factor (2) batches in shared memory; 128 MiB is a
# batch of 128 3x224x224 float32 images (77 MB) rounded up.
SHM_PER_WORKER_BATCH = 128 * 1024**2
PREFETCH = 2
_NOT_A_NIC = re.compile(r"^(lo|docker\d*|veth.*|br-.*|virbr.*|cni.*|flannel.*|cali.*|tunl.*|kube-.*)$")


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name}: {self.detail}"
        return text + (f"; fix: {self.fix}" if self.fix and self.status != "ok" else "")


@dataclass(frozen=True)
class Options:
    target: str = "local"
    nodes: int = 1
    gpus_per_node: int = 0
    nproc_per_node: int = 0  # 0: gpus_per_node, or 1 on CPU
    workers: int = 4  # DataLoader workers per process
    port: int = 29500
    network: str = "bridge"  # local/compose: bridge | host
    image: str | None = None
    partition: str | None = None  # slurm
    container: str = "none"  # slurm: none | pyxis | apptainer

    @property
    def procs(self) -> int:
        return self.nproc_per_node or self.gpus_per_node or 1


@dataclass
class Probes:
    """What the checks may ask of the machine. The defaults are the real machine (see :func:`host_probes`)."""

    which: Callable[[str], str | None]
    run: Callable[[list[str]], tuple[int, str, str]]  # (exit code, stdout, stderr); 127 when not runnable
    docker: Callable[[], dict]  # {"version": {...}, "info": {...}}; raises ProbeError when unreachable
    image_labels: Callable[[str], dict | None]  # labels of a local image, None when absent
    shm_bytes: Callable[[], int | None]
    rlimit: Callable[[str], tuple[int, int]]  # 'memlock'|'stack' -> (soft, hard); -1 = unlimited
    port_free: Callable[[int], bool]
    listdir: Callable[[str], list[str] | None]
    read: Callable[[str], str | None]
    env: dict[str, str] = field(default_factory=dict)


class ProbeError(Exception):
    pass


# ------------------------------------------------------------------------------------------ the plan

def plan(opts: Options) -> list[str]:
    """Names of the checks the target needs, in the order they are reported."""
    out: list[str] = []
    if opts.target in ("local", "compose"):
        out += ["docker"]
        if opts.gpus_per_node:
            out += ["nvidia-runtime", "gpus", "driver"]
    if opts.target == "k8s":
        out += ["kubectl", "context", "crds"]
    if opts.target == "slurm":
        out += ["slurm-commands", "partitions"]
        if opts.container != "none":
            out += ["container-runtime"]
    if opts.target != "k8s":
        out += ["shm", "memlock", "stack", "port"]
    out += ["ib", "socket-ifname"]
    return out


def run(opts: Options, probes: Probes) -> list[Check]:
    """Evaluate the plan's checks (the executor)."""
    results: list[Check] = []
    state: dict = {}
    for name in plan(opts):
        got = CHECKS[name](opts, probes, state)
        results.extend(got if isinstance(got, list) else [got])
    return results


def failed(results: list[Check]) -> bool:
    return any(c.status == "fail" for c in results)


def to_json(opts: Options, results: list[Check]) -> dict:
    return {"target": opts.target, "ok": not failed(results), "checks": [asdict(c) for c in results]}


# ------------------------------------------------------------------------------------------ the checks

def _mib(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB" if n >= 1024**3 else f"{n // 1024**2} MiB"


def check_docker(opts: Options, p: Probes, state: dict) -> Check:
    host = p.env.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"
    try:
        d = p.docker()
    except ProbeError as exc:
        return Check("docker", "fail", f"no Docker Engine answers at {host} ({exc})",
                     "start dockerd (scripts/ci-setup.sh does), or point DOCKER_HOST at a running engine")
    state["docker"] = d
    v = d.get("version") or {}
    return Check("docker", "ok", f"Docker Engine {v.get('Version', '?')} (API {v.get('ApiVersion', '?')}) at {host}")


def check_nvidia_runtime(opts: Options, p: Probes, state: dict) -> Check:
    d = state.get("docker")
    if d is None:
        return Check("nvidia runtime", "fail", "cannot ask the Docker Engine (see the docker check)",
                     "fix the docker check first")
    info = d.get("info") or {}
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    if "nvidia" in runtimes:
        return Check("nvidia runtime", "ok", "the engine has the 'nvidia' runtime")
    cdi = [f for dir_ in info.get("CDISpecDirs") or ["/etc/cdi", "/var/run/cdi"] for f in (p.listdir(dir_) or [])
           if "nvidia" in f]
    if cdi:
        return Check("nvidia runtime", "ok", f"CDI specs for NVIDIA devices: {', '.join(sorted(cdi))}")
    hook = p.which(HOOK)
    if hook:
        return Check("nvidia runtime", "ok", f"{HOOK} at {hook}: dockerd registers its 'nvidia' device driver "
                     "(if dockerd was started with it on PATH)")
    return Check("nvidia runtime", "fail",
                 f"GPUs asked for (--gpus-per-node {opts.gpus_per_node}) but the engine has no 'nvidia' runtime "
                 f"(runtimes: {', '.join(runtimes) or 'none'}), no NVIDIA CDI spec and no {HOOK} on PATH",
                 "install nvidia-container-toolkit, run 'nvidia-ctk runtime configure --runtime=docker' and "
                 "restart dockerd")


def check_gpus(opts: Options, p: Probes, state: dict) -> Check:
    need = opts.gpus_per_node * opts.nodes  # local/compose: every node on this host
    if not p.which("nvidia-smi"):
        return Check("GPUs", "fail", f"{need} GPU(s) asked for, but nvidia-smi is not on PATH",
                     "install the NVIDIA driver (it brings nvidia-smi), or run with --gpus-per-node 0")
    rc, out, err = p.run(["nvidia-smi", "-L"])
    have = sum(1 for x in out.splitlines() if x.startswith("GPU ")) if rc == 0 else 0
    if rc != 0:
        return Check("GPUs", "fail", f"nvidia-smi -L failed ({(err or out).strip()[:120] or rc})",
                     "check the NVIDIA driver (nvidia-smi must list the GPUs)")
    if have < need:
        return Check("GPUs", "fail", f"{need} GPU(s) asked for ({opts.nodes} node(s) x {opts.gpus_per_node}), "
                     f"this host has {have}", f"ask for at most {have} (--nodes x --gpus-per-node)")
    return Check("GPUs", "ok", f"{have} GPU(s) on this host, {need} asked for")


def check_driver(opts: Options, p: Probes, state: dict) -> Check:
    from ddpctl import images

    image = opts.image or "ddpctl/ddp-train:cuda"
    labels = p.image_labels(image) if state.get("docker") is not None else None
    cuda = (labels or {}).get(images.LABEL_CUDA)
    where = f"label {images.LABEL_CUDA} of {image}"
    if labels is None:
        cuda, where = images.CUDA_VERSION, f"{image} not on the engine; assuming the pinned CUDA {images.CUDA_VERSION}"
    driver = None
    if p.which("nvidia-smi"):
        rc, out, _ = p.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        lines = [x.strip() for x in out.splitlines() if x.strip()]
        driver = lines[0] if rc == 0 and lines else None
    verdict = images.driver_supports(cuda or None, driver)
    status = "ok" if verdict.ok else "fail" if verdict.ok is False else "warn"
    fix = "" if verdict.ok else ("upgrade the NVIDIA driver, or use an image built on an older CUDA"
                                 if verdict.ok is False else "install the NVIDIA driver")
    return Check("driver", status, f"{verdict.reason} ({where})", fix)


def check_kubectl(opts: Options, p: Probes, state: dict) -> Check:
    path = p.which("kubectl")
    state["kubectl"] = path
    if not path:
        return Check("kubectl", "fail", "kubectl is not on PATH",
                     "install kubectl (https://kubernetes.io/docs/tasks/tools/) or add it to PATH")
    return Check("kubectl", "ok", path)


def check_context(opts: Options, p: Probes, state: dict) -> Check:
    if not state.get("kubectl"):
        return Check("kube context", "fail", "no kubectl", "fix the kubectl check first")
    rc, out, err = p.run(["kubectl", "config", "current-context"])
    if rc != 0 or not out.strip():
        return Check("kube context", "fail", f"no current context ({(err or out).strip()[:160] or rc})",
                     "select one with 'kubectl config use-context NAME' (or set KUBECONFIG)")
    state["context"] = out.strip()
    return Check("kube context", "ok", out.strip())


def check_crds(opts: Options, p: Probes, state: dict) -> list[Check]:
    if not state.get("context"):
        return [Check("CRDs", "fail", "no cluster to ask", "fix the kube context check first")]
    rc, out, err = p.run(["kubectl", "get", "crd", "-o", "name"])
    if rc != 0:
        return [Check("CRDs", "fail", f"'kubectl get crd' failed ({(err or out).strip()[:160] or rc})",
                      "check that the cluster answers and that you may list CRDs")]
    names = {line.strip().split("/", 1)[-1] for line in out.splitlines() if line.strip()}
    present = {kind: crd in names for kind, crd in CRDS.items()}
    none = not any(present.values())
    fixes = {"PyTorchJob": "install the Kubeflow Training Operator v1 (kubectl apply --server-side -k "
                           "'github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.9.4')",
             "TrainJob": "install Kubeflow Trainer v2 (kubectl apply --server-side -k "
                         "'github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.3.0')"}
    out_checks = []
    for kind, crd in CRDS.items():
        if present[kind]:
            out_checks.append(Check(f"{kind} CRD", "ok", f"{crd} installed"))
        else:
            out_checks.append(Check(f"{kind} CRD", "fail" if none else "warn",
                                    f"{crd} not installed" + ("" if none else
                                                              f" (use 'ddpctl render {'trainjob' if kind == 'PyTorchJob' else 'pytorchjob'}')"),
                                    fixes[kind]))
    return out_checks


def check_slurm_commands(opts: Options, p: Probes, state: dict) -> Check:
    missing = [c for c in ("sbatch", "srun", "scontrol") if not p.which(c)]
    state["slurm"] = not missing
    if missing:
        return Check("slurm commands", "fail", f"not on PATH: {', '.join(missing)}",
                     "run on a Slurm login node, or install the Slurm client (Debian: slurm-client)")
    return Check("slurm commands", "ok", "sbatch, srun and scontrol on PATH")


def check_partitions(opts: Options, p: Probes, state: dict) -> Check:
    if not state.get("slurm"):
        return Check("partitions", "fail", "no scontrol", "fix the slurm commands check first")
    rc, out, err = p.run(["scontrol", "-o", "show", "partition"])
    if rc != 0:
        return Check("partitions", "fail", f"scontrol cannot reach slurmctld ({(err or out).strip()[:160] or rc})",
                     "check slurm.conf / SLURM_CONF and that slurmctld runs ('scontrol ping')")
    parts = {}
    for line in out.splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if "PartitionName" in fields:
            parts[fields["PartitionName"]] = fields.get("State", "?")
    if not parts:
        return Check("partitions", "fail", "no partition visible", "ask the admins for access to a partition")
    text = ", ".join(f"{k} ({v})" for k, v in parts.items())
    if opts.partition and opts.partition not in parts:
        return Check("partitions", "fail", f"partition {opts.partition!r} not visible; visible: {text}",
                     "pass one of the visible partitions to --partition")
    if opts.partition and parts[opts.partition] != "UP":
        return Check("partitions", "warn", f"partition {opts.partition!r} is {parts[opts.partition]}",
                     "wait until it is UP or pick another")
    return Check("partitions", "ok", text)


def check_container_runtime(opts: Options, p: Probes, state: dict) -> Check:
    if opts.container == "pyxis":
        rc, out, err = p.run(["srun", "--help"])
        if "--container-image" in out + err:
            return Check("pyxis", "ok", "srun has --container-image (pyxis plugin loaded)")
        return Check("pyxis", "fail", "srun has no --container-image option (no pyxis plugin)",
                     "install pyxis + enroot on the cluster, or use --container apptainer|none")
    found = p.which("apptainer") or p.which("singularity")
    if found:
        return Check("apptainer", "ok", found)
    return Check("apptainer", "fail", "neither apptainer nor singularity is on PATH",
                 "install Apptainer on the nodes (or load its module), or use --container pyxis|none")


def check_shm(opts: Options, p: Probes, state: dict) -> Check:
    size = p.shm_bytes()
    need = opts.procs * opts.workers * PREFETCH * SHM_PER_WORKER_BATCH
    basis = (f"{opts.procs} process(es) x {opts.workers} DataLoader worker(s) x {PREFETCH} prefetched batches "
             f"x {_mib(SHM_PER_WORKER_BATCH)}")
    if size is None:
        return Check("/dev/shm", "fail", "no /dev/shm on this host",
                     "mount a tmpfs on /dev/shm (mount -t tmpfs -o size=16g tmpfs /dev/shm)")
    if need and size < need:
        return Check("/dev/shm", "warn", f"{_mib(size)}, less than {_mib(need)} for {basis}",
                     f"grow it (mount -o remount,size={-(-need // 1024**3)}g /dev/shm) or use fewer --workers "
                     "(ddp-train's device data pipeline needs none)")
    return Check("/dev/shm", "ok", f"{_mib(size)} (>= {_mib(need)} for {basis})")


def _limit(v: int) -> str:
    return "unlimited" if v < 0 else _mib(v)


def check_memlock(opts: Options, p: Probes, state: dict) -> Check:
    soft, _ = p.rlimit("memlock")
    where = ("this shell's limit (jobs inherit it)" if opts.target == "slurm" else
             "this host's limit; containers get 'memlock: true' from the job file instead")
    if soft < 0:
        return Check("memlock ulimit", "ok", f"unlimited ({where})")
    status = "warn" if opts.gpus_per_node else "ok"
    return Check("memlock ulimit", status, f"{_limit(soft)} ({where}); NCCL over InfiniBand/RoCE wants unlimited",
                 "set 'memlock unlimited' in /etc/security/limits.conf (Slurm: PropagateResourceLimits), "
                 "or 'memlock: true' in the job file for containers")


def check_stack(opts: Options, p: Probes, state: dict) -> Check:
    soft, _ = p.rlimit("stack")
    if soft < 0 or soft >= STACK_MIN:
        return Check("stack ulimit", "ok", _limit(soft))
    in_containers = opts.target in ("local", "compose")
    return Check("stack ulimit", "ok" if in_containers else "warn",
                 f"{_limit(soft)} on this host" + (" (containers get 64 MiB from ddpctl)" if in_containers else
                                                   f", below the {_limit(STACK_MIN)} NVIDIA recommends"),
                 "ulimit -s 65536 (or 'stack 65536' in /etc/security/limits.conf)")


def check_port(opts: Options, p: Probes, state: dict) -> Check:
    if p.port_free(opts.port):
        return Check("master port", "ok", f"{opts.port} free on this host")
    host_net = opts.network == "host" or opts.target == "slurm"
    detail = f"{opts.port} is in use on this host"
    if opts.target in ("local", "compose") and opts.network != "host":
        detail += " (only matters with network: host; the job's bridge network has its own ports)"
    return Check("master port", "fail" if opts.target in ("local", "compose") and host_net else "warn", detail,
                 "pick a free port with --port, or stop what listens there")


def check_ib(opts: Options, p: Probes, state: dict) -> Check:
    devices = sorted(p.listdir("/sys/class/infiniband") or [])
    if devices:
        return Check("InfiniBand", "ok", f"devices: {', '.join(devices)} (NCCL uses them unless NCCL_IB_DISABLE=1)")
    multi = opts.nodes > 1 and opts.gpus_per_node > 0
    return Check("InfiniBand", "warn" if multi else "ok",
                 "no devices under /sys/class/infiniband: NCCL uses TCP sockets between nodes",
                 "expect lower multi-node bandwidth; install the IB driver (rdma-core, MOFED) if the hosts have HCAs")


def _interfaces(p: Probes) -> list[str]:
    return sorted(p.listdir("/sys/class/net") or [])


def check_socket_ifname(opts: Options, p: Probes, state: dict) -> Check:
    nics = _interfaces(p)
    candidates = [n for n in nics if not _NOT_A_NIC.match(n)
                  and (p.read(f"/sys/class/net/{n}/operstate") or "up").strip() in ("up", "unknown")]
    value = p.env.get("NCCL_SOCKET_IFNAME")
    if value:
        spec = value.lstrip("^=")
        prefixes = [x for x in spec.split(",") if x]
        exact = value.lstrip("^").startswith("=")
        if value.startswith("^"):
            left = [n for n in nics if not any((n == x) if exact else n.startswith(x) for x in prefixes)]
            ok = bool([n for n in left if n != "lo"])
        else:
            ok = any((n == x) if exact else n.startswith(x) for n in nics for x in prefixes)
        if not ok:
            return Check("NCCL_SOCKET_IFNAME", "fail", f"{value!r} matches no interface here "
                         f"(interfaces: {', '.join(nics) or 'none'})",
                         f"set it to one of: {', '.join(candidates) or 'an interface that reaches the other nodes'}")
        return Check("NCCL_SOCKET_IFNAME", "ok", f"{value!r} matches an interface here")
    if not candidates:
        return Check("NCCL_SOCKET_IFNAME", "warn" if opts.nodes > 1 else "ok",
                     "no candidate interface (only loopback/virtual ones)",
                     "connect the hosts, or set NCCL_SOCKET_IFNAME (nccl.socket_ifname) to the right interface")
    return Check("NCCL_SOCKET_IFNAME", "ok", f"unset; candidates: {', '.join(candidates)} "
                 "(set nccl.socket_ifname when hosts have several)")


CHECKS: dict[str, Callable] = {
    "docker": check_docker, "nvidia-runtime": check_nvidia_runtime, "gpus": check_gpus, "driver": check_driver,
    "kubectl": check_kubectl, "context": check_context, "crds": check_crds,
    "slurm-commands": check_slurm_commands, "partitions": check_partitions,
    "container-runtime": check_container_runtime,
    "shm": check_shm, "memlock": check_memlock, "stack": check_stack, "port": check_port,
    "ib": check_ib, "socket-ifname": check_socket_ifname,
}


# ------------------------------------------------------------------------------------------ real probes

def _run(argv: list[str], timeout: float = 20) -> tuple[int, str, str]:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]}: timed out after {timeout:.0f} s"
    except OSError as exc:
        return 126, "", str(exc)
    return out.returncode, out.stdout, out.stderr


def _docker() -> dict:
    try:
        import docker

        client = docker.from_env(timeout=10)
        return {"version": client.version(), "info": client.info()}
    except Exception as exc:  # noqa: BLE001  (any failure means: no usable engine)
        text = str(exc).strip().splitlines()
        raise ProbeError((text[0] if text else type(exc).__name__)[:200]) from None


def _image_labels(ref: str) -> dict | None:
    try:
        import docker

        return docker.from_env(timeout=10).images.get(ref).labels or {}
    except Exception:  # noqa: BLE001
        return None


def _shm() -> int | None:
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def _rlimit(name: str) -> tuple[int, int]:
    import resource

    soft, hard = resource.getrlimit({"memlock": resource.RLIMIT_MEMLOCK, "stack": resource.RLIMIT_STACK}[name])
    def conv(v: int) -> int:
        return -1 if v == resource.RLIM_INFINITY else v

    return conv(soft), conv(hard)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _listdir(path: str) -> list[str] | None:
    try:
        return os.listdir(path)
    except OSError:
        return None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def host_probes() -> Probes:
    import shutil

    return Probes(which=shutil.which, run=_run, docker=_docker, image_labels=_image_labels, shm_bytes=_shm,
                  rlimit=_rlimit, port_free=_port_free, listdir=_listdir, read=_read, env=dict(os.environ))
