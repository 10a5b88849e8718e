"""Every spec field is honoured or refused (one line, with a reason) by every target, `ddpctl up` included.

For each target and field, the field's sample value (spec/fields.py) is set on a spec that otherwise holds only
what the sample needs. A field the target says it honours must render and change the output; any other field of
the target's own sections, and every top-level field, must be refused by one of the target's rules. Options of
another target's section are ignored by design (one spec file serves several targets).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.errors import UnsupportedFeature
from ddpctl.spec import spec_from_dict
from ddpctl.spec.fields import FIELDS
from ddpctl.spec.model import SECTIONS
from ddpctl.targets import REGISTRY, Support, Unsupported, render_targets

# (target, field) pairs honoured although the sample leaves the output as it is, and why.
SAME_OUTPUT = {
    ("pytorchjob", "ipc"): "pods always have a private IPC namespace with a memory-backed /dev/shm",
    ("trainjob", "ipc"): "pods always have a private IPC namespace with a memory-backed /dev/shm",
    ("slurm", "network"): "Slurm tasks always use the nodes' own network (host networking)",
    ("trainjob", "workspace.repository"): "the TrainJob runs in the workspace image's WORKDIR (/workspace); the "
                                          "v2.3.0 trainer has no working-directory field",
}


def _output(name: str, spec) -> object:
    if REGISTRY[name].renders:
        return REGISTRY[name].load().render_text(spec)
    from ddpctl.local.plan import plan_local

    return plan_local(spec, cwd=Path("/tmp"), default_user=None, host_cpus=4.0).to_dict()


def _cases():
    for name in REGISTRY:
        for key in FIELDS:
            if key not in SECTIONS:
                yield name, key


@pytest.mark.parametrize("name, key", list(_cases()))
def test_every_field_is_honoured_or_refused(name, key):
    support: Support = REGISTRY[name].load().SUPPORT
    field = FIELDS[key]
    data = field.sample_data()
    spec = spec_from_dict(data)
    if field.section and field.section not in support.sections:
        owners = [t for t in REGISTRY if field.section in REGISTRY[t].load().SUPPORT.sections]
        assert owners, f"no target reads the {field.section} section"
        return
    if key in support.honours:
        base = spec_from_dict({k: v for k, v in data.items() if k != key} if not field.section else
                              {**data, field.section: {k: v for k, v in data[field.section].items()
                                                       if k != key.split(".", 1)[1]}})
        out = _output(name, spec)
        if (name, key) in SAME_OUTPUT:
            assert out == _output(name, base), f"({name!r}, {key!r}) changes the output now: drop the exemption"
        else:
            assert out != _output(name, base), f"{name} claims to honour {key} but its output ignores it"
        return
    with pytest.raises(UnsupportedFeature) as exc:
        _output(name, spec)
    message = str(exc.value)
    assert "\n" not in message and ": " in message
    rule_fields = {f for rule in support.unsupported for f in rule.refused_fields()}
    assert key in rule_fields, f"{name} refuses {key} only through the catch-all; give it a rule with a reason"


@pytest.mark.parametrize("name", list(REGISTRY))
def test_no_target_leaves_a_field_undecided(name):
    assert REGISTRY[name].load().SUPPORT.undecided() == []


def test_a_field_nobody_decided_on_is_refused_not_dropped():
    """The catch-all: a target that forgets a new field refuses specs that set it."""
    compose = REGISTRY["compose"].load().SUPPORT
    forgetful = Support("compose", honours=compose.honours - {"memlock"}, sections=compose.sections,
                        unsupported=compose.unsupported)
    assert forgetful.undecided() == ["memlock"]
    forgetful.check(spec_from_dict({}))
    with pytest.raises(UnsupportedFeature, match="compose does not support memlock: "):
        forgetful.check(spec_from_dict({"memlock": True}))


def test_rules_name_real_fields():
    for name in REGISTRY:
        for rule in REGISTRY[name].load().SUPPORT.unsupported:
            assert isinstance(rule, Unsupported)
            assert set(rule.refused_fields()) <= set(FIELDS), (name, rule.feature)


def test_cli_and_examples_offer_every_render_target():
    from ddpctl.cli.render import render_app
    from ddpctl.examples import OUTPUT_DIRS

    assert {c.name for c in render_app.registered_commands} == set(render_targets())
    assert set(OUTPUT_DIRS) == {REGISTRY[t].examples for t in render_targets()}
