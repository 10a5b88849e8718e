"""Rendered YAML means the same to every reader: a string that kubectl (go-yaml v2) or a YAML 1.2 reader would
take for a boolean, null or number (``y``, ``1e-3``, ``.5``, ``0o17``) is written quoted, true numbers stay
numbers, and ``ddpctl validate`` flags such a value left plain in a string field of a Kubernetes manifest."""

import itertools
import re

import pytest
import yaml

from ddpctl import rules
from ddpctl.render import render_files, to_yaml
from ddpctl.spec import spec_from_dict
from ddpctl.validate import validate_text

# The other readers' rules, written out here from their specs (not from ddpctl's code): YAML 1.2's core schema,
# and go-yaml v2 (sigs.k8s.io/yaml), which also takes the YAML 1.1 words and drops '_' in what starts like a number.
OTHER_READERS = [
    ("bool", r"y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"),
    ("null", r"~|null|Null|NULL|"),
    ("int", r"[-+]?[0-9]+|[-+]?0[oO][0-7]+|[-+]?0[xX][0-9a-fA-F]+|[-+]?0[bB][01]+"),
    ("float", r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"),
]


class OtherReader(yaml.SafeLoader):
    """yaml.safe_load, plus the resolver list above for plain scalars; what they match loads as ('bool', text)."""

    def resolve(self, kind, value, implicit):
        if kind is yaml.ScalarNode and implicit[0]:
            plain = value.replace("_", "") if value[:1] in tuple("+-.0123456789") else value
            for tag, pattern in OTHER_READERS:
                if re.fullmatch(pattern, plain):
                    return f"tag:test,other:{tag}"
        return super().resolve(kind, value, implicit)


OtherReader.add_multi_constructor("tag:test,other:", lambda loader, suffix, node: (suffix, node.value))

TRICKY = ["y", "Y", "n", "N", "yes", "No", "ON", "off", "yEs", "oN", "true", "null", "~", "", "1e-3", "1e3", "1E5",
          "1.5", ".5", "5.", "+1", "-1", "0", "08", "0022", "0o17", "0x1F", "0b101", "-0b11", "1_000", "1__0",
          "1_e3", ".inf", "-.Inf", ".nan", ".NaN", "1:30", "12:00:00", "2001-12-14", "1e400", "99999999999999999999",
          "=", "<<"]
PLAIN = ["python", "train.py", "--lr", "abc", "v1", "1.5.2", "1e", ".e3", "_1", "x=y", "0.5x", "1:2:x", "0.1.0"]


def test_kubectl_reads_known_answers():
    expected = {"y": "a boolean", "N": "a boolean", "Off": "a boolean", "~": "null", "1e-3": "a number",
                ".5": "a number", "+1": "an integer", "0o17": "an integer", "0x1F": "an integer", "0b101": "an integer",
                "1_000": "an integer", "08": "a number", "017": "an integer", ".inf": "a number", "-.INF": "a number",
                "18446744073709551615": "an integer", "18446744073709551616": "a number",
                "yEs": None, "1e400": None, "0x10000000000000000": None, "_1": None, "1:30": None, "2001-12-14": None,
                "--lr": None, "1.5.2": None}
    assert {text: rules.kubectl_reads(text) for text in expected} == expected
    assert rules.needs_quotes("yEs") and rules.needs_quotes("1e400") and not rules.needs_quotes("--lr")


def test_tricky_strings_come_back_as_the_same_strings():
    text = to_yaml({"args": TRICKY, "env": {s or "empty": s for s in TRICKY}})
    for loader in (yaml.SafeLoader, OtherReader):
        back = yaml.load(text, Loader=loader)
        assert back["args"] == TRICKY
        assert list(back["env"].values()) == TRICKY
    assert "- '1e-3'\n" in text and "- 'y'\n" in text and "  'N': 'N'\n" in text


def test_every_short_number_like_string_comes_back():
    words = ["".join(w) for n in range(1, 5) for w in itertools.product("01.eE+-_xoby", repeat=n)]
    text = to_yaml(words)
    assert yaml.load(text, Loader=OtherReader) == words
    assert yaml.safe_load(text) == words


def test_only_what_needs_it_is_quoted_and_numbers_stay_numbers():
    assert to_yaml(PLAIN) == "".join(f"- {w}\n" for w in PLAIN)
    values = {"i": 1, "f": 1.5, "e": 1e-05, "b": True, "none": None, "big": 10**20, "neg": -3, "n": "N"}
    text = to_yaml(values)
    assert text == ("i: 1\nf: 1.5\ne: 1.0e-05\nb: true\nnone: null\nbig: 100000000000000000000\nneg: -3\n"
                    "'n': 'N'\n")  # a key too: go-yaml v2 reads n as false
    assert yaml.safe_load(text) == values
    assert list(yaml.load(text, Loader=OtherReader).values()) == [
        ("int", "1"), ("float", "1.5"), ("float", "1.0e-05"), ("bool", "true"), ("null", "null"),
        ("int", "100000000000000000000"), ("int", "-3"), "N"]


@pytest.mark.parametrize("target", ["pytorchjob", "trainjob", "compose"])
def test_rendered_command_words_and_env_values_are_strings(target):
    spec = spec_from_dict({"name": "quote", "env": {"ANSWER": "y", "LR": "1e-3", "MODE": "0o17"},
                           "command": ["python", "train.py", "--lr", "1e-3", "--flag", "y", "--n", ".5"]})
    [(_, text)] = render_files(target, spec).items()
    assert "'1e-3'" in text and "'y'" in text and "'.5'" in text and "'0o17'" in text

    def leaves(node):
        if isinstance(node, dict):
            return [x for v in node.values() for x in leaves(v)]
        if isinstance(node, list):
            return [x for v in node for x in leaves(v)]
        return [node]

    texts = leaves(yaml.safe_load(text))
    other = leaves(yaml.load(text, Loader=OtherReader))
    assert [o for t, o in zip(texts, other, strict=True) if isinstance(t, str)] == [t for t in texts if isinstance(t, str)]
    assert {"1e-3", "y", ".5", "0o17"} <= set(texts)
    if target != "compose":
        assert validate_text(text, f"{target}.yaml").errors == []


def test_validate_flags_plain_non_strings_in_string_fields():
    spec = spec_from_dict({"name": "quote", "env": {"ANSWER": "y", "OK": "fine"},
                           "command": ["python", "train.py", "--lr", "1e-3"]})
    [(_, text)] = render_files("pytorchjob", spec).items()
    assert validate_text(text, "pj.yaml").errors == []
    edited = text.replace("'1e-3'", "1e-3").replace("value: 'y'", "value: y").replace("value: fine", "value: 0o17")
    messages = sorted(str(p) for p in validate_text(edited, "pj.yaml").errors)
    where = "pj.yaml:spec.pytorchReplicaSpecs.Master.template.spec.containers[0]"
    assert messages == [
        f"{where}.command[5]: '1e-3' is written without quotes, which kubectl reads as a number, not a string; "
        "quote it",
        f"{where}.env[2].value: 'y' is written without quotes, which kubectl reads as a boolean, not a string; "
        "quote it",
        f"{where}.env[3].value: '0o17' is written without quotes, which kubectl reads as an integer, not a string; "
        "quote it",
    ]
    # a number where the schema takes one (a quantity, int-or-string) is no problem; compose files are not flagged
    assert "sizeLimit: 16Gi\n" in text
    assert validate_text(text.replace("sizeLimit: 16Gi", "sizeLimit: 1e9"), "pj.yaml").errors == []
    compose_text = render_files("compose", spec)["compose.yaml"].replace("'1e-3'", "1e-3")
    assert validate_text(compose_text, "compose.yaml").errors == []
