"""The shape of src/ that docs/architecture.md states, read from the files: no folder holds more than 20 modules
at one level, no module is longer than 300 lines, and ddp_train's role subpackages import only downwards in
the order below (the import cycles and ddpctl's package rules are tests/unit/test_import_layers.py)."""

from __future__ import annotations

from pathlib import Path

from test_import_layers import import_graph

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGES = ("ddpctl", "ddp_train")
MAX_MODULES_PER_FOLDER = 20  # a folder past it is split by role into subpackages
MAX_MODULE_LINES = 300  # a module past it becomes a package split along its roles

# ddp_train's layers, bottom first (docs/architecture.md, "Inside ddp_train"). A module may import modules of its
# own subpackage and of the layers below its own, never a layer above nor another subpackage of its own layer.
# The top layer is the entry points and the public shims at ddp_train's top level.
DDP_TRAIN_LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "visible"),  # the failure contract: exit codes, lost-peer texts; foreign text made safe to print
    ("comm", "observe"),  # how gradients cross the link; logs, metrics, records, summary
    ("config",),  # flags -> RunConfig, their rules, the checkpoint interval, the run's decisions (RunPlan)
    ("data",),  # the input (reads the RunConfig)
    ("checkpoint",),  # files, payload, resume position (reads data.position)
    ("runtime",),  # this process in the job: threads, process group, rendezvous store
    ("model",),  # networks, compile scopes, the parts built from the config, the LR schedule
    ("loop",),  # the trainer, step runner, evaluation, preemption, faults
    ("launcher", "tools"),  # ddp-train-launch (torchrun with rank-prefixed lines); the probe and sysinfo
    ("__main__", "progress", "lightning_progress", "allreduce_probe", "sysinfo"),  # entry points, public shims
)
# Modules over the line limit, each waiting for its split along its roles; an entry goes when its module is split
# (the test fails while a listed module is already short enough, so the list cannot go stale).
LONG_MODULES_TO_SPLIT: dict[str, str] = {}
# Imports that go up, each with its reason; a new one is a design change, not an entry here.
DDP_TRAIN_UPWARD: dict[tuple[str, str], str] = {}


def module_files(package: str) -> list[Path]:
    return sorted(p for p in (SRC / package).rglob("*.py") if "__pycache__" not in p.parts)


def crowded_folders(root: Path, packages=PACKAGES, limit: int = MAX_MODULES_PER_FOLDER) -> list[str]:
    """Folders holding more than ``limit`` modules (.py files, __init__ included) side by side."""
    out = []
    for package in packages:
        for folder in sorted({p.parent for p in (root / package).rglob("*.py") if "__pycache__" not in p.parts}):
            count = len(list(folder.glob("*.py")))
            if count > limit:
                out.append(f"{folder.relative_to(root)}: {count} modules")
    return out


def long_modules(root: Path, packages=PACKAGES, limit: int = MAX_MODULE_LINES) -> list[str]:
    out = []
    for package in packages:
        for p in sorted((root / package).rglob("*.py")):
            lines = len(p.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                out.append(f"{p.relative_to(root)}: {lines} lines")
    return out


def layer_of(module: str, layers) -> int | None:
    """The layer of ``package.sub...`` (its first name below the package); None for the package itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    for i, names in enumerate(layers):
        if parts[1] in names:
            return i
    raise AssertionError(f"{module}: {parts[1]} is in no layer: place it in the layer table (and the docs)")


def upward_imports(root: Path, package: str, layers) -> list[tuple[str, str]]:
    """(importer, imported) pairs that go up the layers or sideways to another subpackage of the same layer."""
    bad = []
    for m, targets in sorted(import_graph(root, package).items()):
        here = layer_of(m, layers)
        for t in sorted(targets):
            there = layer_of(t, layers)
            if here is None or there is None or m.split(".")[1] == t.split(".")[1]:
                continue
            if there >= here:
                bad.append((m, t))
    return bad


def test_no_folder_of_src_holds_more_than_20_modules():
    assert crowded_folders(SRC) == []


def test_no_module_of_src_is_longer_than_300_lines():
    assert len(module_files("ddpctl")) > 100 and len(module_files("ddp_train")) > 40  # the walk sees the tree
    long = {line.split(":")[0]: line for line in long_modules(SRC)}
    assert sorted(set(long) - set(LONG_MODULES_TO_SPLIT)) == [], [long[m] for m in set(long) - set(LONG_MODULES_TO_SPLIT)]
    assert sorted(set(LONG_MODULES_TO_SPLIT) - set(long)) == [], "split already: remove it from LONG_MODULES_TO_SPLIT"


def test_ddp_train_subpackages_import_only_downwards():
    bad = upward_imports(SRC, "ddp_train", DDP_TRAIN_LAYERS)
    unexplained = [f"{m} imports {t}" for m, t in bad if (m, t) not in DDP_TRAIN_UPWARD]
    assert unexplained == [], "an import against docs/architecture.md's order of ddp_train's layers"


def test_every_ddp_train_subpackage_and_top_module_has_a_layer():
    names = {p.stem if p.is_file() else p.name for p in (SRC / "ddp_train").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    placed = {n for layer in DDP_TRAIN_LAYERS for n in layer}
    assert names == placed


def test_the_layout_checks_see_violations(tmp_path):
    pkg = tmp_path / "pkg"
    for sub in ("low", "mid", "side", "high"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("x = 1\n")
    (pkg / "mid" / "b.py").write_text("from pkg.low import a\n")
    (pkg / "high" / "c.py").write_text("from pkg.mid import b\nfrom pkg.high import d\n")
    (pkg / "high" / "d.py").write_text("y = 2\n")
    layers = (("low",), ("mid", "side"), ("high",))
    assert upward_imports(tmp_path, "pkg", layers) == []
    (pkg / "low" / "a.py").write_text("def f():\n    from pkg.high import c\n")  # lazy, still upward
    (pkg / "side" / "e.py").write_text("from pkg.mid import b\n")  # sideways within one layer
    assert upward_imports(tmp_path, "pkg", layers) == [("pkg.low.a", "pkg.high.c"), ("pkg.side.e", "pkg.mid.b")]
    for i in range(21):
        (pkg / "mid" / f"m{i}.py").write_text("\n" * (301 if i == 0 else 1))
    assert crowded_folders(tmp_path, ("pkg",)) == ["pkg/mid: 23 modules"]
    assert long_modules(tmp_path, ("pkg",)) == ["pkg/mid/m0.py: 301 lines"]
