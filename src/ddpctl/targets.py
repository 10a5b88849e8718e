"""The target registry: every place a job spec can go, and what each one does with every spec field.

A target is a module with a ``SUPPORT`` (:class:`Support`) (``render/compose.py``, ``render/pytorchjob.py``,
``render/trainjob.py``, ``render/slurm.py``, and ``local/plan.py`` for ``ddpctl up``). :data:`REGISTRY` names them
with what the CLI needs before importing them (command help, output files, schema); ``render_files``, the
``ddpctl render`` commands and ``make render`` (``examples.py``) loop over it.

Support is an allow-list. Each target lists the spec fields it carries into its output (``honours``) and the
sections whose options it reads (``sections``); every other field of its own sections and every top-level field
it does not honour must be refused by one of its ``unsupported`` rules, with a reason. :meth:`Support.check`
runs before anything is rendered: a rule that applies refuses the spec in one line, and a field that is set but
neither honoured nor covered by a rule (a new field its author did not decide on for this target) is refused
too, never silently dropped. Options of another target's section (``slurm.*`` for a Kubernetes target) are
ignored: one spec file serves several targets. tests/unit/test_targets.py checks every field against every target.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from ddpctl.errors import UnsupportedFeature

if TYPE_CHECKING:
    from ddpctl.spec import JobSpec


@dataclass(frozen=True)
class Unsupported:
    """A spec feature a target cannot honour: ``applies(spec)`` is true when the spec asks for it.

    ``fields``: the spec fields the rule refuses outright (default: ``feature`` when it is a field name). A rule
    about some values of an honoured field (absolute volume paths only, say) names no field.
    """

    feature: str
    applies: Callable[[JobSpec], bool]
    reason: str
    fix: str
    fields: tuple[str, ...] | None = None

    def refused_fields(self) -> tuple[str, ...]:
        if self.fields is not None:
            return self.fields
        from ddpctl.spec.fields import FIELDS

        return (self.feature,) if self.feature in FIELDS else ()


@dataclass(frozen=True)
class Support:
    """What a target does with the spec's fields (its module's ``SUPPORT``)."""

    target: str  # the name in error messages: "compose", "ddpctl up"
    honours: frozenset[str]  # field keys carried into the output ("nodes", "kubernetes.queue")
    sections: tuple[str, ...]  # sections whose options it reads ("nccl", "kubernetes", "slurm")
    unsupported: tuple[Unsupported, ...] = ()  # checked in order, before the fields left undecided

    def undecided(self) -> list[str]:
        """Fields neither honoured nor refused by a rule (empty for a complete target; see the module doc)."""
        from ddpctl.spec.fields import FIELDS
        from ddpctl.spec.model import SECTIONS

        refused = {f for rule in self.unsupported for f in rule.refused_fields()}
        out = []
        for key, field in FIELDS.items():
            if key in SECTIONS or (field.section and field.section not in self.sections):
                continue  # a section is decided option by option; another target's options are ignored
            if key not in self.honours and key not in refused:
                out.append(key)
        return out

    def check(self, spec: JobSpec) -> None:
        """Refuse ``spec`` (:class:`UnsupportedFeature`, one line, exit 2) if the target cannot do all it asks:
        the first rule that applies, else the first field set that the target does not decide on."""
        for rule in self.unsupported:
            if rule.applies(spec):
                raise UnsupportedFeature(self.target, rule.feature, rule.reason, rule.fix)
        for key in self.undecided():
            if is_set(spec, key):
                raise UnsupportedFeature(self.target, key, "this target has no way to carry it out",
                                         f"drop {key}, or use a target that supports it")


class Target(Protocol):
    """What a target module provides. A render target also has ``render_text(spec) -> {file name: text}``."""

    SUPPORT: Support


@dataclass(frozen=True)
class TargetInfo:
    """A registry entry: what the CLI and ``make render`` need without importing the target's module."""

    name: str  # registry key; the `ddpctl render` sub-command for a render target
    module: str  # implements Target (and, for a render target, ``render_text(spec) -> {file name: text}``)
    help: str = ""  # the render command's --help text
    renders: bool = True  # writes files (`ddpctl render NAME`); False: runs on this host (`ddpctl up`)
    schema: bool = False  # its output has a schema: `--validate`, `ddpctl validate`
    file_mode: int = 0o644
    examples: str = ""  # `make render`: the directory under the repository root for its examples
    example_name: Callable[[str, str], str] | None = None  # (example, file name) -> file name there

    def load(self) -> Any:
        return importlib.import_module(self.module)

    def example_file(self, example: str, name: str) -> str:
        base = self.example_name(example, name) if self.example_name else f"{example}.{self.name}.yaml"
        return f"{self.examples}/{base}"


REGISTRY: dict[str, TargetInfo] = {t.name: t for t in (
    TargetInfo(
        "compose", "ddpctl.render.compose",
        "Render docker-compose file(s): one service per node on a private network, or one file per "
        "host (host networking) when the spec lists several hosts.\n\n\b\nExamples:\n"
        "  ddpctl render compose -n 2 -g 2\n"
        "  ddpctl render compose -f examples/single-node-2gpu.yaml -o compose.yaml\n"
        "  ddpctl render compose -f examples/multi-host.yaml -o out/   (writes out/compose.node-<i>.yaml)\n"
        "  ddpctl render compose -n 2 -- python train.py --epochs 3\n"
        "  ddpctl render compose -n 2 --workdir . --push registry.example:5000/me/proj -- python train.py   (your code, built and pushed)",
        schema=True, examples="compose",
        # compose.yaml -> <example>.yaml, compose.node-1.yaml -> <example>.node-1.yaml
        example_name=lambda example, name: example + name[len("compose"):]),
    TargetInfo(
        "pytorchjob", "ddpctl.render.pytorchjob",
        "Render a Kubeflow PyTorchJob (kubeflow.org/v1, Training Operator v1.9.4).\n\n\b\nExamples:\n"
        "  ddpctl render pytorchjob -f examples/2x8-gpu.yaml --namespace ml\n"
        "  ddpctl render pytorchjob -n 4 -g 8 --gang --scheduler-name volcano -o job.yaml\n"
        "  ddpctl render pytorchjob -n 2 --workdir . --push registry.example:5000/me/proj -- python train.py   (your code, built and pushed)",
        schema=True, examples="k8s"),
    TargetInfo(
        "trainjob", "ddpctl.render.trainjob",
        "Render a Kubeflow Trainer TrainJob (trainer.kubeflow.org/v1alpha1, pinned to v2.3.0).\n\n"
        "\b\nExamples:\n"
        "  ddpctl render trainjob -f examples/2x8-gpu.yaml\n"
        "  ddpctl render trainjob -n 2 -g 8 --kueue-queue team-a -o trainjob.yaml\n"
        "  ddpctl render trainjob -n 2 --workdir . --push registry.example:5000/me/proj -- python train.py   (your code, built and pushed)",
        schema=True, examples="k8s"),
    TargetInfo(
        "slurm", "ddpctl.render.slurm",
        "Render an sbatch script: srun starts torchrun on every node, c10d rendezvous on the first host."
        "\n\n\b\nExamples:\n"
        "  ddpctl render slurm -f examples/2x8-gpu.yaml --partition gpu --time 02:00:00\n"
        "  ddpctl render slurm -n 2 -g 8 --container pyxis -o job.sbatch -- python train.py\n"
        "  ddpctl render slurm -n 2 --container apptainer --workdir . --push registry.example:5000/me/proj -- python train.py   (your code, built and pushed)",
        file_mode=0o755, examples="slurm", example_name=lambda example, name: f"{example}.sbatch"),
    TargetInfo("up", "ddpctl.local.plan", renders=False),
)}


def render_targets() -> tuple[str, ...]:
    """The targets `ddpctl render` offers, in registry order."""
    return tuple(name for name, t in REGISTRY.items() if t.renders)


def is_set(spec: JobSpec, key: str) -> bool:
    """Does ``spec`` give field ``key`` (dotted for a section option) a value other than its default?"""
    from ddpctl.spec.model import SECTIONS

    if "." in key:
        section, sub = key.split(".", 1)
        return getattr(getattr(spec, section), sub) != getattr(SECTIONS[section](), sub)
    return getattr(spec, key) != getattr(type(spec)(), key)


def render_files(name: str, spec: JobSpec) -> dict[str, str]:
    """Render target ``name``: default file name -> text (what the CLI and ``make render`` write)."""
    return REGISTRY[name].load().render_text(spec)
