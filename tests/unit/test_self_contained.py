"""The repository reads nothing outside itself: no path to the folder beside the checkout, schemas bundled in
the package."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from ddpctl import schemas

REPO = Path(__file__).resolve().parents[2]
# A reference to the folder beside the checkout (named _BESIDE): "../<it>", "parent / '<it>'",
# "parents[2] / '<it>'", "<it>/schemas". Built from parts so that this file does not match itself.
_BESIDE = "sha" + "red"
_OUTSIDE = re.compile(rf"\.\./{_BESIDE}|parent\S*\s*/\s*['\"]{_BESIDE}['\"]|{_BESIDE}/(schemas|reference)")


def _tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [REPO / p for p in out.decode().split("\0") if p]


def test_no_file_refers_outside_the_repository():
    offenders = []
    for path in _tracked_files():
        if path.suffix in {".json", ".yaml"} and "schemas" in path.parts or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if _OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not offenders, "files that read outside the repository:\n" + "\n".join(offenders)


def test_bundled_schemas_match_their_recorded_sources():
    sources = schemas.read_text("SOURCES.md")
    for name in (schemas.COMPOSE, *schemas.CRD_FILES.values()):
        digest = hashlib.sha256(schemas.read_text(name).encode("utf-8")).hexdigest()
        assert digest in sources, f"{name}: sha256 {digest} is not the one SOURCES.md records"
    assert sources.count("Apache-2.0") >= 3


def test_bundled_schemas_load():
    assert schemas.compose_schema()["$schema"].startswith("https://json-schema.org/") or \
        "services" in schemas.compose_schema()["properties"]
    for kind in schemas.CRD_FILES:
        root = schemas.crd_schema(kind)
        assert {"apiVersion", "kind", "spec"} <= set(root["properties"])
