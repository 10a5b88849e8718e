"""Reading manifests for validation: multi-document YAML (or JSON) into plain JSON-like data, bounded.

The file may come from anywhere, so reading it is bounded: at most :data:`MAX_BYTES` of text, :data:`MAX_NODES`
values after alias expansion (a "billion laughs" file stops at once), :data:`MAX_DEPTH` levels of nesting, no
recursive aliases. Merge keys (``<<``) and anchors are expanded as docker-compose and Kubernetes do; scalars
become what a JSON consumer sees (a date stays its text). Duplicate keys are kept as problems for the report
(the Kubernetes API server rejects them; docker-compose 1.x silently takes the last one).

Anything that is not readable YAML (syntax, an unknown tag, a limit) raises :class:`ManifestError` with one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_BYTES = 16 * 1024 * 1024
MAX_NODES = 1_000_000
MAX_DEPTH = 100
MERGE_TAG = "tag:yaml.org,2002:merge"
_PLAIN_TAGS = {
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp",
}


class ManifestError(ValueError):
    """The file cannot be read as YAML (one line, no traceback)."""


@dataclass
class Document:
    index: int  # 1-based position in its file
    data: Any
    duplicates: list[tuple[tuple[Any, ...], str]] = field(default_factory=list)  # (path, key)


def load_documents(text: str, source: str) -> list[Document]:
    """Every non-empty document of ``text``."""
    import yaml

    if len(text) > MAX_BYTES:
        raise ManifestError(f"{source} is larger than {MAX_BYTES // 2**20} MiB")
    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        nodes = list(yaml.compose_all(text, Loader=loader_cls))
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
        builder.duplicates = []
        data = builder.build(node, (), 0, frozenset())
        if data is None:
            continue
        docs.append(Document(i, data, builder.duplicates))
    return docs


class _Builder:
    def __init__(self, source: str) -> None:
        import yaml

        self.yaml = yaml
        self.source = source
        self.count = 0
        self.duplicates: list[tuple[tuple[Any, ...], str]] = []
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
