"""The layering of docs/architecture.md, read from the source with ast: no import cycle among the modules of
ddpctl or of ddp_train (lazy imports inside functions and type-only ones under TYPE_CHECKING count too: a circle
of types is a circle of design), ddpctl never imports torch or ddp_train, ddp_train never imports ddpctl, and no
module imports another module's private (underscore) name."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def modules(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    out = {}
    for p in sorted((root / package).rglob("*.py")):
        parts = list(p.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


def imports(path: Path, module: str, is_pkg: bool) -> set[str]:
    """The absolute names a file imports anywhere (functions and `if TYPE_CHECKING:` blocks too)."""
    stat = path.stat()  # a file's walk is made once per test process while the file stays as it is
    return set(_imports(str(path), stat.st_mtime_ns, stat.st_size, module, is_pkg))


@functools.lru_cache(maxsize=None)
def _imports(path: str, _mtime_ns: int, _size: int, module: str, is_pkg: bool) -> frozenset[str]:
    names: set[str] = set()
    package = module if is_pkg else module.rpartition(".")[0]
    stack = list(ast.parse(Path(path).read_text(encoding="utf-8")).body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            # `from pkg import sub` imports pkg.sub; `from pkg import name` resolves to pkg below (owner)
            names.update(f"{base}.{a.name}" for a in node.names)
        stack.extend(ast.iter_child_nodes(node))
    return frozenset(names)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    mods = modules(root, package)

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for m, (path, is_pkg) in mods.items():
        # a module depends on the modules it names, not on their parent packages' __init__ (whose import is
        # implicit for every submodule); a name that is no module belongs to the module that defines it
        targets = {owner(n) for n in imports(path, m, is_pkg) if n.split(".")[0] == package}
        graph[m] = {t for t in targets if t and t != m}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle_among_ddpctl_modules():
    graph = import_graph(SRC, "ddpctl")
    assert len(graph) > 100 and graph["ddpctl.cli.render"]  # the walk sees the tree (and its imports)
    assert cycles(graph) == []


def test_no_import_cycle_among_ddp_train_modules():
    graph = import_graph(SRC, "ddp_train")
    assert len(graph) > 20 and graph["ddp_train.loop.trainer"]
    assert cycles(graph) == []


def test_the_cycle_finder_sees_lazy_and_type_only_cycles(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg import a\n")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import x\n")
    (pkg / "c.py").write_text("x = 1\n")
    assert cycles(import_graph(tmp_path, "pkg")) == []
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
                              "x = 1\n")
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    (pkg / "c.py").write_text("x = 1\n\ndef g():\n    from pkg.a import y\n")
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.c", "pkg.sub.b"]]


def test_the_packages_never_import_each_other_and_ddpctl_never_imports_torch():
    for package, forbidden in (("ddpctl", ("torch", "ddp_train")), ("ddp_train", ("ddpctl",))):
        for m, (path, is_pkg) in modules(SRC, package).items():
            bad = sorted(n for n in imports(path, m, is_pkg) if n.split(".")[0] in forbidden)
            assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def private_imports(package: str) -> list[str]:
    """`from module import _name` (or `import module._private`) of a name another module defines."""
    mods = modules(SRC, package)
    bad = []
    for m, (path, is_pkg) in mods.items():
        for name in imports(path, m, is_pkg):
            if name.split(".")[0] != package:
                continue
            owner = name
            while owner and owner not in mods:
                owner = owner.rpartition(".")[0]
            rest = name[len(owner):].lstrip(".")
            if owner != m and any(part.startswith("_") and not part.startswith("__") for part in
                                  name.split(".")[1:]):
                bad.append(f"{m} imports {name}" + (f" ({rest} of {owner})" if rest else ""))
    return sorted(bad)


def test_no_module_imports_another_modules_private_name():
    for package in ("ddpctl", "ddp_train"):
        assert private_imports(package) == []


# The packages whose imports are held to a list (docs/architecture.md): each may import its own modules and the
# lower layers named here, nothing above it.
LAYERS = {
    # every Docker connection: below the executor, the image commands, doctor, bench and the CLI that use it
    # (ddpctl.spec: the job spec whose Docker hosts job_engine turns into an engine)
    "ddpctl.dockerengine": ("ddpctl.errors", "ddpctl.rules", "ddpctl.launch", "ddpctl.spec",
                            "ddpctl.local.engine_interface"),
    # a job's output read back: the executor writes through it and watch reads through it, so it sits below both
    # (the launch contract's names and labels, the restart rules that say which exit codes retry; the record
    # schemas and the JSON-Schema validator every record a job prints is checked with)
    "ddpctl.joboutput": ("ddpctl.errors", "ddpctl.launch", "ddpctl.spec", "ddpctl.local.restarts",
                         "ddpctl.local.engine_interface", "ddpctl.outfiles", "ddpctl.schemas",
                         "ddpctl.validate.schema", "ddpctl.validate.jsontypes"),
}
# A package kept out of another: a module inside the first (key) imports no module of the second, but the entry
# named (None: none at all). The executor knows the container engine only through ddpctl.local.engine_interface;
# the CLI gets the engine a job runs on from ddpctl.dockerengine.job_engine and nothing else of that package (not
# its __init__'s names either: the image commands, doctor and bench reach Docker through their own packages).
ENTRIES = {
    ("ddpctl.local.executor", "ddpctl.dockerengine"): None,
    ("ddpctl.cli", "ddpctl.dockerengine"): "ddpctl.dockerengine.job_engine",
    ("ddpctl.api", "ddpctl.dockerengine"): "ddpctl.dockerengine.job_engine",  # the Python API the CLI is built on
    # the CLI is built on the API, never the other way round: the API holds the rules, the CLI parses and prints
    ("ddpctl.api", "ddpctl.cli"): None,
    # watch reads a job's output, the executor runs the job: they meet in ddpctl.joboutput, never in each other
    ("ddpctl.watch", "ddpctl.local.executor"): None,
    ("ddpctl.local.executor", "ddpctl.watch"): None,
}
DOCKER_CLIENT_MAKERS = {"DockerClient", "APIClient", "from_env"}  # docker-py's ways to make a client


def inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_violations(root: Path, package: str, layers: dict[str, tuple[str, ...]]) -> list[str]:
    graph = import_graph(root, package)
    bad = []
    for layer, allowed in layers.items():
        for m, targets in graph.items():
            if inside(m, layer):
                bad += [f"{m} imports {t}" for t in sorted(targets)
                        if not inside(t, layer) and not any(inside(t, a) for a in allowed)]
    return sorted(bad)


def entry_violations(root: Path, package: str, entries: dict[tuple[str, str], str | None]) -> list[str]:
    graph = import_graph(root, package)
    bad = []
    for (importer, imported), entry in entries.items():
        for m, targets in graph.items():
            if inside(m, importer):
                bad += [f"{m} imports {t}" for t in sorted(targets) if inside(t, imported) and t != entry]
    return sorted(bad)


def client_makers(root: Path, package: str, home: str) -> list[str]:
    """Modules outside ``home`` that make a Docker client: docker-py's constructors, or home's own ``client``
    module (whose client only ``home.connect`` may make)."""
    bad = []
    for m, (path, is_pkg) in modules(root, package).items():
        if inside(m, home):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(tree)
                 if isinstance(n, (ast.Attribute, ast.Name))}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        made = sorted(names & DOCKER_CLIENT_MAKERS)
        if made or any(inside(n, f"{home}.client") for n in imports(path, m, is_pkg)):
            bad.append(f"{m} ({', '.join(made) or f'{home}.client'})")
    return bad


def test_the_layer_table_holds():
    assert layer_violations(SRC, "ddpctl", LAYERS) == []


def test_the_executor_and_the_cli_reach_docker_engines_only_through_their_entries():
    graph = import_graph(SRC, "ddpctl")
    assert "ddpctl.dockerengine.job_engine" in graph["ddpctl.api.job_start"]  # the walk sees the entry's use (up)
    assert entry_violations(SRC, "ddpctl", ENTRIES) == []


def test_the_entry_check_sees_violations(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "eng").mkdir(parents=True)
    (pkg / "run").mkdir()
    (pkg / "cli").mkdir()
    for f in ("__init__.py", "eng/__init__.py", "eng/concrete.py", "eng/entry.py", "run/__init__.py",
              "cli/__init__.py"):
        (pkg / f).write_text("")
    (pkg / "run" / "a.py").write_text("def f():\n    from pkg.eng.concrete import E\n")
    (pkg / "cli" / "b.py").write_text("from pkg.eng import entry\nfrom pkg.eng.entry import x\n")
    (pkg / "cli" / "c.py").write_text("from pkg import eng\nfrom pkg.eng.concrete import E\n")
    rules = {("pkg.run", "pkg.eng"): None, ("pkg.cli", "pkg.eng"): "pkg.eng.entry"}
    assert entry_violations(tmp_path, "pkg", rules) == ["pkg.cli.c imports pkg.eng", "pkg.cli.c imports pkg.eng.concrete",
                                                        "pkg.run.a imports pkg.eng.concrete"]


def test_only_the_dockerengine_package_makes_docker_clients():
    assert client_makers(SRC, "ddpctl", "ddpctl.dockerengine") == []


def test_the_layer_and_client_checks_see_violations(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "eng").mkdir(parents=True)
    for f in ("__init__.py", "eng/__init__.py", "eng/client.py", "low.py"):
        (pkg / f).write_text("")
    (pkg / "high.py").write_text("import docker\n\ndef f():\n    return docker.from_env()\n")
    (pkg / "eng" / "conn.py").write_text("from pkg import low\n\ndef g():\n    from pkg.high import f\n")
    (pkg / "mid.py").write_text("from pkg.eng.client import new_client\n")
    assert layer_violations(tmp_path, "pkg", {"pkg.eng": ("pkg.low",)}) == ["pkg.eng.conn imports pkg.high"]
    assert client_makers(tmp_path, "pkg", "pkg.eng") == ["pkg.high (from_env)", "pkg.mid (pkg.eng.client)"]


def private_uses(root: Path, package: str) -> list[str]:
    """`module._name` where ``module`` is another module of the package, bound by an import (`import pkg.mod as
    m`, `from pkg import mod`, `from . import mod`): a private name reached through the module object."""
    mods = modules(root, package)
    bad = []
    for m, (path, is_pkg) in mods.items():
        pkg = m if is_pkg else m.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                bound.update({a.asname: a.name for a in node.names if a.asname and a.name in mods})
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = pkg.split(".")[:len(pkg.split(".")) - (node.level - 1)]
                    base = ".".join(parent + ([base] if base else []))
                bound.update({a.asname or a.name: f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                    and bound[node.value.id] != m and node.attr.startswith("_") and not node.attr.startswith("__")):
                bad.append(f"{m}:{node.lineno} uses {bound[node.value.id]}.{node.attr}")
    return sorted(bad)


def test_no_module_reaches_another_modules_private_name_through_the_module():
    for package in ("ddpctl", "ddp_train"):
        assert private_uses(SRC, package) == []


def test_the_private_use_finder_sees_module_attributes(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def _hidden():\n    return 1\n\ndef shown():\n    return _hidden()\n")
    (pkg / "b.py").write_text("from pkg import a\nfrom . import a as aa\n\ndef f(x):\n"
                              "    return a.shown(), x._private, aa._hidden()\n")
    assert private_uses(tmp_path, "pkg") == ["pkg.b:5 uses pkg.a._hidden"]
