"""Progress output (a bar on a terminal, plain lines otherwise), the JSON-lines metrics file, GPU stats."""

from __future__ import annotations

import json
import os
import sys
import time

import torch

from ddp_train.visible import visible


class EpochBar:
    """The epoch's progress bar on stderr (rank 0, terminal only; no dependency)."""

    def __init__(self, total, desc, stream=None, width=28):
        self.total, self.desc, self.width = max(1, total), desc, width
        self.stream = stream or sys.stderr
        self.last = 0.0

    def update(self, n, info="", force=False):
        now = time.monotonic()
        if not force and now - self.last < 0.1 and n < self.total:
            return
        self.last = now
        filled = int(self.width * n / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.desc} [{bar}] {n}/{self.total} {info}\x1b[K")
        self.stream.flush()

    def close(self):
        self.stream.write("\n")
        self.stream.flush()


class MetricsFile:
    """Append-only JSON lines; one object per event. A no-op when no path is given."""
    @classmethod
    def for_run(cls, *, metrics_file: str | None, output_dir: str | None, is0: bool) -> MetricsFile:
        """Rank 0's file: --metrics-file, else OUTPUT_DIR/metrics.jsonl, else none (every other rank: none)."""
        if not is0:
            return cls(None)
        return cls(metrics_file or (os.path.join(output_dir, "metrics.jsonl") if output_dir else None))

    def __init__(self, path):
        self.f = None
        self.last_checkpoint = None  # (step, path) of the newest checkpoint this process saved
        if path:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                self.f = open(path, "a", buffering=1)
            except OSError as exc:
                from ddp_train.errors import EXIT_USAGE, TrainError

                raise TrainError(f"cannot write the metrics file {path} ({exc.strerror or exc}); pass a writable "
                                 "--output-dir (or --metrics-file)", EXIT_USAGE) from None

    def write(self, event, **fields):
        if event == "checkpoint":  # the newest checkpoint, for the progress records
            self.last_checkpoint = (fields.get("step"), fields.get("path"))
        if self.f:
            try:
                self.f.write(json.dumps({"event": event, "time": round(time.time(), 3), **fields}) + "\n")
            except OSError as exc:  # a full disk: the metrics stop, the run goes on (a checkpoint write says it)
                print(f"ddp-train: warning: cannot write the metrics file {visible(self.f.name, limit=300)} "
                      f"({visible(exc.strerror or exc, limit=200)}); "
                      "no more metrics lines are written", file=sys.stderr)
                self._drop()

    def _drop(self):
        f, self.f = self.f, None
        try:
            f.close()
        except OSError:
            pass

    def close(self):
        if self.f:
            self._drop()


class GpuStats:
    """GPU utilisation via NVML (pynvml, optional) and memory via torch; None where unavailable."""

    def __init__(self, device):
        self.device = device
        self.handle = None
        self.samples = []
        self.active = False
        if device.type != "cuda":
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            uuid = str(torch.cuda.get_device_properties(device).uuid)
            try:
                self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else "GPU-" + uuid)
            except Exception:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
            self._nvml = pynvml
        except Exception:
            self.handle = None

    def start(self, interval=0.25):
        """Sample utilisation in a daemon thread (NVML calls are cheap and never touch the CUDA stream)."""
        if self.handle is None:
            return
        import threading

        self._stop = threading.Event()

        def loop():
            while not self._stop.wait(interval):
                if self.active:
                    self.sample()

        self.active = False
        threading.Thread(target=loop, name="ddp-train-nvml", daemon=True).start()

    def sample(self):
        if self.handle is None:
            return None
        try:
            u = float(self._nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
        except Exception:
            return None
        self.samples.append(u)
        return u

    def mean_util(self):
        return round(sum(self.samples) / len(self.samples), 1) if self.samples else None

    def mem_gb(self):
        if self.device.type != "cuda":
            return None
        return round(torch.cuda.max_memory_allocated(self.device) / 2**30, 2)


def device_name(device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"cpu ({platform.machine()}, {os.cpu_count()} cores)"


class ProgressRecords:
    """A progress record (ddp_train.observe.progress, progress.schema.json) per log interval on every rank's stdout,
    and the same scalars in TensorBoard event files (--tensorboard DIR, rank 0). Built from the figures the
    interval log has already brought to the host: nothing here touches the device.

    ``on``: --progress-records on; ``tensorboard``: --tensorboard's DIR (rank 0 writes, None: none); ``total`` and
    ``epochs``: the global step the run stops at and its epochs; ``saves_checkpoints``: --output-dir given;
    ``resumed``: (step, path) of the checkpoint this run resumed from, or None; ``metrics``: the metrics file (its
    newest checkpoint); ``gpu``: GpuStats; ``elapsed``: seconds since the process started; ``rank``,
    ``world_size``, ``local_rank``: this process's place (also under a manual --init-method launch, with no RANK
    in the environment)."""

    def __init__(self, *, on: bool, tensorboard: str | None, total: int, epochs: int, saves_checkpoints: bool,
                 resumed: tuple[int, str] | None, metrics, gpu, elapsed, rank: int, world_size: int,
                 local_rank: int):
        from ddp_train.observe.tensorboard import open_writer

        self.on, self.total, self.epochs, self.saves_checkpoints = on, total, epochs, saves_checkpoints
        self.tb = open_writer(tensorboard) if tensorboard else None
        self.resumed = resumed if resumed else (None, None)
        self.metrics, self.gpu, self.elapsed = metrics, gpu, elapsed
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.saved_at = -1  # the step of this run's last checkpoint (every rank knows it; rank 0 has its path)

    def saved(self, step: int) -> None:
        """A checkpoint was saved at ``step`` (by rank 0; every rank calls this)."""
        self.saved_at = step

    def emit(self, info):
        """``info``: the interval's step record (the metrics file's "step" event)."""
        if self.tb is not None:
            self.tb.scalars(info["step"], loss=info["loss"], lr=info["lr"], samples_per_sec=info["images_per_sec"],
                            gpu_util=info["gpu_util"])
        if not self.on:
            return
        from ddp_train.observe import progress

        saved = self.metrics.last_checkpoint
        ckpt_step, ckpt_path = saved if saved else (None, None)
        if self.saves_checkpoints and self.saved_at >= 0 and (ckpt_step is None or self.saved_at > ckpt_step):
            ckpt_step, ckpt_path = self.saved_at, None  # saved by rank 0: this rank knows the step only
        if ckpt_step is None:
            ckpt_step, ckpt_path = self.resumed
        progress.report(step=info["step"], total=self.total, epoch=info["epoch"] + 1, epochs=self.epochs,
                        loss=info["loss"], lr=info["lr"], samples_per_sec=info["images_per_sec"],
                        step_time_s=info["step_time_s"], gpu_util=info["gpu_util"], gpu_mem_gb=self.gpu.mem_gb(),
                        checkpoint_step=ckpt_step, checkpoint_path=ckpt_path,
                        wall_time_s=round(self.elapsed(), 3),
                        rank=self.rank, world_size=self.world_size, local_rank=self.local_rank)

    def epoch_done(self, step, test_acc):
        """The epoch that ends at global ``step`` was evaluated (``test_acc``; None: not evaluated)."""
        if self.tb is not None and test_acc is not None:
            self.tb.scalars(step, test_acc=test_acc)
