"""Renderers: pure functions from a :class:`~ddpctl.spec.JobSpec` to manifests.

Each target module exposes ``render(spec)`` (a dict, or ``str`` for Slurm), ``render_text(spec)`` (file name ->
text) and ``SUPPORT`` (:class:`ddpctl.targets.Support`: the fields it honours, the ones it refuses and why).
``SUPPORT.check`` runs before anything is rendered, so a target that cannot do what the spec asks fails with
:class:`~ddpctl.errors.UnsupportedFeature` instead of emitting something that silently differs. The targets
are listed once, in :data:`ddpctl.targets.REGISTRY`. YAML text is produced only at the edge (:func:`to_yaml`).

Every command and env value comes from :mod:`ddpctl.launch` (one copy of the launch contract).
"""

from __future__ import annotations

import functools
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

    return yaml.dump(doc, Dumper=yaml_dumper(), sort_keys=False, default_flow_style=False, width=1000,
                     allow_unicode=True)


@functools.lru_cache(maxsize=None)
def yaml_dumper() -> type:
    """PyYAML's safe dumper, writing shared sub-dicts out in full (no aliases) and quoting a string wherever any
    reader of the file could take it for something else: where PyYAML's own YAML 1.1 resolver would (``yes``,
    ``0022``, ``1:30``), and where :func:`ddpctl.rules.needs_quotes` says kubectl (go-yaml v2) or YAML 1.2 would
    (``y``, ``1e-3``, ``.5``, ``0o17``). A command word or env value reaches the container as the text it is."""
    import yaml

    from ddpctl import rules

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

        def represent_str(self, data: str) -> Any:
            return self.represent_scalar("tag:yaml.org,2002:str", data,
                                         style="'" if rules.needs_quotes(data) else None)

    Dumper.add_representer(str, Dumper.represent_str)
    return Dumper


def render_files(target: str, spec: JobSpec) -> dict[str, str]:
    """Render ``target`` to text files: default file name -> content (the CLI and examples write these).

    compose gives ``compose.yaml`` for one host, or ``compose.node-<i>.yaml`` per host for multi-host;
    pytorchjob/trainjob give ``<target>.yaml``; slurm gives ``job.sbatch``.
    """
    from ddpctl import targets

    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}")  # the CLI only offers TARGETS
    return targets.render_files(target, spec)
