"""ddp_train.data.position: the run position (fresh, checkpointed, resumed on the same or fewer ranks), and a
checkpoint of another training set told apart."""

from __future__ import annotations

from ddp_train.data.position import (
    Position,
    data_misfit,
    epoch_steps,
    resume_position,
    run_length,
    steps_per_epoch,
)


def _state(**kw):
    base = {"epoch": 0, "step_in_epoch": 3, "step": 3, "config": {"world_size": 3, "per_rank_batch": 32}}
    base.update(kw)
    return base


def test_steps_per_epoch_and_a_redealt_epoch():
    assert steps_per_epoch(512, 3, 32) == 5  # ceil(512 / 3) = 171 per rank: 5 whole batches
    assert epoch_steps(512, 3, 32, None) == 5
    assert epoch_steps(512, 2, 32, (288, 3)) == 3 + (512 - 288) // 64


def test_position_in_the_permutation_and_as_checkpointed():
    pos = Position(epoch=1, step_in_epoch=2, global_step=7)
    assert pos.epoch_sample(64) == 128
    assert pos.checkpoint_fields(64, 8, 8) == {"epoch_sample": 128, "segment": None, "epoch_steps": 8}
    redealt = Position(epoch=0, step_in_epoch=5, global_step=5, segment=(288, 3))
    assert redealt.epoch_sample(64) == 288 + 2 * 64
    assert redealt.checkpoint_fields(64, 6, 8) == {"epoch_sample": 416, "segment": [288, 3], "epoch_steps": 6}
    start = Position(epoch=1, step_in_epoch=0, global_step=8, segment=(288, 3))  # a segment ends with its epoch
    assert start.checkpoint_fields(64, 6, 8) == {"epoch_sample": 0, "segment": None, "epoch_steps": 8}
    pos.stepped()
    assert (pos.step_in_epoch, pos.global_step) == (3, 8)
    redealt.next_epoch()
    assert (redealt.epoch, redealt.step_in_epoch, redealt.segment) == (1, 0, None)


def test_resume_on_the_same_ranks_goes_on_with_the_same_deal():
    r = resume_position(_state(epoch_sample=288, segment=None, epoch_steps=5, samples_done=288,
                               schedule={"total": 960, "warm": 0}),
                        world=3, per_rank_batch=32, length=512, epochs=2, lr_warmup_epochs=0)
    assert r.position == Position(0, 3, 3, None) and not r.changed and not r.redealt
    assert (r.samples_done, r.plan) == (288, {"total": 960, "warm": 0})


def test_resume_on_fewer_ranks_redeals_the_rest_of_the_epoch():
    r = resume_position(_state(epoch_sample=288, epoch_steps=5), world=2, per_rank_batch=32, length=512,
                        epochs=2, lr_warmup_epochs=0.5)
    assert r.position == Position(0, 3, 3, (288, 3)) and r.changed and r.redealt
    assert (r.ck_world, r.ck_batch, r.epoch_sample) == (3, 32, 288)
    # an older checkpoint: no samples_done / schedule, so both follow from the checkpoint's own run
    assert r.samples_done == 3 * 96 and r.plan == {"total": 5 * 2 * 96, "warm": int(0.5 * 5) * 96}
    total, stop = run_length(r.position, epoch_steps=epoch_steps(512, 2, 32, (288, 3)), steps_per_epoch=8,
                             epochs=2, max_steps=None)
    assert total == stop == 3 + 3 + 8
    assert run_length(r.position, epoch_steps=6, steps_per_epoch=8, epochs=2, max_steps=10) == (14, 10)


def test_a_checkpoint_at_an_epochs_last_step_resumes_at_the_next_epoch():
    r = resume_position(_state(step_in_epoch=5, step=5, epoch_steps=5, segment=[100, 2]), world=2,
                        per_rank_batch=32, length=512, epochs=2, lr_warmup_epochs=0)
    assert r.position == Position(1, 0, 5, None) and r.changed and not r.redealt


def test_a_checkpoint_of_another_training_set_is_told_by_its_size_or_by_its_position():
    assert data_misfit(_state(config={"train_samples": 512}), 512) is None
    assert data_misfit(_state(config={"train_samples": 512}), 128) == \
        "it was saved with 512 training samples, this run has 128"
    # an older file, without the size: where its epoch stands, and the steps of its epochs
    old = _state(epoch_sample=320, epoch_steps=5)
    assert data_misfit(old, 512) is None
    assert data_misfit(old, 256) == "its epoch stands at sample 320, past this run's 256 training samples"
    assert data_misfit(old, 400) == "its epochs have 5 steps of 3 x 32 samples, this run's 400 training samples give 4"
    assert data_misfit(_state(epoch_sample=320, epoch_steps=6, segment=[288, 3]), 400) is None  # a re-dealt epoch
    assert data_misfit(_state(), 10) is None  # nothing recorded to tell by


def test_the_run_length_of_a_resume_at_an_epoch_end_with_a_larger_batch_trains_the_next_epoch():
    # saved at the end of epoch 1 of 16 steps of 32; resumed with a batch of 64 for 2 epochs: 8 more steps
    r = resume_position(_state(epoch=1, step_in_epoch=0, step=16, epoch_steps=16,
                               config={"world_size": 1, "per_rank_batch": 32}),
                        world=1, per_rank_batch=64, length=512, epochs=2, lr_warmup_epochs=0)
    assert r.changed and r.position == Position(1, 0, 16)
    assert run_length(r.position, epoch_steps=8, steps_per_epoch=8, epochs=2, max_steps=None) == (24, 24)
