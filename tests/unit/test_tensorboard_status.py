"""Where ``ddpctl status`` says a job's TensorBoard event files are (ddpctl.joboutput.tensorboard), and the copy ``down``
keeps of files that would go with the job's volume. The containers are held in memory here; the real engine,
``docker cp``'s archive and tensorboard's reader: tests/integration/test_tensorboard_up.py."""

from __future__ import annotations

import io
import tarfile

from ddpctl.joboutput import kept_output, tensorboard
from ddpctl.local.engine_interface import ContainerInfo
from ddpctl.watch import sources, status

LAUNCH = ("ddp-train-launch", "--nnodes", "2", "--no-python")


def info(cmd, mounts=(), name="tb-node-0", host=""):
    return ContainerInfo("c0", name, {"ddpctl.job": "tb", "ddpctl.node-rank": "0"}, "exited", 0, 1.0,
                         command=LAUNCH + tuple(cmd), host=host, mounts=tuple(mounts))


def test_locate_maps_the_directory_through_the_mounts():
    vol = info(["ddp-train", "--tensorboard", "/checkpoints/tensorboard"], [("volume", "tb-ckpt", "/checkpoints")])
    assert tensorboard.locate(vol) == {"dir": "/checkpoints/tensorboard", "container": "tb-node-0", "host": None,
                                  "volume": "tb-ckpt", "host_path": None, "kept": None}
    bind = info(["ddp-train", "--tensorboard=/out/runs/tb"], [("bind", "/home/u/out", "/out"),
                                                              ("bind", "/home/u/runs", "/out/runs")])
    assert tensorboard.locate(bind)["host_path"] == "/home/u/runs/tb"  # the deepest mount wins
    assert tensorboard.locate(info(["ddp-train", "--tensorboard", "/tmp/tb"]))["host_path"] is None
    assert tensorboard.locate(info(["ddp-train", "--epochs", "1"])) is None
    assert tensorboard.locate(info(["python", "train.py", "--tensorboard", "/x"])) is None  # not ddp-train's flag


def test_describe_says_how_to_look_at_them():
    tb = tensorboard.locate(info(["ddp-train", "--tensorboard", "/checkpoints/tensorboard"],
                            [("volume", "tb-ckpt", "/checkpoints")]))
    assert tensorboard.describe(tb, "tb") == (
        "tensorboard: event files in /checkpoints/tensorboard of tb-node-0 (volume tb-ckpt; 'ddpctl down' keeps a "
        "copy); copy them out with: docker cp tb-node-0:/checkpoints/tensorboard ./tb-tensorboard, then: tensorboard "
        "--logdir ./tb-tensorboard")
    remote = dict(tb, host="ssh://me@gpu1")
    assert "docker -H ssh://me@gpu1 cp tb-node-0:" in tensorboard.describe(remote, "tb")
    assert "docker --context gpu1 cp" in tensorboard.describe(dict(tb, host="gpu1"), "tb")
    on_host = dict(tb, volume=None, host_path="/home/u/my runs/tensorboard")
    assert tensorboard.describe(on_host, "tb").endswith("tensorboard --logdir '/home/u/my runs/tensorboard'")
    assert tensorboard.describe(dict(tb, kept="/k/tb/tensorboard"), "tb") == (
        "tensorboard: event files kept in /k/tb/tensorboard; look at them with: tensorboard --logdir /k/tb/tensorboard")
    assert "no event files kept" in tensorboard.describe(dict(tb, removed=True), "tb")


def _archive(members) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, data in members:
            m = tarfile.TarInfo(name)
            if kind == "dir":
                m.type = tarfile.DIRTYPE
                tar.addfile(m)
            elif kind == "link":
                m.type, m.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(m)
            else:
                m.size = len(data)
                tar.addfile(m, io.BytesIO(data))
    return buf.getvalue()


class Engine:
    """A job's node 0 whose command has --tensorboard on its checkpoint volume; get_archive gives ``tar``."""

    def __init__(self, tar: bytes, mounts=(("volume", "tb-ckpt", "/checkpoints"),)):
        cmd = ["ddp-train", "--tensorboard", "/checkpoints/tensorboard"]
        self.c = info(cmd, mounts)
        self.tar, self.asked = tar, []

    def containers(self, label=None, name=None):
        return [self.c]

    def logs(self, cid, **_):
        yield b"2026-01-01T00:00:01.000000000Z rank-0 | hello\n"

    def get_archive(self, cid, path):
        self.asked.append((cid, path))
        if self.tar is None:
            raise FileNotFoundError(path)
        yield self.tar[:100]
        yield self.tar[100:]


def test_down_keeps_a_copy_of_files_on_the_volume_and_status_points_there(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    e = Engine(_archive([("tensorboard", "dir", b""), ("tensorboard/events.out.tfevents.1", "file", b"E1"),
                         ("tensorboard/sub/x", "file", b"E2"), ("tensorboard/../../evil", "file", b"no"),
                         ("/abs", "file", b"no"), ("tensorboard/link", "link", b"")]))
    live = status.build(sources.docker_view(e, "tb"), now=10.0)
    assert live["tensorboard"]["volume"] == "tb-ckpt"
    assert "docker cp tb-node-0:/checkpoints/tensorboard ./tb-tensorboard" in "\n".join(status.text(live))
    assert not e.asked  # status reads nothing from the container
    folder = kept_output.keep(e, "tb", removing=True)  # ddpctl down
    assert e.asked == [("c0", "/checkpoints/tensorboard")]
    kept = folder / "tensorboard"
    assert sorted(str(p.relative_to(kept)) for p in kept.rglob("*")) == ["events.out.tfevents.1", "sub", "sub/x"]
    assert (kept / "events.out.tfevents.1").read_bytes() == b"E1"
    assert not (tmp_path / "evil").exists() and not list(tmp_path.rglob("link"))
    st = status.build(sources.kept_view(kept_output.find("tb")), now=20.0)
    assert st["tensorboard"]["kept"] == str(kept)
    assert f"tensorboard: event files kept in {kept}; look at them with: tensorboard --logdir {kept}" in status.text(st)
    # a new run of the name moves this folder aside: its copy goes with it, and status follows
    e.c = ContainerInfo("c9", "tb-node-0", {"ddpctl.job": "tb", "ddpctl.node-rank": "0"}, "running", None, 2.0,
                        command=LAUNCH + ("ddp-train", "--epochs", "1"))
    kept_output.keep(e, "tb")
    (old,) = [d for d in folder.parent.iterdir() if d.name.startswith("tb@")]
    moved = sources.kept_view(kept_output.load(old))
    assert moved.tensorboard["kept"] == str(old / "tensorboard") and (old / "tensorboard" / "sub" / "x").exists()
    assert kept_output.find("tb").meta["tensorboard"] is None  # the new run writes none


def test_files_on_the_host_are_not_copied_and_a_failed_copy_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    e = Engine(b"", mounts=(("bind", "/home/u/ckpt", "/checkpoints"),))
    kept_output.keep(e, "tb", removing=True)
    assert not e.asked and kept_output.find("tb").meta["tensorboard"]["host_path"] == "/home/u/ckpt/tensorboard"
    e = Engine(None)  # nothing written yet: the archive call fails
    folder = kept_output.keep(e, "tb", removing=True)
    assert kept_output.find("tb").meta["tensorboard"]["removed"] and not (folder / "tensorboard").exists()
    monkeypatch.setattr(tensorboard, "KEEP_MAX_BYTES", 10)  # too large to keep: no partial copy left behind
    e = Engine(_archive([("tensorboard/events", "file", b"x" * 100)]))
    folder = kept_output.keep(e, "tb", removing=True)
    assert not (folder / "tensorboard").exists() and not (folder / "tensorboard.part").exists()
