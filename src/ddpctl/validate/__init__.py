"""``ddpctl validate``: check compose files, PyTorchJobs and TrainJobs the way their consumers will.

Each document is checked against the schema bundled in :mod:`ddpctl.schemas` (the Compose spec; the
openAPIV3Schema of the PyTorchJob v1.9.4 / TrainJob v2.3.0 CRDs) by :mod:`ddpctl.validate.schema`, strictly
(unknown keys are errors), then by the rules the schema cannot express: :mod:`ddpctl.validate.compose`
(docker-compose 1.29.2 and the Docker Engine) and :mod:`ddpctl.validate.k8s` (ObjectMeta, core pod rules, the
operators' webhooks, CEL). Files ddpctl did not write are checked the same way (a hand-edited manifest).

Problems are :class:`Problem` values printed as ``FILE[#DOC]:PATH: message`` (``#DOC`` only in files with
several documents); warnings (a literal value under a secret-looking env name) do not fail validation.
Reading errors (missing file, not YAML, an unknown kind) raise :class:`ManifestError` instead.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ddpctl.validate.loader import Document, ManifestError, load_documents
from ddpctl.validate.schema import Issue, Validator

KUBERNETES_KINDS = {"PyTorchJob": "kubeflow.org/v1", "TrainJob": "trainer.kubeflow.org/v1alpha1"}
KINDS = ("compose", *KUBERNETES_KINDS)
SUFFIXES = (".yaml", ".yml", ".json")
_COMPOSE_KEYS = {"services", "networks", "volumes", "secrets", "configs", "version", "name", "include", "models"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")

__all__ = ["KINDS", "ManifestError", "Problem", "Report", "check_document", "kind_of", "schema_validator", "validate_paths",
           "validate_text"]


def format_path(path: Iterable[Any]) -> str:
    """``spec.containers[0].env[1].name``; other keys quoted and escaped (JSON, ASCII): ``labels["a.b/c"]``, so
    a key with a line break or a control character stays on one line."""
    import json

    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENT.match(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += "[" + json.dumps(str(part)) + "]"
    return out or "."


def _printable(text: str) -> str:
    """A file name as given, escaped if it holds anything that is not printable on one line."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


@dataclass(frozen=True)
class Problem:
    file: str
    doc: int | None  # document number in a multi-document file
    path: tuple[Any, ...]
    message: str
    warning: bool = False

    def __str__(self) -> str:
        where = _printable(self.file) + (f"#{self.doc}" if self.doc else "")
        text = " ".join(self.message.split())  # one line, whatever the value held
        return f"{where}:{format_path(self.path)}: {'warning: ' if self.warning else ''}{text}"


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    kinds: Counter = field(default_factory=Counter)
    files: int = 0
    skipped: int = 0

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if not p.warning]

    def summary(self) -> str:
        docs = sum(self.kinds.values())
        what = ", ".join(f"{n} {k}" for k, n in sorted(self.kinds.items()))
        skipped = f", {self.skipped} other document(s) skipped" if self.skipped else ""
        if self.errors:
            return (f"{len(self.errors)} problem(s) in {docs} document(s) of {self.files} file(s) "
                    f"({what}){skipped}")
        warn = f", {len(self.problems)} warning(s)" if self.problems else ""
        return f"ok: {docs} document(s) in {self.files} file(s) valid ({what}){skipped}{warn}"


def kind_of(doc: Any) -> str | None:
    """'compose', 'PyTorchJob', 'TrainJob', or None for anything else."""
    if not isinstance(doc, dict):
        return None
    if "apiVersion" in doc or "kind" in doc:
        kind = doc.get("kind")
        if kind in KUBERNETES_KINDS and doc.get("apiVersion") == KUBERNETES_KINDS[kind]:
            return kind
        return None
    keys = {str(k) for k in doc}
    if "services" in keys or (keys and all(k in _COMPOSE_KEYS or k.startswith("x-") for k in keys)):
        return "compose"
    return None


def _describe(doc: Any) -> str:
    if isinstance(doc, dict) and ("kind" in doc or "apiVersion" in doc):
        return f"kind {doc.get('kind')!r} of apiVersion {doc.get('apiVersion')!r}"
    if isinstance(doc, dict) and doc:
        import dataclasses

        from ddpctl.spec import JobSpec

        if {str(k) for k in doc} <= {f.name for f in dataclasses.fields(JobSpec)}:
            return "a ddpctl job spec (check one with 'ddpctl render compose -f FILE'), which"
    return f"a {type(doc).__name__ if not isinstance(doc, dict) else 'mapping'} that is no compose file"


# ------------------------------------------------------------------------------------ checking


_VALIDATORS: dict[str, Validator] = {}


def schema_validator(kind: str) -> Validator:
    if kind not in _VALIDATORS:
        from ddpctl import schemas

        if kind == "compose":
            _VALIDATORS[kind] = Validator(schemas.compose_schema(), strict=True)
        else:
            _VALIDATORS[kind] = Validator(schemas.crd_schema(kind), strict=True, kubernetes=True)
    return _VALIDATORS[kind]


def check_document(doc: Any, kind: str) -> list[Issue]:
    """Every problem of one document of ``kind`` (schema first, then the rules), without duplicates."""
    from ddpctl.validate import compose, k8s

    v = schema_validator(kind)
    if kind == "compose":
        schema_issues = v.issues(doc)
        rule_issues = list(compose.check(doc)) if isinstance(doc, dict) else []
    else:
        schema_issues = [i for i in v.issues(doc) if i.path[:1] != ("metadata",)]  # ObjectMeta: k8s.object_meta
        rule_issues = []
        if isinstance(doc, dict):
            rule_issues = list(k8s.pytorchjob(doc) if kind == "PyTorchJob" else k8s.trainjob(doc))
            named = {i.path for i in rule_issues}
            for issue in k8s.cel_issues(doc, v.root):
                if issue.path == () and "metadata.name" in issue.message:  # a rule on the name: report it there
                    issue = Issue(("metadata", "name"), issue.message)
                    if issue.path in named:
                        continue  # object_meta said it already
                rule_issues.append(issue)
    # One message per value: a rule's words where it has some (they name the value's kind), else the schema's.
    covered = {i.path for i in rule_issues}
    issues = [i for i in schema_issues if i.path not in covered] + rule_issues
    seen: set[tuple[Any, str]] = set()
    out = []
    for issue in issues:
        if (issue.path, issue.message) not in seen:
            seen.add((issue.path, issue.message))
            out.append(issue)
    return out


def secret_warnings(doc: Any, kind: str) -> list[Issue]:
    """Literal values under secret-looking env names (they are in the file in clear)."""
    from ddpctl.secrets import looks_secret

    out: list[Issue] = []

    def k8s_env(env: Any, path: tuple) -> None:
        for i, item in enumerate(env if isinstance(env, list) else []):
            if isinstance(item, dict) and isinstance(item.get("name"), str) and looks_secret(item["name"]) \
                    and item.get("value") not in (None, ""):
                out.append(Issue(path + (i, "value"), f"{item['name']} looks like a secret and is written here "
                                                      "in clear; use valueFrom.secretKeyRef"))

    def walk(node: Any, path: tuple) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "env" and kind != "compose":
                    k8s_env(value, path + (key,))
                else:
                    walk(value, path + (key,))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, path + (i,))

    if kind == "compose":
        services = doc.get("services") if isinstance(doc, dict) else None
        for sname, svc in services.items() if isinstance(services, dict) else ():
            env = svc.get("environment") if isinstance(svc, dict) else None
            pairs = env.items() if isinstance(env, dict) else (
                (str(e).split("=", 1)[0], str(e).split("=", 1)[1] if "=" in str(e) else None)
                for e in env) if isinstance(env, list) else ()
            for key, value in pairs:
                if looks_secret(str(key)) and value not in (None, ""):
                    out.append(Issue(("services", sname, "environment", key),
                                     f"{key} looks like a secret and is written here in clear; leave the value "
                                     "out (bare name: taken from the environment) or use env_file"))
    else:
        walk(doc, ())
    return out


def validate_documents(docs: list[Document], source: str, report: Report, *, skip_unknown: bool = False) -> None:
    many = len(docs) > 1
    report.files += 1
    for d in docs:
        kind = kind_of(d.data)
        if kind is None:
            if skip_unknown:
                report.skipped += 1
                continue
            where = f"{source}#{d.index}" if many else source
            raise ManifestError(f"{where}: {_describe(d.data)} is not something ddpctl validates; it checks "
                                "compose files, kubeflow.org/v1 PyTorchJob and trainer.kubeflow.org/v1alpha1 "
                                "TrainJob (--skip-unknown skips other documents)")
        report.kinds[kind] += 1
        doc_no = d.index if many else None
        for path, key in d.duplicates:
            report.problems.append(Problem(source, doc_no, path, f"key {key!r} appears twice"))
        if kind != "compose":  # docker-compose 1.x reads YAML 1.1 as the loader does; kubectl does not
            from ddpctl.validate.k8s import plain_scalar_issues

            for issue in plain_scalar_issues(d.plain_non_strings, schema_validator(kind).root):
                report.problems.append(Problem(source, doc_no, issue.path, issue.message))
        for issue in check_document(d.data, kind):
            report.problems.append(Problem(source, doc_no, issue.path, issue.message))
        for issue in secret_warnings(d.data, kind):
            report.problems.append(Problem(source, doc_no, issue.path, issue.message, warning=True))


def validate_text(text: str, source: str, report: Report | None = None, *, skip_unknown: bool = False) -> Report:
    report = report if report is not None else Report()
    docs = load_documents(text, source)
    if not docs:
        raise ManifestError(f"{source} has no YAML document")
    validate_documents(docs, source, report, skip_unknown=skip_unknown)
    return report


def collect_files(paths: Iterable[str]) -> list[Path]:
    """The files to check: each file as given, each directory's *.yaml/*.yml/*.json (recursive, sorted)."""
    out: list[Path] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in SUFFIXES
                           and not any(part.startswith(".") for part in f.relative_to(p).parts))
            if not found:
                raise ManifestError(f"directory {arg} has no *.yaml, *.yml or *.json file")
            out += found
        elif p.is_file() or arg == "-":
            out.append(p)
        elif os.path.lexists(p):
            raise ManifestError(f"{arg} is not a regular file or directory")
        else:
            raise ManifestError(f"{arg} does not exist")
    return out


def read_text(path: Path) -> str:
    import sys

    if str(path) == "-":
        return sys.stdin.read()
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_READ + 1)
    except OSError as exc:
        raise ManifestError(f"cannot read {path} ({exc.strerror})") from None
    if len(data) > MAX_READ:
        raise ManifestError(f"{path} is larger than {MAX_READ // 2**20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError(f"{path} is not UTF-8 text") from None


MAX_READ = 16 * 1024 * 1024


def validate_paths(paths: Iterable[str], *, skip_unknown: bool = False) -> Report:
    """Validate files and directories; raises :class:`ManifestError` for the first unreadable one."""
    report = Report()
    files = collect_files(paths)
    for f in files:
        validate_text(read_text(f), str(f), report, skip_unknown=skip_unknown)
    return report
