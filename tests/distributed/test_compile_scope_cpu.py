"""``--compile-scope blocks`` (ddp_train.model.compile_scope) on CPU.

Most of these tests are about the mechanism, not inductor's kernels, so they pick torch.compile's ``aot_eager``
backend (the hidden ``--debug-compile-backend``, or ``backend=`` in-process): AOTAutograd builds the same autograd
structure as with inductor (one CompiledFunctionBackward node per compiled region), without the C++ kernel
builds that take minutes on the 2-core CI machine. One test runs the default backend (inductor) on the toy model.
The GPU runs (inductor kernels inside the CUDA graph, the bucketed reducer's overlap) are benchmarks:
`benchmarks/train_throughput.py --variant blocks='--step-mode graph --compile --compile-scope blocks'`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import testcache
from ddp_helpers import TOY, ok, run, summary, torchrun
from ddp_train.config.flags import COMPILE_UNIT_MODELS, MODELS
from ddp_train.model import compile_scope
from ddp_train.model.networks import ToyCNN, build_model

pytestmark = pytest.mark.distributed

AOT = ["--debug-compile-backend", "aot_eager"]


def _backward_events(scope):
    """One backward of ddp_train's ToyCNN compiled with ``scope``, recording in order: every parameter's
    post-accumulate-grad hook ("acc", name) and the start and end of the autograd node that computes the first
    block's (features.0) parameter gradients ("start"/"end", node type)."""
    torch.manual_seed(0)
    m = ToyCNN()
    if scope == "blocks":
        assert compile_scope.compile_units(m, backend="aot_eager") == ["features.0", "features.2", "features.4", "head"]
        net = m
    else:
        net = torch.compile(m, backend="aot_eager")
    events = []
    for name, p in m.named_parameters():
        p.register_post_accumulate_grad_hook(lambda _p, name=name: events.append(("acc", name)))
    loss = net(torch.randn(4, 3, 32, 32)).sum()
    first = {id(p) for p in m.features[0].parameters()}
    node0, todo, seen = None, [loss.grad_fn], set()
    while todo:  # the node whose inputs include features.0's AccumulateGrad nodes
        n = todo.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        for nxt, _ in n.next_functions:
            if nxt is not None and type(nxt).__name__ == "AccumulateGrad" and id(nxt.variable) in first:
                node0 = n
            todo.append(nxt)
    assert node0 is not None
    node0.register_prehook(lambda _g: events.append(("start", type(node0).__name__)))
    node0.register_hook(lambda _gi, _go: events.append(("end", type(node0).__name__)))
    loss.backward()
    return events


def _pos(events, what):
    return [i for i, e in enumerate(events) if e[0] == what or e[1] == what]


def test_blocks_hooks_of_the_last_block_fire_before_the_first_blocks_backward():
    ev = _backward_events("blocks")
    (start,), (end,) = _pos(ev, "start"), _pos(ev, "end")
    assert ev[start][1] == "CompiledFunctionBackward"  # the first block's own compiled backward
    last = [i for i, e in enumerate(ev) if e[0] == "acc" and e[1].startswith(("features.4.", "fc."))]
    first = [i for i, e in enumerate(ev) if e[0] == "acc" and e[1].startswith("features.0.")]
    assert len(last) == 5 and len(first) == 3
    assert max(last) < start, ev  # the last block's and the head's gradients are out before block 0 starts
    assert min(first) > end, ev
    # the middle block's too: every gradient but block 0's is handed out before block 0's backward runs
    assert len([i for i, e in enumerate(ev) if e[0] == "acc" and i < start]) == 8


def test_model_scope_hands_out_every_gradient_after_the_whole_backward():
    """The counter-case (why --compile-scope blocks exists): with one torch.compile of the whole model, the node
    computing block 0's gradients is the model's single compiled backward, and every hook fires after it."""
    ev = _backward_events("model")
    (start,), (end,) = _pos(ev, "start"), _pos(ev, "end")
    assert ev[start][1] == "CompiledFunctionBackward"
    acc = [i for i, e in enumerate(ev) if e[0] == "acc"]
    assert len(acc) == 11 and min(acc) > end, ev


def test_every_unit_model_names_units_and_the_rest_refuse():
    for name in MODELS:
        shape = (1, 28, 28) if name == "mnist-cnn" else (3, 32, 32)
        m = build_model(name, shape, 10)
        if name in COMPILE_UNIT_MODELS:
            units = compile_scope.resolve_units(m)
            covered = set()
            for _unit, owner, attr in units:
                target = owner[int(attr)] if attr.isdigit() else getattr(owner, attr)
                if isinstance(target, torch.nn.Module):
                    covered |= {id(p) for p in target.parameters()}
            # every parameter is in a compiled block but those of the model's own layers (conv1, bn1, fc, ...),
            # which its stem/head methods (units too) use
            rest = [n for n, p in m.named_parameters() if id(p) not in covered]
            assert all(n.count(".") == 1 for n in rest), (name, rest)
            assert len(units) >= 4 and len(covered) > len(rest), name
        else:
            with pytest.raises(Exception, match="use --compile-scope model"):
                compile_scope.resolve_units(m)
    # and units keep the state_dict keys: compiled in place
    m = build_model("resnet18", (3, 32, 32), 10)
    keys = list(m.state_dict())
    compile_scope.compile_units(m, backend="aot_eager")
    assert list(m.state_dict()) == keys and not any("_orig_mod" in k for k in keys)


@pytest.mark.parametrize("argv,needle", [
    (["--no-compile", "--compile-scope", "blocks"],
     "but this run never compiles (--no-compile); add --compile, or drop --compile-scope"),
    (["--no-compile-if-repaid", "--compile-scope", "blocks"], "never compiles (--no-compile-if-repaid); add --compile"),
    (["--compile", "--compile-scope", "blocks", "--workload", "mnist"],
     "model mnist-cnn names no compile units (models that do: toy-cnn, resnet18, pyramidnet, resnet50); "
     "use --compile-scope model"),
    (["--compile", "--compile-scope", "blocks", "--strategy", "dp"], "use --strategy ddp or --compile-scope model"),
    (["--compile-scope", "regions"], "invalid choice"),
])
def test_bad_compile_scope_exits_2_with_one_line(argv, needle):
    p = run(TOY + argv)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ddp-train: error: ") and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


def _losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if r["event"] == "step"]


def test_two_ranks_bucketed_blocks_match_uncompiled_losses(tmp_path):
    """2 gloo ranks through ddp-train's loop with graph mode's bucketed reducer in eager steps: compiled block by
    block, the loss at every logged step is the uncompiled run's within fp32 rounding, the sync check passes,
    and several buckets went out (tiny --bucket-mb)."""
    base = TOY + ["--log-interval", "2", "--no-eval", "--graph-reducer", "bucketed", "--bucket-mb", "0.01",
                  "--debug-reducer-in-eager"]
    curves = {}
    for kind, extra in (("plain", []), ("blocks", ["--compile", "--compile-scope", "blocks"] + AOT)):
        m = tmp_path / f"{kind}.jsonl"
        s = summary(ok(torchrun(2, base + extra + ["--metrics-file", str(m)], timeout=400)[0]))
        assert s["sync_check"] == "pass" and s["graph_reducer"] == "bucketed" and s["graph_buckets"] > 2
        assert s["compile"] is (kind == "blocks")
        assert (s["compile_scope"], s["compile_units"]) == (("blocks", 4) if kind == "blocks" else (None, None))
        curves[kind] = _losses(m)
    assert len(curves["plain"]) >= 4
    assert curves["blocks"] == pytest.approx(curves["plain"], abs=2e-4)


def _torch_through(link):
    """Environment in which `import torch` resolves through `link`, a symlink to torch's site-packages."""
    link.symlink_to(os.path.dirname(os.path.dirname(torch.__file__)), target_is_directory=True)
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(link), os.environ.get("PYTHONPATH")]))}


@pytest.fixture
def inductor_env(tmp_path):
    """The environment of an inductor run: torch imported through a symlink whose path has no space (inductor's
    C++ build cannot link under one, and CI's clone lives under one) and inductor's cache folder. Both are kept
    between runs (tests/support/testcache.py, entry ``inductor``): at the same link path inductor's kernels of an unchanged
    graph come from its own cache (the toy run's compile 32 s -> 7 s on 2 cores), as on a user's second run; a
    changed graph builds again. With the cache off or held by another session: both under tmp_path (a full build)."""
    entry = testcache.Entry("inductor")
    base = entry.path if entry.acquire() else tmp_path
    link = base / "torch-site"
    if link.is_symlink():
        link.unlink()  # re-pointed every run: this run's torch (a fresh clone's venv is elsewhere)
    yield {**_torch_through(link), "TORCHINDUCTOR_CACHE_DIR": str(base / "inductor")}
    entry.release()


@pytest.mark.slow  # ~130 s on 2 shared cores when inductor builds C++ kernels for each unit (its cache is cold)
def test_inductor_blocks_single_process_matches_uncompiled(tmp_path, inductor_env):
    """The default backend (inductor's CPU kernels) compiled block by block: the same losses within fp32
    rounding as the uncompiled run."""
    base = TOY + ["--epochs", "1", "--log-interval", "4", "--no-eval", "--strategy", "single"]
    curves = {}
    for kind, extra in (("plain", []), ("blocks", ["--compile", "--compile-scope", "blocks"])):
        m = tmp_path / f"{kind}.jsonl"
        s = summary(ok(run(base + extra + ["--metrics-file", str(m)], timeout=600, **inductor_env)))
        assert s["compile_scope"] == ("blocks" if extra else None)
        curves[kind] = _losses(m)
    assert curves["blocks"] == pytest.approx(curves["plain"], abs=2e-4)


def test_compile_under_a_path_with_a_space_is_refused_in_one_line(tmp_path):
    """torch imported from a path with a space: inductor's C++ build would fail to link (`cannot find -ltorch`,
    then an internal error); ddp-train refuses --compile on CPU up front, in one line with the fix."""
    r = run(TOY + ["--epochs", "1", "--no-eval", "--compile"], **_torch_through(tmp_path / "site pkgs"))
    assert r.returncode == 2, r.stdout + r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert err == [err[0]] and err[0].startswith("ddp-train: error: --compile: torch is installed under a path "
                                                 "with a space ("), r.stderr
    assert err[0].endswith("install torch where its path has no space, or drop --compile"), r.stderr


def _final_state(out):
    return torch.load(sorted(out.glob("ckpt-*.pt"))[-1], map_location="cpu", weights_only=False)


@pytest.mark.slow  # ~90 s: five short runs
def test_checkpoints_are_the_same_across_scopes_and_resume_across_them(tmp_path):
    """Saved with --compile-scope blocks, resumed with model, and the other way round: the checkpoint's keys are
    the uncompiled model's (no _orig_mod), the resumed run continues from the saved step, and its final weights
    are the uninterrupted uncompiled run's within fp32 rounding."""
    base = TOY + ["--epochs", "1", "--no-eval", "--strategy", "single", "--quiet"] + AOT
    ok(run(base[:-2] + ["--max-steps", "12", "--output-dir", str(tmp_path / "plain")]))
    want = _final_state(tmp_path / "plain")
    assert want["step"] == 12
    keys = list(ToyCNN().state_dict())
    assert list(want["model"]) == keys
    for first, second in (("blocks", "model"), ("model", "blocks")):
        out = tmp_path / f"{first}-{second}"
        ok(run(base + ["--compile", "--compile-scope", first, "--max-steps", "6", "--output-dir", str(out)]))
        half = _final_state(out)
        assert half["step"] == 6 and list(half["model"]) == keys, first
        s = summary(ok(run(base + ["--compile", "--compile-scope", second, "--max-steps", "12", "--output-dir",
                                   str(out), "--resume", "auto"])))
        assert s["resumed_from"] and s["steps"] == 12 and s["compile_scope"] == second
        got = _final_state(out)
        assert got["step"] == 12 and list(got["model"]) == keys
        for k, v in want["model"].items():
            torch.testing.assert_close(got["model"][k], v, rtol=1e-4, atol=1e-5, msg=f"{first}->{second} {k}")


def test_help_names_the_scope():
    p = subprocess.run([sys.executable, "-m", "ddp_train", "--help"], capture_output=True, text=True)
    assert "--compile-scope {model,blocks}" in p.stdout and "--debug-compile-backend" not in p.stdout
