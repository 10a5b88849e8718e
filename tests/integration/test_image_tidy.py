"""Image builds on the real engine: a registry that cannot be reached gives ddpctl's own hint, and no build
leaves a dangling ``<none>`` image (the engine is shared, so only ids that our own build printed count)."""

from __future__ import annotations

import io
import tarfile
import uuid
from pathlib import Path

from ddpctl import images
from itest_helpers import ddpctl, image_ids

ROOT = Path(__file__).resolve().parents[2]


def _dangling(engine) -> set[str]:
    return image_ids(engine, filters={"dangling": True})


def _ours(trace: images.BuildTrace, ids: set[str]) -> set[str]:
    return {i for i in ids for short in trace.ids if i.split(":", 1)[-1].startswith(short)}


def test_unreachable_registry_gives_ddpctls_one_line_hint(engine):
    ref = f"registry.invalid/ddpctl-test/none:{uuid.uuid4().hex[:6]}"
    proc = ddpctl("image", "build", "--base", ref, cwd=ROOT, timeout=300)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: cannot pull base image {ref}: no registry is reachable")
    for hint in ("docker load", "--base", "make image-cpu"):
        assert hint in last
    for raw in ("dial tcp", "lookup registry.invalid", "Traceback", "no such host"):
        assert raw not in proc.stderr


def test_make_image_lets_ddpctl_pull():
    # the target used to run a bare 'docker pull' whose raw DNS error ended `make image`
    text = (ROOT / "Makefile").read_text()
    rule = text.split("\nimage:", 1)[1].split("\n\n", 1)[0]
    assert "docker pull" not in rule and "ddpctl image build --base $(CUDA_BASE)" in rule


def test_a_failed_build_leaves_no_dangling_image(engine, cpu_image, tmp_path):
    junk = tmp_path / "wheelhouse"
    junk.mkdir()
    (junk / "torch-0.0.0-py3-none-any.whl").write_bytes(b"not a wheel")  # stage 1's pip install fails fast
    tag = f"ddpctl-test/failing:{uuid.uuid4().hex[:8]}"
    proc = ddpctl("image", "build", "--cpu", "--wheelhouse", str(junk), "--tag", tag, cwd=ROOT, timeout=600)
    assert proc.returncode == 1 and f"building {tag} failed" in proc.stderr
    trace = images.BuildTrace()
    for line in proc.stderr.splitlines():
        trace.feed(line)
    assert trace.ids, "the build printed no step image ids"
    assert not _ours(trace, _dangling(engine)), "a failed build left <none> images"


def test_stage_cache_is_tagged_not_dangling(engine, cpu_image):
    """The legacy builder leaves the last image of an earlier stage untagged; ddpctl tags it <tag>-deps."""
    nonce = uuid.uuid4().hex
    dockerfile = (f"FROM {cpu_image} AS deps\nRUN echo {nonce} > /stage-one\n"
                  f"FROM {cpu_image}\nCOPY --from=deps /stage-one /stage-one\n")
    def build(tag: str) -> images.BuildTrace:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            data = dockerfile.encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        buf.seek(0)
        trace = images.BuildTrace()
        for ev in engine.api.build(fileobj=buf, custom_context=True, tag=tag, rm=True, forcerm=True, decode=True):
            for line in ev.get("stream", "").splitlines():
                trace.feed(line)
            assert "error" not in ev, ev
        return trace

    tags = [f"ddpctl-test/stages:{nonce[:8]}", f"ddpctl-test/stages:{nonce[:8]}-again"]
    traces = []
    try:
        trace = build(tags[0])
        traces.append(trace)
        assert len(trace.stage_ends) == 1
        assert _ours(trace, _dangling(engine)), "expected the builder to leave stage one dangling"
        images.tidy_build(engine, trace, engine.images.get(tags[0]).id, images.deps_tag(tags[0]))
        assert not _ours(trace, _dangling(engine))
        cache = engine.images.get(images.deps_tag(tags[0]))
        assert cache.id.split(":", 1)[1].startswith(trace.stage_ends[0])
        # the same stages again under another tag: stage one comes from the cache and gets that tag's name too
        again = build(tags[1])
        traces.append(again)
        images.tidy_build(engine, again, engine.images.get(tags[1]).id, images.deps_tag(tags[1]))
        assert engine.images.get(images.deps_tag(tags[1])).id == cache.id
    finally:
        for ref in [t for tag in tags for t in (tag, images.deps_tag(tag))]:
            try:
                engine.images.remove(ref)
            except Exception:  # noqa: BLE001 - not created
                pass
    for trace in traces:
        assert not _ours(trace, _dangling(engine)), "removing the test images left <none> images"
