"""``--runtime docker``: every benchmark program runs in a container, through the local-cluster code of
``ddpctl up`` (the same spec -> plan -> preflight/create/start -> attach -> remove path, one node).

Each run is a one-node job ``bench-<pid>-<n>`` of ``--image`` with the cell's GPUs (a device request for
N GPUs; none on CPU) and ``torchrun --nproc-per-node P --no-python python -m MODULE ARGS`` as its command.
The job is removed after the run, also on timeout or Ctrl-C.
"""

from __future__ import annotations

import io
import itertools
import os
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from ddpctl.bench.programs import Launch, Runner, RunResult

# Host env that reaches the containers (NCCL/torch tuning and the multicast-off settings of shared hosts).
PASS_ENV_PREFIXES = ("NCCL_", "TORCH_", "NVSHMEM_", "GLOO_")
PASS_ENV = ("OMP_NUM_THREADS",)


class DockerRunner(Runner):
    runtime = "docker"

    def __init__(self, image: str | None = None, engine=None, host_gpus: int | None = None) -> None:
        from ddpctl.spec import spec_from_dict

        self.image = image or spec_from_dict({}).resolved_image
        self._engine = engine
        self._host_gpus = host_gpus
        self._counter = itertools.count(1)

    @classmethod
    def from_options(cls, options) -> DockerRunner:
        return cls(image=options.image)

    def describe(self) -> str:
        return f"docker, image {self.image}"

    @property
    def engine(self):
        if self._engine is None:
            from ddpctl.dockerengine.docker_engine import DockerEngine

            self._engine = DockerEngine()
        return self._engine

    def host_gpus(self) -> int:
        if self._host_gpus is None:
            from ddpctl.host_gpus import gpu_count

            self._host_gpus = gpu_count()
        return self._host_gpus

    def preflight(self) -> None:
        """The engine answers and the image is there (UsageError / EngineError otherwise)."""
        from ddpctl.errors import UsageError

        self.engine.ping()
        if not self.engine.image_exists(self.image):
            raise UsageError(f"image {self.image} is not present on this Docker Engine",
                             "build it with 'make image-cpu' (CPU) / 'make image' (CUDA), or pass --image")

    def spec(self, launch: Launch):
        from ddpctl.spec import spec_from_dict

        env = {k: v for k, v in os.environ.items() if k.startswith(PASS_ENV_PREFIXES) or k in PASS_ENV}
        return spec_from_dict({
            "name": f"bench-{os.getpid()}-{next(self._counter)}",
            "image": self.image,
            "nodes": 1,
            "gpus_per_node": self.host_gpus() if launch.gpus is None else launch.gpus,
            "nproc_per_node": launch.nprocs,
            "command": ["python", "-m", launch.module, *launch.args],
            "env": env,
        })

    def run(self, launch: Launch, *, timeout: float, log: Optional[Path] = None,
            tick: Optional[Callable[[float], None]] = None) -> RunResult:
        from ddpctl.errors import DdpctlError
        from ddpctl.local import executor as ex
        from ddpctl.local.plan import plan_local

        spec = self.spec(launch)
        plan = plan_local(spec, cwd=Path.cwd())
        engine = self.engine
        start = time.monotonic()
        out = io.StringIO()
        try:
            job = ex.up(plan, engine, host_gpus=self.host_gpus() if plan.wants_gpus else 0)
        except DdpctlError as exc:
            return self._done(log, plan, RunResult(125, "", f"cannot start the container: {exc.message}",
                                                   time.monotonic() - start))
        result: dict = {}

        def attach() -> None:
            try:
                result["outcome"] = ex.attach(job, engine, out=out, color=False)
            except Exception as exc:  # noqa: BLE001 - reported as the run's failure
                result["error"] = str(exc)

        thread = threading.Thread(target=attach, daemon=True)
        thread.start()
        timed_out = False
        try:
            while thread.is_alive():
                thread.join(0.5)
                elapsed = time.monotonic() - start
                if tick:
                    tick(elapsed)
                if elapsed > timeout and thread.is_alive():
                    timed_out = True
                    for cid in job.ids.values():
                        try:
                            engine.stop(cid, timeout=5)
                        except Exception:  # noqa: BLE001 - removal below forces it
                            pass
                    thread.join(30)
                    break
        finally:
            ex.remove_job(engine, plan.job)
        text = out.getvalue()
        outcome = result.get("outcome")
        code = 124 if timed_out else (outcome.codes.get(0, 1) if outcome else 1)
        if outcome and code == 0 and any(c != 0 for c in outcome.codes.values()):
            code = next(c for c in outcome.codes.values() if c != 0)
        stderr = text if code else result.get("error", "")
        return self._done(log, plan, RunResult(code, text, stderr, time.monotonic() - start, timed_out))

    @staticmethod
    def _done(log: Optional[Path], plan, res: RunResult) -> RunResult:
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            argv = " ".join(plan.containers[0].argv)
            log.write_text(f"$ docker ({plan.image}, job {plan.job}) {argv}\n--- exit {res.returncode} after {res.seconds:.1f} s"
                           f"{' (timed out)' if res.timed_out else ''}\n--- output\n{res.stdout}\n--- stderr\n"
                           f"{res.stderr if res.stderr != res.stdout else ''}", encoding="utf-8")
        return res
