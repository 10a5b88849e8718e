"""The trainer: builds the run's parts (runtime, inputs, model and optimizer, step runner, checks, metrics) and
runs the loop over them; docs/architecture.md maps the parts."""

from __future__ import annotations

import os
import random
import sys
import time

import torch

from ddp_train.checkpoint import state as checkpoint_state
from ddp_train.checkpoint import storage as ckpt_mod
from ddp_train.comm import compression
from ddp_train.config import run_plan
from ddp_train.config.run_config import RunConfig
from ddp_train.config.settings import WORKLOAD_DEFAULTS
from ddp_train.data import inputs
from ddp_train.data.position import Position, run_length
from ddp_train.errors import EXIT_INTERNAL, TrainError
from ddp_train.loop import faults, preempt
from ddp_train.loop.evaluation import Checks
from ddp_train.loop.step_runner import StepRunner
from ddp_train.loop.step_timer import StepTimer
from ddp_train.model import compute_probe, parts
from ddp_train.observe import summary as summary_mod
from ddp_train.observe.interval_log import IntervalLog, emit, epoch_line
from ddp_train.observe.metrics import EpochBar, GpuStats, MetricsFile, ProgressRecords, device_name
from ddp_train.observe.profiler import StepProfiler
from ddp_train.observe.summary import Outcome
from ddp_train.runtime.process import Runtime


class Trainer:
    def __init__(self, config: RunConfig):
        self.config = config
        self.rt = Runtime(config)

    def setup(self):
        a, rt, d = self.config, self.rt, WORKLOAD_DEFAULTS[self.config.workload]
        torch.manual_seed(a.seed)  # same initial weights on every rank (DDP also broadcasts rank 0's)
        random.seed(a.seed + rt.rank)
        num = parts.numerics(a, rt)
        self.per_rank_batch = a.batch_size * num.n_dp
        self.global_batch = gb = self.per_rank_batch * rt.world
        self.inputs = inp = inputs.build(a, rt, d, per_rank_batch=self.per_rank_batch, amp_dtype=num.amp_dtype,
                                         channels_last=num.channels_last)
        self.steps_per_epoch = len(inp.loader)
        total_steps = self.steps_per_epoch * a.epochs
        self.stop_at = min(total_steps, a.max_steps) if a.max_steps else total_steps
        shape = tuple(inp.train_split.images.shape[1:])
        torch_dir = os.path.dirname(torch.__file__)
        graph_guess = run_plan.graph_mode_guess(a, device_type=rt.device.type, strategy=rt.strategy,
                                                precision=num.precision, planned_steps=self.stop_at,
                                                distributed=rt.distributed, torch_dir=torch_dir)
        comm = compression.decide(
            compression=a.grad_compression, graph_reducer=a.graph_reducer, bucket_mb=a.bucket_mb, device=rt.device,
            world=rt.world, distributed=rt.distributed, graph_mode=graph_guess,
            bf16_compute=num.amp_dtype == torch.bfloat16,
            compute_probe=lambda: compute_probe.measure(
                model=a.model, shape=shape, num_classes=int(d.num_classes), batch=self.per_rank_batch,
                device=rt.device, amp_dtype=num.amp_dtype, channels_last=num.channels_last, graph=graph_guess))
        # planned on the whole run (a resumed run plans the same way, so it picks the same mode)
        self.plan = plan = run_plan.decide(a, comm, device_type=rt.device.type, strategy=rt.strategy,
                                           precision=num.precision, planned_steps=self.stop_at, stop_at=self.stop_at,
                                           distributed=rt.distributed, torch_dir=torch_dir)
        self.log_interval = a.log_interval or max(1, self.steps_per_epoch // 10)
        self.p = p = parts.build(a, rt, graph_mode=plan.graph_mode, shape=shape,
                                 num_classes=int(d.num_classes), global_batch=gb,
                                 steps_per_epoch=self.steps_per_epoch, total_steps=total_steps, num=num)
        self.resumed_from, self.pos = checkpoint_state.resume(
            a, rt, p, per_rank_batch=self.per_rank_batch, length=inp.train_split.length) if a.resume else (None, Position())
        self.epoch_steps = inp.loader.epoch_steps(self.pos.segment)
        if self.resumed_from:  # from where it stands: another world size or batch changes the epochs' steps
            self.stop_at = run_length(self.pos, epoch_steps=self.epoch_steps, steps_per_epoch=self.steps_per_epoch,
                                      epochs=a.epochs, max_steps=a.max_steps)[1]
        self.control = preempt.StopControl(distributed=rt.multi, rank=rt.rank,
                                           interval_s=a.checkpoint_interval.seconds if a.output_dir else 0.0)
        parts.wrap(a, rt, p, plan=plan, n_dp=num.n_dp)
        self.acc = torch.zeros(2, device=rt.device)  # this epoch's training loss sum and correct count
        self.runner = StepRunner(rt, p, graph_mode=plan.graph_mode, pre_capture_iters=plan.step.pre_capture_iters,
                                 acc=self.acc)
        self.metrics = MetricsFile.for_run(metrics_file=a.metrics_file, output_dir=a.output_dir, is0=rt.is0)
        self.checks = Checks(a, rt, p, self.runner, self.metrics, eval_pipeline=inp.eval_pipeline,
                             test_split=inp.test_split)
        # every rank's buffers are a per-step broadcast's as of here (the reducer has just broadcast them all; a
        # resumed run's ranks all loaded rank 0's checkpoint)
        self.checks.buffers_as_of = self.pos.global_step
        self.gpu = GpuStats(rt.device)
        self.gpu.start()
        self.bar = rt.is0 and not a.quiet and (a.progress == "bar" or (a.progress == "auto" and sys.stderr.isatty()))
        self.header = summary_mod.header(
            a, rt, device_name=device_name(rt.device), inputs=inp, parts=p, num=num, plan=plan,
            per_rank_batch=self.per_rank_batch, steps_per_epoch=self.steps_per_epoch)
        self.header["comm_reason"] = comm.reason  # the step plan's reason is in the header already
        if comm.link_gbps is not None:  # measured at start-up, or given by DDP_TRAIN_LINK_GBPS
            self.header["link_busbw_gbps"] = round(comm.link_gbps, 2)
        if comm.predicted:  # the link and the step's compute were measured (compression.py)
            self.header["predicted_efficiency"] = round(comm.predicted.efficiency, 3)
            self.header["step_compute_s"] = round(comm.predicted.compute_s, 5)
        rt.say("ddp-train: step: " + plan.step.describe() + " | comm: " + comm.describe() + " | "
               + " ".join(f"{k}={v}" for k, v in self.header.items() if not k.endswith("_reason")))
        self.metrics.write("start", **self.header)

    def save_checkpoint(self, tag):
        """Every rank: its RNG states to rank 0, which writes the checkpoint (with --output-dir)."""
        if not self.config.output_dir:
            return None
        path = checkpoint_state.save(self.config, self.rt, self.p, self.pos, tag, metrics=self.metrics,
                                     per_rank_batch=self.per_rank_batch, epoch_steps=self.epoch_steps,
                                     steps_per_epoch=self.steps_per_epoch, train_samples=self.inputs.train_split.length)
        self.control.saved()
        return path

    def train(self):
        """Epochs of steps from where the run stands to its last step, then the end-of-run evaluation and sync
        check; writes the summary line (rank 0) and returns the exit code. A stop request leaves by Preempted."""
        a, rt, pos = self.config, self.rt, self.pos
        timer = StepTimer(self.plan.untimed_steps, sync=rt.sync_device, gpu=self.gpu)
        outcome = Outcome()
        self.saved_at = -1  # the last checkpoint's step
        self.records = ProgressRecords(
            on=a.progress_records == "on", tensorboard=a.tensorboard if rt.is0 else None, total=self.stop_at,
            epochs=a.epochs, saves_checkpoints=bool(a.output_dir), metrics=self.metrics, gpu=self.gpu,
            resumed=(pos.global_step, self.resumed_from) if self.resumed_from else None, elapsed=rt.elapsed,
            rank=rt.rank, world_size=rt.world, local_rank=rt.launch.local_rank)
        self.runner.start()
        self.prof = StepProfiler(a.profile_dir, a.profile_steps, rt.rank, rt.device, self.plan.untimed_steps,
                                 self.stop_at, pos.global_step)
        stop = pos.global_step >= self.stop_at
        if stop:
            rt.say("ddp-train: nothing left to train (already at the last step)")
        self.p.model.train()
        self.control.install()
        self.control.saved()  # the time cadence counts from the start of training
        timer.resume(pos.global_step)
        while not stop and pos.epoch < a.epochs:
            epoch, full_epoch = pos.epoch, pos.step_in_epoch == 0
            rt.sync_device()
            t_epoch = time.perf_counter()
            self.acc.zero_()
            seen, stop = self._epoch(epoch, timer, outcome)
            completed = pos.step_in_epoch >= self.epoch_steps
            ep_time = time.perf_counter() - t_epoch
            if seen:
                loss_sum, correct = self.acc.tolist()
                outcome.train_loss, outcome.train_acc = loss_sum / seen, correct / seen
            if completed and full_epoch:
                outcome.epoch_time = ep_time
            if outcome.sync is not None:
                break
            if completed:
                self._epoch_done(epoch, ep_time, outcome)
            if self.saved_at != pos.global_step and (completed or stop):
                self.save_checkpoint("epoch" if completed else "stop")
                self._saved(pos.global_step)
            timer.resume(pos.global_step)
        timer.pause()
        if outcome.sync is None and pos.epoch < a.epochs and not (a.max_steps and pos.global_step >= a.max_steps):
            raise TrainError(f"the run stopped at step {pos.global_step}, in epoch {pos.epoch + 1} of {a.epochs}, "
                             "before its end (a bug: please report it)", EXIT_INTERNAL)  # never exit 0 for it
        if self.prof.prof is not None:  # the run ended inside the profiled steps
            self.prof.write(pos.global_step)
        self.control.drain()
        self.control.uninstall()
        if outcome.test_acc is None and not a.no_eval and outcome.sync is None:
            outcome.test_acc, outcome.test_loss = self.checks.evaluate(pos.global_step)
        if outcome.sync is None and a.sync_check == "end" and rt.multi:
            outcome.sync = self.checks.sync_check(pos.global_step)
        return self._write_summary(timer, outcome)

    def _epoch(self, epoch, timer, outcome):
        """This epoch's steps, from where the run stands to the epoch's end or the run's last step, with its log
        lines. Returns (samples seen, whether the run stops); a failed sync check stops it (in `outcome.sync`)."""
        a, rt, pos = self.config, self.rt, self.pos
        seen, stop = 0, False
        log = IntervalLog(rt.device, lambda rec: emit(rec, rt=rt, metrics=self.metrics, gpu=self.gpu, epochs=a.epochs,
                                                      global_batch=self.global_batch, epoch_steps=self.epoch_steps, records=self.records))
        log.start()
        bar = EpochBar(self.epoch_steps, f"epoch {epoch + 1}/{a.epochs}") if self.bar else None
        it = self.inputs.loader.epoch(epoch, pos.step_in_epoch, pos.segment)
        while True:
            batch, dt = timer.fetch(it)
            if batch is None:
                break
            x, y = batch
            self.prof.before(pos.global_step)
            self.checks.sync_buffers_before_step(pos, self.stop_at, self.epoch_steps)
            self.runner.step(x, y, pos.global_step)
            self.p.schedule.step()
            pos.stepped()
            seen += y.shape[0]
            log.stepped(dt)
            faults.after_step(a, rank=rt.rank, world=rt.world, epoch=epoch, step_in_epoch=pos.step_in_epoch,
                              global_step=pos.global_step, loader=self.inputs.loader, core=self.p.core)
            timer.step_done(pos.global_step, dt)
            self.prof.after(pos.global_step, timer, rt.say)  # --profile-dir: written off the clock
            last = pos.global_step >= self.stop_at or pos.step_in_epoch >= self.epoch_steps
            is_log = pos.step_in_epoch % self.log_interval == 0 or last
            if bar or is_log:
                log.mark(self.acc, dict(epoch=epoch, step=pos.global_step, step_in_epoch=pos.step_in_epoch,
                                        lr=self.p.schedule.lr(), seen=seen, bar=bar, log=is_log, last=last))
                log.write_ready(wait=bool(bar) or last)
            failed = self._between_steps(timer, last)
            if failed is not None:
                outcome.sync, stop = failed, True
                break
            if pos.global_step >= self.stop_at:
                stop = True
                break
        timer.pause()
        log.write_ready(wait=True)
        if bar:
            bar.close()
        return seen, stop

    def _between_steps(self, timer, last):
        """Every rank, every step: agree on a stop request (SIGTERM/SIGUSR1) and the time cadence, then save a
        checkpoint and check the ranks' sync where due, off the clock. Returns a failed sync check's result."""
        a, step = self.config, self.pos.global_step
        decision = self.control.poll()
        if decision.stop:
            timer.pause()
            self._preempted(decision.stop)
        every = a.checkpoint_interval.steps and step % a.checkpoint_interval.steps == 0
        if (every or decision.save) and not last:
            timer.pause()
            self.save_checkpoint("every" if every else "interval")
            self._saved(step)
            timer.resume(step)
        if a.sync_check_every and step % a.sync_check_every == 0 and self.rt.multi and not last:
            timer.pause()
            res = self.checks.sync_check(step)
            if res["result"] == "fail":
                return res
            timer.resume(step)
        return None

    def _epoch_done(self, epoch, ep_time, o):
        """The epoch ran to its end: evaluate (unless --no-eval), then its metrics record and line."""
        o.epochs_completed += 1
        self.pos.next_epoch()
        if not self.config.no_eval:
            o.test_acc, o.test_loss = self.checks.evaluate(self.pos.global_step)
        epoch_line(o, epoch, ep_time, rt=self.rt, metrics=self.metrics, gpu=self.gpu, epochs=self.config.epochs,
                   step=self.pos.global_step, records=self.records)
        self.epoch_steps = self.steps_per_epoch

    def _write_summary(self, timer, outcome):
        """The summary line on rank 0's stdout (and in its metrics file); returns the run's exit code."""
        a, r = self.config, self.runner
        summary = summary_mod.build(
            self.header, timer, outcome, steps=self.pos.global_step, gpu_util=self.gpu.mean_util(),
            gpu_mem_gb=self.gpu.mem_gb(), startup_s=r.startup_s, pre_capture_s=r.pre_capture_s, capture_s=r.capture_s,
            checkpoint=(ckpt_mod.list_checkpoints(a.output_dir) or [None])[-1] if a.output_dir else None,
            resumed_from=self.resumed_from, wall_time_s=round(self.rt.elapsed(), 3))
        if self.rt.is0:
            summary_mod.write(summary, self.metrics)
        return summary["exit_code"]

    def _preempted(self, signame):
        """All ranks agreed to stop at this step: save here (once) and leave with the retryable code."""
        a, rt, step = self.config, self.rt, self.pos.global_step
        path = None
        if a.output_dir:
            path = self.save_checkpoint("preempt") if self.saved_at != step else \
                ckpt_mod.list_checkpoints(a.output_dir)[-1] if rt.is0 else None
        preempt.leave(self.control, signame, step=step, epoch=self.pos.epoch, path=path, saved=bool(a.output_dir),
                      metrics=self.metrics if rt.is0 else None)

    def _saved(self, step):
        """A checkpoint was saved at ``step`` (every rank: rank 0 wrote it)."""
        self.saved_at = step
        self.records.saved(step)

    def close(self):
        self.rt.close(graph_captured=self.runner.graph is not None)


def run(config: RunConfig) -> int:
    t = Trainer(config)
    t.setup()
    code = t.train()
    t.close()
    return code
