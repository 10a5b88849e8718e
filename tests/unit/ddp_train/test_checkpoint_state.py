"""ddp_train.checkpoint.state in one CPU process with real torch: the payload, save and resume (parts, position,
RNG states), --resume auto with nothing there, and checkpoints that do not fit the run (another optimizer or
training set, hostile parts whose sidecar is right): one line, exit 5, before anything trains."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json

import pytest
import torch
from parts_builder import TINY, build

from ddp_train.checkpoint import state as checkpoint_state
from ddp_train.checkpoint import storage as checkpoint
from ddp_train.data.position import Position
from ddp_train.errors import EXIT_CHECKPOINT, TrainError
from ddp_train.loop.step_runner import StepRunner
from ddp_train.model import parts


def test_checkpoint_state_round_trip_restores_parts_position_and_rng(tmp_path):
    argv = TINY + ["--output-dir", str(tmp_path)]
    a, rt, num, inp, plan, p = build(argv)
    parts.wrap(a, rt, p, plan=plan, n_dp=1)
    for step, (x, y) in zip(range(3), inp.loader.epoch(0), strict=False):
        StepRunner(rt, p, graph_mode=False, pre_capture_iters=0, acc=torch.zeros(2)).step(x, y, step)
        p.schedule.step()
    pos = Position(epoch=0, step_in_epoch=3, global_step=3)
    body = checkpoint_state.payload(model=p.core, optimizer=p.optimizer, schedule=p.schedule, pos=pos,
                                    rngs=checkpoint_state.gather_rng(rt), global_batch=32, epoch_steps=4,
                                    steps_per_epoch=4, config=checkpoint_state.identity(
                                        a, world=1, per_rank_batch=32, strategy="single", train_samples=128))
    assert set(checkpoint.REQUIRED) - {"format"} <= set(body)
    assert (body["epoch_sample"], body["segment"], body["samples_done"]) == (96, None, 96)
    path = checkpoint.save(str(tmp_path), body)
    want_rand = torch.rand(3)  # what this process draws next
    # a fresh run resumes from it: same weights, optimizer, schedule, position and RNG stream
    a2, rt2, _, inp2, _, p2 = build(argv + ["--resume", "auto"])
    got_path, got_pos = checkpoint_state.resume(a2, rt2, p2, per_rank_batch=32, length=inp2.train_split.length)
    assert got_path == path and got_pos == pos
    for t1, t2 in zip(p.core.state_dict().values(), p2.core.state_dict().values(), strict=True):
        assert torch.equal(t1, t2)
    assert p2.schedule.state_dict() == p.schedule.state_dict() and p2.schedule.samples_done == 96
    assert p2.optimizer.param_groups[0]["lr"] == p.optimizer.param_groups[0]["lr"]
    assert torch.equal(torch.rand(3), want_rand)


def test_resume_auto_with_nothing_there_starts_fresh_and_a_named_missing_one_is_refused(tmp_path):
    a, rt, _, inp, _, p = build(TINY + ["--output-dir", str(tmp_path), "--resume", "auto"])
    assert checkpoint_state.resume(a, rt, p, per_rank_batch=32, length=128) == (None, Position())
    a = dataclasses.replace(a, resume=str(tmp_path / "none.pt"))
    with pytest.raises(TrainError, match="not usable"):
        checkpoint_state.resume(a, rt, p, per_rank_batch=32, length=128)


def _saved(tmp_path, argv=(), step=3):
    """A checkpoint of a TINY run (with ``argv``) at ``step`` of epoch 0, as Trainer saves it; returns its path."""
    a, rt, _, _, _, p = build(TINY + ["--output-dir", str(tmp_path), *argv])
    for _ in range(step):  # some optimizer state to save
        p.core(torch.zeros(2, 3, 32, 32)).sum().backward()
        p.optimizer.step()
        p.schedule.step()
    body = checkpoint_state.payload(
        model=p.core, optimizer=p.optimizer, schedule=p.schedule, pos=Position(0, step, step),
        rngs=checkpoint_state.gather_rng(rt), global_batch=32, epoch_steps=4, steps_per_epoch=4,
        config=checkpoint_state.identity(a, world=1, per_rank_batch=32, strategy="single", train_samples=128))
    return checkpoint.save(str(tmp_path), body)


def _rewrite(path, change):
    """Change a saved checkpoint's content and write a sidecar that matches it (a hostile file passes validate)."""
    ckpt = torch.load(path, weights_only=True)
    change(ckpt)
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    data = buf.getvalue()
    open(path, "wb").write(data)
    meta = {"format": checkpoint.FORMAT, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    open(path + ".json", "w").write(json.dumps(meta))


def _refused(tmp_path, argv=(), length=128) -> str:
    a, rt, _, _, _, p = build(TINY + ["--output-dir", str(tmp_path), "--resume", "auto", *argv])
    with pytest.raises(TrainError) as got:
        checkpoint_state.resume(a, rt, p, per_rank_batch=32, length=length)
    text = str(got.value)
    assert got.value.code == EXIT_CHECKPOINT and "\n" not in text and len(text) < 1000, text
    assert "\x1b" not in text and "\x07" not in text
    return text


def test_a_checkpoint_of_another_optimizer_is_refused_by_its_config_or_for_an_older_file_by_its_groups(tmp_path):
    _saved(tmp_path)
    assert "saved with --optimizer sgd, this run has --optimizer adamw" in _refused(tmp_path, ["--optimizer", "adamw"])
    _rewrite(checkpoint.list_checkpoints(str(tmp_path))[-1], lambda c: c["config"].pop("optimizer"))
    assert "saved with --optimizer sgd" in _refused(tmp_path, ["--optimizer", "adamw"])


def test_an_adamw_checkpoint_resumes_with_adamw_and_is_refused_with_sgd(tmp_path):
    _saved(tmp_path, ["--optimizer", "adamw"])
    a, rt, _, _, _, p = build(TINY + ["--output-dir", str(tmp_path), "--resume", "auto", "--optimizer", "adamw"])
    assert checkpoint_state.resume(a, rt, p, per_rank_batch=32, length=128)[1] == Position(0, 3, 3)
    assert "saved with --optimizer adamw" in _refused(tmp_path)


def test_a_checkpoint_of_another_training_set_size_is_refused(tmp_path):
    _saved(tmp_path)
    text = _refused(tmp_path, length=64)
    assert "it was saved with 128 training samples, this run has 64" in text and "--train-size 128" in text
    # a file of an older version, without the size: its epochs' steps tell
    _rewrite(checkpoint.list_checkpoints(str(tmp_path))[-1], lambda c: c["config"].pop("train_samples"))
    assert "its epochs have 4 steps of 1 x 32 samples, this run's 100 training samples give 3" in _refused(
        tmp_path, length=100)
    assert "its epoch stands at sample 96, past this run's 64 training samples" in _refused(tmp_path, length=64)


HOSTILE = {
    "config-not-a-dict": (lambda c: c.update(config="x"), "its config is not a dict"),
    "model-extra-key": (lambda c: c["model"].update({"\x1b]0;pwned\x07" + "k" * 3000: torch.zeros(1)}),
                        "its model does not fit this run (it has keys this model lacks: \\x1b]0;pwned\\x07kk"),
    "model-missing-key": (lambda c: c["model"].pop(next(iter(c["model"]))), "its model does not fit this run (it lacks"),
    "model-shape": (lambda c: c["model"].update({k: torch.zeros(7) for k in list(c["model"])[:1]}),
                    "has other shapes for"),
    "rng": (lambda c: c.update(rng=[{"torch": torch.zeros(3, dtype=torch.uint8), "python": [1]}]),
            "its RNG state does not fit this run"),
    "scheduler-empty": (lambda c: c.update(scheduler={}), "its scheduler state does not fit this run (ValueError: its base_lrs"),
    "optimizer-state-shape": (lambda c: c["optimizer"]["state"][0].update(momentum_buffer=torch.zeros(5)),
                              "its optimizer state does not fit this run (its momentum_buffer has shape (5,)"),
    "optimizer-groups": (lambda c: c["optimizer"].update(param_groups=[]), "its optimizer state does not fit"),
    "world-size-zero": (lambda c: c["config"].update(world_size=0), "its config.world_size is not a positive integer"),
    "epoch-negative": (lambda c: c.update(epoch=-1), "its epoch is not a non-negative integer"),
    "empty": (lambda c: c.clear(), "missing ['format', 'model',"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_checkpoint_with_a_right_sidecar_is_one_line_exit_5(tmp_path, case):
    change, needle = HOSTILE[case]
    _rewrite(_saved(tmp_path), change)
    assert needle in _refused(tmp_path)
