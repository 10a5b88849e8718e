"""Renderers: pure functions from a :class:`~ddpctl.spec.JobSpec` to manifests.

Each target module exposes ``render(spec)`` (a dict, or ``str`` for Slurm), ``render_text(spec)`` (file name ->
text) and ``SUPPORT`` (:class:`ddpctl.targets.Support`: the fields it honours, the ones it refuses and why).
``SUPPORT.check`` runs before anything is rendered, so a target that cannot do what the spec asks fails with
:class:`~ddpctl.errors.UnsupportedFeature` instead of emitting something that silently differs. The targets
are listed once, in :data:`ddpctl.targets.REGISTRY`. YAML text is produced only at the edge (:func:`to_yaml`).

Every command and env value comes from :mod:`ddpctl.launch` (one copy of the launch contract).
"""

from __future__ import annotations

from typing import Any

from ddpctl.spec import JobSpec
from ddpctl.targets import Unsupported, render_targets  # noqa: F401  (Unsupported: re-exported for targets)

TARGETS = render_targets()


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
    from ddpctl import targets

    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}")  # the CLI only offers TARGETS
    return targets.render_files(target, spec)
