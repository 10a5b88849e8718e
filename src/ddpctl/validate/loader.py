"""Reading manifests for validation: multi-document YAML (or JSON) into plain JSON-like data, bounded.

The file may come from anywhere, so reading it is bounded: at most :data:`MAX_BYTES` of text, :data:`MAX_NODES`
values as written (counted while the parser reads them, so a file of a million tiny values stops early instead
of being built whole first) and as many after alias expansion (a "billion laughs" file stops at once),
:data:`MAX_DEPTH` levels of nesting, no recursive aliases. Merge keys (``<<``) and anchors are expanded as
docker-compose and Kubernetes do; scalars become what a JSON consumer sees (a date stays its text). Duplicate keys are kept as problems for the report
(the Kubernetes API server rejects them; docker-compose 1.x silently takes the last one). Plain scalars read as
text here that kubectl (go-yaml v2) reads as a boolean, null or number (``y``, ``1e-3``, ``0o17``) are text in
the data and listed in :attr:`Document.plain_non_strings`, for the Kubernetes checks to flag in string fields.

Anything that is not readable YAML (syntax, an unknown tag, a limit) raises :class:`ManifestError` with one line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

MAX_BYTES = 16 * 1024 * 1024
MAX_NODES = 200_000  # a large TrainJob holds a few thousand; etcd's 1.5 MB object limit fewer than this
MAX_DEPTH = 100
MERGE_TAG = "tag:yaml.org,2002:merge"
KUBECTL_NON_STRING_TAG = "tag:ddpctl,validate:kubectl-non-string"  # text to PyYAML, not to kubectl
_PLAIN_TAGS = {KUBECTL_NON_STRING_TAG,
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp",
}


class ManifestError(ValueError):
    """The file cannot be read as YAML (one line, no traceback)."""


class _TooManyNodes(Exception):
    """Raised inside the parser past :data:`MAX_NODES` values (load_documents says which file)."""


@dataclass
class Document:
    index: int  # 1-based position in its file
    data: Any
    duplicates: list[tuple[tuple[Any, ...], str]] = field(default_factory=list)  # (path, key)
    # (path, text, what kubectl reads: 'a boolean'...) for each value written plain that kubectl reads as no string
    plain_non_strings: list[tuple[tuple[Any, ...], str, str]] = field(default_factory=list)


def load_documents(text: str, source: str) -> list[Document]:
    """Every non-empty document of ``text``."""
    import yaml

    if len(text) > MAX_BYTES:
        raise ManifestError(f"{source} is larger than {MAX_BYTES // 2**20} MiB")
    try:
        nodes = list(yaml.compose_all(text, Loader=_loader()))
    except _TooManyNodes:
        raise ManifestError(f"{source} holds more than {MAX_NODES:,} values") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{source}:{mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ManifestError(f"{at} is not valid YAML ({problem})") from None
    except RecursionError:
        raise ManifestError(f"{source} is nested too deeply to be read") from None
    builder = _Builder(source)
    docs = []
    for i, node in enumerate(nodes, 1):
        if node is None:
            continue
        builder.duplicates, builder.plain_non_strings = [], []
        data = builder.build(node, (), 0, frozenset())
        if data is None:
            continue
        docs.append(Document(i, data, builder.duplicates, builder.plain_non_strings))
    return docs


@functools.lru_cache(maxsize=None)
def _loader() -> type:
    """The safe loader (C if built) that tags a plain scalar it reads as text but kubectl does not."""
    import yaml

    from ddpctl import rules

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            self.values_read = getattr(self, "values_read", 0) + 1  # every node the parser makes, counted as it goes
            if self.values_read > MAX_NODES:
                raise _TooManyNodes
            tag = super().resolve(kind, value, implicit)
            if tag == "tag:yaml.org,2002:str" and kind is yaml.ScalarNode and implicit[0] \
                    and rules.kubectl_reads(value):
                return KUBECTL_NON_STRING_TAG
            return tag

    return Loader


class _Builder:
    def __init__(self, source: str) -> None:
        import yaml

        from ddpctl import rules

        self.yaml = yaml
        self.rules = rules
        self.source = source
        self.count = 0
        self.duplicates: list[tuple[tuple[Any, ...], str]] = []
        self.plain_non_strings: list[tuple[tuple[Any, ...], str, str]] = []
        self.constructor = yaml.SafeLoader("")

    def fail(self, node: Any, problem: str) -> ManifestError:
        return ManifestError(f"{self.source}:{node.start_mark.line + 1} is not valid YAML ({problem})")

    def build(self, node: Any, path: tuple[Any, ...], depth: int, active: frozenset[int]) -> Any:
        y = self.yaml
        self.count += 1
        if self.count > MAX_NODES:
            raise ManifestError(f"{self.source} expands to more than {MAX_NODES:,} values (aliases?); "
                                "it is not read further")
        if depth > MAX_DEPTH:
            raise self.fail(node, f"nested more than {MAX_DEPTH} levels")
        if id(node) in active:
            raise self.fail(node, "a recursive alias")
        if isinstance(node, y.ScalarNode):
            what = self.rules.kubectl_reads(node.value) if node.tag == KUBECTL_NON_STRING_TAG else None
            if what:
                self.plain_non_strings.append((path, node.value, what))
            return self.scalar(node)
        inner = active | {id(node)}
        if isinstance(node, y.SequenceNode):
            if node.tag not in ("tag:yaml.org,2002:seq",):
                raise self.fail(node, f"unknown tag {node.tag}")
            return [self.build(item, path + (i,), depth + 1, inner) for i, item in enumerate(node.value)]
        if isinstance(node, y.MappingNode):
            if node.tag not in ("tag:yaml.org,2002:map",):
                raise self.fail(node, f"unknown tag {node.tag}")
            out: dict[Any, Any] = {}
            merged: dict[Any, Any] = {}
            for knode, vnode in node.value:
                if isinstance(knode, y.ScalarNode) and knode.tag == MERGE_TAG:
                    for src in (vnode.value if isinstance(vnode, y.SequenceNode) else [vnode]):
                        value = self.build(src, path, depth + 1, inner)
                        if not isinstance(value, dict):
                            raise self.fail(src, "a merge key (<<) needs a mapping or a list of mappings")
                        for k, v in value.items():
                            merged.setdefault(k, v)
                    continue
                if not isinstance(knode, y.ScalarNode):
                    raise self.fail(knode, "a key that is a list or a mapping")
                key = self.scalar(knode)
                if not isinstance(key, str):
                    key = str(key).lower() if isinstance(key, bool) else str(key) if key is not None else "null"
                if key in out:
                    self.duplicates.append((path + (key,), key))
                out[key] = self.build(vnode, path + (key,), depth + 1, inner)
            for k, v in merged.items():
                out.setdefault(k, v)
            return out
        raise self.fail(node, "an unknown node")  # pragma: no cover

    def scalar(self, node: Any) -> Any:
        tag = node.tag
        if tag not in _PLAIN_TAGS:
            raise self.fail(node, f"unknown tag {tag}")
        if tag == KUBECTL_NON_STRING_TAG:
            return node.value  # text, as PyYAML (docker-compose 1.x) reads it; plain_non_strings has kubectl's
        if tag == "tag:yaml.org,2002:timestamp":
            return node.value  # JSON has no dates: the consumer sees the text
        try:
            return self.constructor.construct_object(node, deep=True)
        except self.yaml.YAMLError as exc:
            raise self.fail(node, getattr(exc, "problem", None) or "an invalid value") from None
        except Exception as exc:  # noqa: BLE001 - ValueError (an int of 4300+ digits, !!int abc), KeyError
            # (!!bool maybe), IndexError (!!int ''): one line naming the value and its tag
            short = tag.replace("tag:yaml.org,2002:", "!!")
            why = (str(exc).splitlines() or [""])[0][:80] if isinstance(exc, ValueError) else exc.__class__.__name__
            raise self.fail(node, f"cannot read {node.value[:30]!r} as {short} ({why})") from None
