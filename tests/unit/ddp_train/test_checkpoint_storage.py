"""ddp_train.checkpoint.storage: save, keep, list and validate checkpoint files (a damaged newest one is skipped,
never loaded; a bad explicit --resume exits 5); and writes that hit a full disk
or a read-only mount: one line naming the directory and its free space (exit 7, permanent), the previous
checkpoint intact, no temp file left. On a real tmpfs of a few hundred KiB (root only: mounting needs it), so the
error is the kernel's own ENOSPC / EROFS."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

torch = pytest.importorskip("torch")

from ddp_train.__main__ import main  # noqa: E402
from ddp_train.checkpoint import storage as checkpoint  # noqa: E402
from ddp_train.errors import EXIT_STORAGE, TrainError  # noqa: E402


@pytest.fixture
def tiny(tmp_path):
    if os.geteuid() != 0:
        if os.environ.get("DDPCTL_REQUIRE_DOCKER") == "1":
            pytest.fail("mounting a tmpfs needs root")
        pytest.skip("mounting a tmpfs needs root")
    d = tmp_path / "ckpt"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "ddpctl-test-tiny", str(d)], check=True)
    yield d
    subprocess.run(["umount", str(d)], check=False)


def _payload(step: int, floats: int) -> dict:
    return {"model": {"w": torch.zeros(floats)}, "optimizer": {}, "scheduler": {}, "epoch": 0, "step": step,
            "step_in_epoch": step, "config": {}}


def test_a_full_disk_keeps_the_previous_checkpoint_and_says_where_and_how_much(tiny):
    first = checkpoint.save(str(tiny), _payload(2, 20_000))  # ~80 KB
    with pytest.raises(TrainError) as got:
        checkpoint.save(str(tiny), _payload(4, 60_000))  # ~240 KB: does not fit beside the first
    err = got.value
    assert err.code == EXIT_STORAGE == 7 and not err.retryable
    text = str(err)
    assert text.startswith(f"cannot write a checkpoint to {tiny}: No space left on device (")
    assert re.search(r"\(\d+\.\d KiB free, this checkpoint needs 23\d\.\d KiB\)", text), text
    assert "the previous checkpoint ckpt-00000002.pt is intact" in text and "\n" not in text
    assert sorted(os.listdir(tiny)) == ["ckpt-00000002.pt", "ckpt-00000002.pt.json"]  # no temp file, no half file
    assert checkpoint.validate(first) is None
    assert checkpoint.newest_valid(str(tiny))[0] == first


def test_a_read_only_mount_fails_in_one_line(tiny):
    checkpoint.save(str(tiny), _payload(2, 1000))
    subprocess.run(["mount", "-o", "remount,ro", str(tiny)], check=True)
    with pytest.raises(TrainError) as got:
        checkpoint.save(str(tiny), _payload(4, 1000))
    assert got.value.code == 7
    assert str(got.value).startswith(f"cannot write a checkpoint to {tiny}: Read-only file system (")
    with pytest.raises(TrainError, match="Read-only file system"):
        checkpoint.save(str(tiny / "sub"), _payload(4, 1000))  # the directory cannot even be made


TINY = ["--workload", "toy", "--train-size", "128", "--test-size", "64", "--batch-size", "32", "--epochs", "1",
        "--strategy", "single", "--quiet"]


def payload(step, value=1.0):
    return {"model": {"w": torch.full((3,), value)}, "optimizer": {}, "scheduler": {}, "epoch": 0, "step": step,
            "step_in_epoch": step, "config": {"workload": "toy"}}


def test_checkpoint_roundtrip_keep_and_newest_valid(tmp_path):
    for s in (1, 2, 3, 4):
        checkpoint.save(str(tmp_path), payload(s, s), keep=3)
    names = [os.path.basename(p) for p in checkpoint.list_checkpoints(str(tmp_path))]
    assert names == ["ckpt-00000002.pt", "ckpt-00000003.pt", "ckpt-00000004.pt"]
    path, skipped = checkpoint.newest_valid(str(tmp_path))
    assert path.endswith("ckpt-00000004.pt") and not skipped
    assert torch.equal(checkpoint.load(path)["model"]["w"], torch.full((3,), 4.0))


@pytest.mark.parametrize("damage", ["truncate", "no-sidecar", "flip-byte"])
def test_damaged_newest_checkpoint_is_skipped_never_loaded(tmp_path, damage):
    checkpoint.save(str(tmp_path), payload(1))
    p2 = checkpoint.save(str(tmp_path), payload(2, 2.0))
    raw = open(p2, "rb").read()
    if damage == "truncate":
        open(p2, "wb").write(raw[: len(raw) // 2])
    elif damage == "no-sidecar":
        os.remove(p2 + ".json")
    else:
        open(p2, "wb").write(raw[:100] + bytes([raw[100] ^ 1]) + raw[101:])
    path, skipped = checkpoint.newest_valid(str(tmp_path))
    assert path.endswith("ckpt-00000001.pt") and skipped[0][0] == p2
    with pytest.raises(TrainError) as e:
        checkpoint.load(p2)
    assert e.value.code == 5


def test_resume_explicit_bad_checkpoint_exits_5(tmp_path, capsys):
    bogus = tmp_path / "ckpt-00000001.pt"
    bogus.write_bytes(b"junk")
    assert main(TINY + ["--resume", str(bogus)]) == 5
    assert "not usable" in capsys.readouterr().err
