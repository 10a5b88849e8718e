"""ddp_train.checkpoint.storage: save, keep, list and validate checkpoint files (a damaged newest one is skipped,
never loaded; a bad explicit --resume exits 5; a sidecar or a loaded object of another shape, a missing file or a
directory is a reason, never an exception; foreign text in the error escaped and bounded); and writes that hit a full disk
or a read-only mount: one line naming the directory and its free space (exit 7, permanent), the previous
checkpoint intact, no temp file left. On a real tmpfs of a few hundred KiB (root only: mounting needs it), so the
error is the kernel's own ENOSPC / EROFS."""

from __future__ import annotations

import hashlib
import json
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


@pytest.mark.parametrize("sidecar,why", [
    ("null", "not one ddp-train writes"),
    ("[1, 2]", "not one ddp-train writes"),
    ('{"bytes": "12", "sha256": "x"}', "not one ddp-train writes"),
    ('{"bytes": 1e999, "sha256": "x"}', "not one ddp-train writes"),
    ("[" * 100_000, "not one ddp-train writes"),  # too deep for json, and larger than any sidecar
    ("{not json", "not one ddp-train writes"),
])
def test_a_sidecar_of_another_shape_is_a_reason_never_an_exception(tmp_path, sidecar, why):
    path = checkpoint.save(str(tmp_path), payload(1))
    (tmp_path / "ckpt-00000001.pt.json").write_text(sidecar)
    assert why in checkpoint.validate(path)
    assert checkpoint.newest_valid(str(tmp_path)) == (None, [(path, checkpoint.validate(path))])  # skipped
    with pytest.raises(TrainError) as got:
        checkpoint.load(path)
    assert got.value.code == 5 and why in str(got.value)


def test_a_missing_file_or_a_directory_is_named_as_such(tmp_path):
    assert checkpoint.validate(str(tmp_path / "nope.pt")) == "no such file"
    assert checkpoint.validate(str(tmp_path)) == "it is a directory"
    with pytest.raises(TrainError, match=r"is not usable: no such file; pass a checkpoint file .*--resume auto"):
        checkpoint.load(str(tmp_path / "nope.pt"))
    with pytest.raises(TrainError, match=r"is not usable: it is a directory; compare two files$"):
        checkpoint.load(str(tmp_path), fix="compare two files")


def _hostile(tmp_path, obj):
    """A file torch.load reads as ``obj``, with a sidecar that matches it."""
    path = str(tmp_path / "ckpt-00000001.pt")
    torch.save(obj, path)
    data = open(path, "rb").read()
    (tmp_path / "ckpt-00000001.pt.json").write_text(json.dumps({"bytes": len(data),
                                                                "sha256": hashlib.sha256(data).hexdigest()}))
    return path


@pytest.mark.parametrize("obj,why", [
    ([1, 2], "it holds a list, not a dict"),
    ({**payload(1), "format": checkpoint.FORMAT, "config": None}, "its config is not a dict"),
    ({**payload(1), "format": checkpoint.FORMAT, "model": {"w": [1.0]}}, "its model is not a state_dict of named"),
    ({**payload(1), "format": checkpoint.FORMAT, "step": True}, "its step is not a non-negative integer"),
    ({**payload(1), "format": checkpoint.FORMAT, "segment": [1]}, "its segment is not (start sample, start step)"),
    ({**payload(1), "format": checkpoint.FORMAT, "schedule": {"total": "x"}}, "its schedule is not {total, warm}"),
    ({**payload(1), "format": checkpoint.FORMAT, "config": {"per_rank_batch": 0}}, "its config.per_rank_batch is not a positive"),
])
def test_a_loaded_object_of_another_shape_is_not_a_checkpoint(tmp_path, obj, why):
    with pytest.raises(TrainError) as got:
        checkpoint.load(_hostile(tmp_path, obj))
    assert got.value.code == 5 and f"is not a ddp-train checkpoint ({why}" in str(got.value)


def test_a_load_error_naming_terminal_controls_is_escaped_and_bounded(tmp_path):
    path = str(tmp_path / "ckpt-00000001.pt")
    checkpoint.save(str(tmp_path), payload(1))
    # a pickle that names a global weights_only refuses: the name is the file's text
    evil = "\x1b]0;pwned\x07\x1b[2J" + "A" * 5000
    raw = b"\x80\x02c" + evil.encode() + b"\nx\n."
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", raw)
        z.writestr("archive/version", "3\n")
    data = open(path, "rb").read()
    (tmp_path / "ckpt-00000001.pt.json").write_text(json.dumps({"bytes": len(data),
                                                                "sha256": hashlib.sha256(data).hexdigest()}))
    with pytest.raises(TrainError) as got:
        checkpoint.load(path)
    text = str(got.value)
    assert got.value.code == 5 and "does not load" in text
    assert "\x1b" not in text and "\x07" not in text and len(text) < 800, text


def test_an_output_dir_that_is_a_file_says_so_not_free_space(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    with pytest.raises(TrainError) as got:
        checkpoint.save(str(blocker), payload(1))
    assert got.value.code == EXIT_STORAGE
    assert "is a file, not a directory" in str(got.value) and "free space" not in str(got.value)
