"""YAML text -> a node tree within the input limits (size, depth, node count, no alias bombs).

Plain scalars resolve as in YAML 1.1 (PyYAML's safe loader) except two forms that YAML 1.1 alone reads as
numbers: base 60 (``1:30`` is 90, ``1:4`` is 64) and a leading-zero octal (``0022`` is 18). In a job file
they are what the user wrote, text: ``nodes: 1:4`` is the elastic range, ``time: 1:30`` reaches Slurm as
written, ``UMASK: 0022`` stays ``0022``; a field that needs a number gives its usual type error.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ddpctl.rules.base import MAX_SPEC_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES, RuleError

# ----------------------------------------------------------------------------------------------- YAML


def compose_yaml_bounded(text_: str, source: str) -> Any:
    """``yaml.compose`` with limits: input size, nesting depth, node count (aliases counted every time they
    are used, so a "billion laughs" document fails fast), no recursive aliases. Returns the root node or None.

    Raises :class:`RuleError` (one line, with ``source``) for every YAML problem.
    """
    import yaml

    if len(text_) > MAX_SPEC_BYTES:
        raise RuleError(f"{source} is {len(text_)} bytes (more than {MAX_SPEC_BYTES})",
                        "a job spec is a few hundred bytes; check that this is the right file")
    # The parser is iterative: check depth and event count before the (recursive) composer runs.
    depth = 0
    events = 0
    try:
        for event in yaml.parse(text_, Loader=yaml.SafeLoader):
            events += 1
            if events > MAX_YAML_NODES * 2:
                raise RuleError(f"{source} has more than {MAX_YAML_NODES} values", "split or shrink the file")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else 0
                    raise RuleError(f"{source}:{line} nests deeper than {MAX_YAML_DEPTH} levels",
                                    "flatten the structure")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        root = yaml.compose(text_, Loader=job_file_loader())
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from None
    except RecursionError:  # pragma: no cover - depth is bounded above
        raise RuleError(f"{source} nests too deeply", "flatten the structure") from None
    if root is None:
        return None
    # Walk once to bound the expanded size and find recursive aliases (a node inside itself).
    count = 0
    stack: list[tuple[Any, int]] = [(root, 0)]
    on_path: list[Any] = []
    while stack:
        node, state = stack.pop()
        if state == 1:
            on_path.pop()
            continue
        count += 1
        if count > MAX_YAML_NODES:
            raise RuleError(f"{source} expands to more than {MAX_YAML_NODES} values (YAML aliases?)",
                            "write the values out instead of repeating anchors")
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            if any(node is p for p in on_path):
                raise RuleError(f"{source}:{node.start_mark.line + 1}: a YAML alias refers to the node that "
                                "contains it", "remove the recursive anchor")
            on_path.append(node)
            stack.append((node, 1))
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    stack.append((v, 0))
                    stack.append((k, 0))
            else:
                stack.extend((v, 0) for v in node.value)
    return root


# What YAML 1.1 reads as a base-60 int or float (``1:30``, ``-2:05:00``, ``1:30.5``) or a leading-zero octal
# (``0022``, ``-017``; not ``0``). Only tested on scalars the resolver already made an int or a float.
_BASE60_OR_OCTAL = re.compile(r"[-+]?(?:[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?|0[0-7_]+)")
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


@functools.lru_cache(maxsize=None)
def job_file_loader() -> type:
    """The safe loader whose plain base-60 and leading-zero octal numbers resolve as strings (an explicit
    ``!!int 0022`` is still a number: the user asked for it)."""
    import yaml

    class JobFileLoader(yaml.SafeLoader):
        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            tag = super().resolve(kind, value, implicit)
            if kind is yaml.ScalarNode and tag in _NUMBER_TAGS and _BASE60_OR_OCTAL.fullmatch(value):
                return "tag:yaml.org,2002:str"
            return tag

    return JobFileLoader


def _yaml_error(exc: Exception, source: str) -> RuleError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    at = f"{source}:{mark.line + 1}" if mark else source
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return RuleError(f"{at} is not valid YAML ({problem})", "fix the syntax at that line")


def construct_scalar(node: Any, source: str) -> Any:
    """The Python value of a scalar node with the safe loader's types; unknown tags, YAML merge keys and
    numbers too long to convert are one-line errors instead of tracebacks."""
    import yaml

    line = node.start_mark.line + 1
    if node.tag == "tag:yaml.org,2002:merge":
        raise RuleError(f"{source}:{line}: YAML merge keys ('<<') are not supported", "write the keys out")
    if not isinstance(node, yaml.ScalarNode):
        raise RuleError(f"{source}:{line}: unexpected YAML node", "write a plain value")
    if node.tag.startswith("tag:yaml.org,2002:") and node.tag.rsplit(":", 1)[-1] in ("int", "float"):
        if len(node.value) > 64:
            raise RuleError(f"{source}:{line}: a number of {len(node.value)} characters is too long",
                            "write a smaller number")
    try:
        return yaml.SafeLoader("").construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RuleError(f"{source}:{line}: {problem}", "remove the tag or write a plain value") from None
    except Exception as exc:  # noqa: BLE001 - PyYAML's constructors raise ValueError, KeyError, IndexError,
        # AttributeError... for a value their tag cannot convert (!!bool maybe, !!int '', !!timestamp nope)
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        # the value is not shown: it may be a secret (an env value)
        raise RuleError(f"{source}:{line}: cannot read the value as {tag} ({exc.__class__.__name__})",
                        "write a plain value (or a value the tag can convert)") from None
