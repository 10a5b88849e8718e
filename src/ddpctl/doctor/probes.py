"""The real probes: processes, sockets, files and the Docker Engine (the only side effects of doctor)."""

from __future__ import annotations

import os
import socket
import subprocess

from ddpctl.doctor.model import ProbeError, Probes

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
        from ddpctl.dockerengine import connect

        client = connect(timeout=10, raw=True)  # TLS and ssh:// as for every other command; docker-py's own error
        return {"version": client.version(), "info": client.info()}
    except Exception as exc:  # noqa: BLE001  (any failure means: no usable engine)
        text = str(exc).strip().splitlines()
        raise ProbeError((text[0] if text else type(exc).__name__)[:200]) from None


def _image_labels(ref: str) -> dict | None:
    try:
        from ddpctl.dockerengine import connect

        return connect(timeout=10, raw=True).images.get(ref).labels or {}
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


def _free_bytes(path: str) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def host_probes() -> Probes:
    import shutil

    return Probes(which=shutil.which, run=_run, docker=_docker, image_labels=_image_labels, shm_bytes=_shm,
                  rlimit=_rlimit, port_free=_port_free, listdir=_listdir, read=_read, env=dict(os.environ),
                  free_bytes=_free_bytes)
