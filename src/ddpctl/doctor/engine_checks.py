"""Checks of the Docker Engine and the GPUs it can hand out (local and compose targets)."""

from __future__ import annotations

from ddpctl import host_gpus as host
from ddpctl.doctor.model import HOOK, Check, Options, ProbeError, Probes

# -------------------------------------------------------------------------------- engine checks

def mib(n: int) -> str:
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
    rc, out, err = p.run(["nvidia-smi", *host.GPU_LIST])
    have = host.parse_gpu_count(out) if rc == 0 else 0
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
        rc, out, _ = p.run(["nvidia-smi", *host.DRIVER_QUERY])
        driver = host.parse_driver(out) if rc == 0 else None
    verdict = images.driver_supports(cuda or None, driver)
    status = "ok" if verdict.ok else "fail" if verdict.ok is False else "warn"
    fix = "" if verdict.ok else ("upgrade the NVIDIA driver, or use an image built on an older CUDA"
                                 if verdict.ok is False else "install the NVIDIA driver")
    return Check("driver", status, f"{verdict.reason} ({where})", fix)
