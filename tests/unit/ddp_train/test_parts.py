"""ddp_train.model.parts in one CPU process with real torch: the parts a run builds (runtime, inputs, model,
optimizer, schedule) train and evaluate."""

from __future__ import annotations

import torch
from parts_builder import TINY, build

from ddp_train.loop.evaluation import Checks
from ddp_train.loop.step_runner import StepRunner
from ddp_train.model import parts
from ddp_train.observe.metrics import MetricsFile


def test_parts_build_a_model_that_trains_and_evaluates(tmp_path):
    a, rt, num, inp, plan, p = build(TINY)
    assert (rt.strategy, rt.world, rt.multi, str(rt.device)) == ("single", 1, False, "cpu")
    assert (num.precision, num.amp_dtype, num.channels_last, num.n_dp) == ("fp32", None, False, 1)
    assert inp.pipeline == "device" and len(inp.loader) == 4 and plan.step.mode == "eager"
    parts.wrap(a, rt, p, plan=plan, n_dp=1)
    assert p.model is p.core and p.reducer is None and p.buckets is None and p.compile_units is None
    acc = torch.zeros(2)
    runner = StepRunner(rt, p, graph_mode=False, pre_capture_iters=0, acc=acc)
    before = [t.detach().clone() for t in p.core.parameters()]
    lrs = []
    for step, (x, y) in enumerate(inp.loader.epoch(0)):
        runner.step(x, y, step)
        p.schedule.step()
        lrs.append(p.schedule.lr())
    assert acc[0] > 0 and 0 <= acc[1] <= 128  # the epoch's loss sum and correct count, on the device
    assert any(not torch.equal(b, t) for b, t in zip(before, p.core.parameters(), strict=True))
    assert lrs == sorted(lrs, reverse=True) and p.schedule.samples_done == 128  # cosine, by samples
    checks = Checks(a, rt, p, runner, MetricsFile(None), eval_pipeline=inp.eval_pipeline, test_split=inp.test_split)
    accuracy, loss = checks.evaluate(4)
    assert 0.0 <= accuracy <= 1.0 and loss > 0 and p.core.training  # back in training mode
