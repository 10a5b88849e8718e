"""``--profile-dir``: torch.profiler over a few training steps of the timed window, on every rank.

Writes ``DIR/trace-rank<R>.json.gz`` (Chrome trace; the kernels of CUDA-graph replays are in it, each carrying
its ``cudaGraphLaunch``'s correlation id) and ``DIR/kernels-rank<R>.txt`` (the top operators by self time).
benchmarks/trace_breakdown.py reads the traces. The profiled steps are timed with the profiler on.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys

import torch


class StepProfiler:
    def __init__(self, out_dir, steps, rank, device, untimed_steps, stop_at, first_step):
        self.out_dir, self.rank, self.device = out_dir, rank, device
        # from the 5th timed step, or as late as the run allows; never before where this run starts
        self.start = max(first_step, min(untimed_steps + 5, stop_at - steps))
        self.end = min(stop_at, self.start + steps)
        self.prof = None
        self.recorded = 0

    def before(self, step):
        """Call before the step that starts at global step ``step`` (0-based)."""
        if self.out_dir and self.prof is None and not self.recorded and step == self.start:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
            self.prof = profile(activities=acts)
            self.prof.__enter__()

    def due(self, steps_done):
        """True once the last profiled step is done: the caller stops its clock and calls write()."""
        return self.prof is not None and steps_done >= self.end

    def after(self, steps_done, timer, say):
        """After a step: once the last profiled step is done, write the files off ``timer``'s clock."""
        if self.due(steps_done):
            timer.pause()
            if self.write():
                say(f"ddp-train: profile of {self.recorded} steps written to {self.out_dir}")
            timer.resume(steps_done)

    def write(self, steps_done=None):
        """Stop recording and write this rank's files (``steps_done``: where a run that ended early stopped); False
        (after one warning line) when they could not be written."""
        if steps_done is not None:
            self.end = steps_done
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.prof.__exit__(None, None, None)
        prof, self.prof = self.prof, None
        self.recorded = self.end - self.start
        raw = os.path.join(self.out_dir, f"trace-rank{self.rank}.json")
        try:
            os.makedirs(self.out_dir, exist_ok=True)
            prof.export_chrome_trace(raw)
            with open(raw, "rb") as src, gzip.open(raw + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.remove(raw)
            sort = "self_cuda_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
            with open(os.path.join(self.out_dir, f"kernels-rank{self.rank}.txt"), "w") as f:
                f.write(f"{self.recorded} steps (global steps {self.start + 1}-{self.end})\n")
                f.write(prof.key_averages().table(sort_by=sort, row_limit=40) + "\n")
        except OSError as exc:  # checked at the start (config.output_paths); a disk that filled since: the run goes on
            if os.path.exists(raw):
                os.remove(raw)
            print(f"ddp-train: warning: cannot write the profile to {self.out_dir} ({exc.strerror or exc}); the run "
                  "goes on without it", file=sys.stderr, flush=True)
            return False
        return True
