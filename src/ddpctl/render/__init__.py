"""Renderers: pure functions from a :class:`~ddpctl.spec.JobSpec` to manifests.

Each target module exposes ``render(spec)`` (a dict, or ``str`` for Slurm) and ``UNSUPPORTED``, the spec
features it cannot honour. :func:`check_supported` runs before anything is rendered, so a target that cannot
do what the spec asks fails with :class:`~ddpctl.errors.UnsupportedFeature` instead of emitting something
that silently differs. YAML text is produced only at the edge (:func:`to_yaml`, :func:`render_files`).

Every command and env value comes from :mod:`ddpctl.launch` (one copy of the launch contract).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ddpctl.errors import UnsupportedFeature
from ddpctl.spec import JobSpec

TARGETS = ("compose", "pytorchjob", "trainjob", "slurm")


@dataclass(frozen=True)
class Unsupported:
    """A spec feature a target cannot honour: ``applies(spec)`` is true when the spec asks for it."""

    feature: str
    applies: Callable[[JobSpec], bool]
    reason: str
    fix: str


def _workspace_not_built(spec: JobSpec) -> bool:
    return bool(spec.workspace.repository) and not spec.baked


# Every target: a spec that asks for its code baked into an image must reach the renderer with that image built,
# pushed and pinned by digest (``ddpctl render ... --push`` does it); a pure renderer cannot build.
WORKSPACE_NOT_BUILT = Unsupported(
    "workspace (code to bake into an image)", _workspace_not_built,
    "the image with the code must be built and pushed before the manifest can name it",
    "render through 'ddpctl render TARGET --workdir DIR --push REGISTRY/NAME', which builds, pushes and pins it "
    "by digest")


def check_supported(target: str, spec: JobSpec, rules: tuple[Unsupported, ...]) -> None:
    """Raise :class:`UnsupportedFeature` for the first rule the spec trips (before rendering)."""
    for rule in (WORKSPACE_NOT_BUILT, *rules):
        if rule.applies(spec):
            raise UnsupportedFeature(target, rule.feature, rule.reason, rule.fix)


def escape_dollars(value: Any) -> Any:
    """Double every ``$`` in string values (not keys).

    docker-compose interpolates ``$VAR``/``${VAR}`` and the kubelet expands ``$(VAR)`` in command, args and
    env; both turn ``$$`` back into ``$``. Escaping keeps user text (an env value such as ``$(date)``) literal.
    """
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, list):
        return [escape_dollars(v) for v in value]
    if isinstance(value, dict):
        return {k: escape_dollars(v) for k, v in value.items()}
    return value


def to_yaml(doc: Any) -> str:
    """The one YAML serializer (block style, keys in insertion order)."""
    import yaml

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # shared sub-dicts are written out in full
            return True

    return yaml.dump(doc, Dumper=_NoAliases, sort_keys=False, default_flow_style=False, width=1000,
                     allow_unicode=True)


def render_files(target: str, spec: JobSpec) -> dict[str, str]:
    """Render ``target`` to text files: default file name -> content (the CLI and examples write these).

    compose gives ``compose.yaml`` for one host, or ``compose.node-<i>.yaml`` per host for multi-host;
    pytorchjob/trainjob give ``<target>.yaml``; slurm gives ``job.sbatch``.
    """
    if target == "compose":
        from ddpctl.render import compose

        files = compose.render_files(spec)
        return {name: compose.header(spec, name) + to_yaml(doc) for name, doc in files.items()}
    if target == "pytorchjob":
        from ddpctl.render import pytorchjob

        return {"pytorchjob.yaml": to_yaml(pytorchjob.render(spec))}
    if target == "trainjob":
        from ddpctl.render import trainjob

        return {"trainjob.yaml": to_yaml(trainjob.render(spec))}
    if target == "slurm":
        from ddpctl.render import slurm

        return {"job.sbatch": slurm.render(spec)}
    raise ValueError(f"unknown target {target!r}")  # the CLI only offers TARGETS
