"""Render the example specs under ``examples/`` into ``compose/``, ``k8s/`` and ``slurm/`` (``make render``).

``python -m ddpctl.examples`` rewrites the checked-in files (and removes stale ones); ``--check`` only reports
drift and exits 1. tests/unit/test_examples.py fails when the checked-in files differ from :func:`plan`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ddpctl.render import render_files
from ddpctl.spec import load_spec
from ddpctl.targets import REGISTRY, render_targets

OUTPUT_DIRS = tuple(dict.fromkeys(REGISTRY[t].examples for t in render_targets()))  # compose, k8s, slurm

# example -> targets it is rendered for (multi-host lists hosts, which Kubernetes targets cannot honour)
EXAMPLES: dict[str, tuple[str, ...]] = {
    "single-node-2gpu": ("compose", "pytorchjob", "trainjob", "slurm"),
    "2x8-gpu": ("compose", "pytorchjob", "trainjob", "slurm"),
    "cpu-only": ("compose", "pytorchjob", "trainjob", "slurm"),
    "multi-host": ("compose", "slurm"),
}


def _dest(example: str, target: str, name: str) -> Path:
    return Path(REGISTRY[target].example_file(example, name))


def plan(root: Path) -> dict[Path, str]:
    """Relative path -> content of every rendered example (pure apart from reading the spec files)."""
    out: dict[Path, str] = {}
    for example, targets in EXAMPLES.items():
        spec = load_spec(root / "examples" / f"{example}.yaml")
        for target in targets:
            for name, text in render_files(target, spec).items():
                out[_dest(example, target, name)] = text
    return out


def drift(root: Path) -> list[str]:
    """Files that differ from the renderers, are missing, or are stale (rendered from nothing)."""
    wanted = plan(root)
    problems = [f"{p} differs" if (root / p).exists() else f"{p} is missing"
                for p, text in wanted.items()
                if not (root / p).exists() or (root / p).read_text(encoding="utf-8") != text]
    for d in OUTPUT_DIRS:
        for f in sorted((root / d).glob("*")) if (root / d).is_dir() else []:
            if f.is_file() and f.relative_to(root) not in wanted:
                problems.append(f"{f.relative_to(root)} is stale")
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path.cwd()
    if not (root / "examples").is_dir():
        print("error: no examples/ directory here; run from the repository root", file=sys.stderr)
        return 2
    if "--check" in argv:
        problems = drift(root)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    wanted = plan(root)
    for d in OUTPUT_DIRS:
        (root / d).mkdir(exist_ok=True)
        for f in (root / d).glob("*"):
            if f.is_file() and f.relative_to(root) not in wanted:
                f.unlink()
                print(f"removed {f.relative_to(root)}", file=sys.stderr)
    from ddpctl.errors import DdpctlError
    from ddpctl.outfiles import write_files

    for rel, text in wanted.items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            try:  # a regular file replaced atomically; a link or special file there is refused
                write_files({path: text}, mode=0o755 if rel.suffix == ".sbatch" else 0o644)
            except DdpctlError as exc:
                print(f"error: {exc.message}", file=sys.stderr)
                return 2
            print(f"wrote {rel}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
