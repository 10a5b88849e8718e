"""Helpers shared by the integration tests (imported as a plain module: tests/conftest.py puts tests/support on sys.path)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import NoReturn

import docker
import pytest

from procs import drain, kill_group

# DDPCTL_TEST_IMAGE: run the tests on another tag (e.g. an image built from a scratch merge)
CPU_IMAGE = os.environ.get("DDPCTL_TEST_IMAGE", "ddpctl/ddp-train:cpu")
MANAGED = "app.kubernetes.io/managed-by=ddpctl"
DDPCTL = str(Path(sys.executable).with_name("ddpctl"))
INTERRUPT_GRACE = 60  # seconds a timed-out ddpctl gets after Ctrl-C to remove what it started



def missing_part(problem: str) -> NoReturn:
    """A real part a test needs is not on this machine (an engine, docker-registry, root for a second dockerd,
    sshd, an image `make test` builds). On a developer's machine without it the test is skipped; where the suite
    must run everything (DDPCTL_REQUIRE_DOCKER=1: `make test`, whose set-up installs and builds every part) it
    fails, so CI never passes with a real-service test left out."""
    if os.environ.get("DDPCTL_REQUIRE_DOCKER") == "1":
        pytest.fail(problem)
    pytest.skip(problem)


def ddpctl(*args: str, cwd=None, env=None, timeout=240, check=False) -> subprocess.CompletedProcess:
    """Run the CLI. Past ``timeout`` it gets Ctrl-C (SIGINT) first, as a user would press it, so that it removes
    what it started (a SIGKILL would leave its containers to fail every worker's leftover check), then the
    TimeoutExpired names the command and carries its output."""
    full_env = dict(os.environ, NO_COLOR="1")
    full_env.update(env or {})
    # a session of its own: a SIGKILL reaches its children too (an ssh to a Docker host would keep the pipes open)
    with subprocess.Popen([DDPCTL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                          env=full_env, start_new_session=True) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)
            try:
                out, err = p.communicate(timeout=INTERRUPT_GRACE)
            except subprocess.TimeoutExpired:
                kill_group(p)
                out, err = drain(p)
            raise subprocess.TimeoutExpired(p.args, timeout, output=out, stderr=err) from None
    proc = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    if check and proc.returncode != 0:
        raise AssertionError(f"ddpctl {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def labelled(client, job: str) -> tuple[list[str], list[str]]:
    f = {"label": f"ddpctl.job={job}"}
    return ([c.name for c in client.containers.list(all=True, filters=f)],
            [n.name for n in client.networks.list(filters=f)])


def own_requirements(*lines: str) -> str:
    """A requirements.txt text that no other test writes: the requirements layer's tag is a hash of the text
    (ddpctl/workspace-deps:<hash>), and a test removes its layer at the end, so tests with the same text (run at
    once by pytest-xdist, or by another session on the same engine) would remove each other's layer mid-build."""
    return "".join(f"{line}\n" for line in lines) + f"# this test's own requirements layer: {uuid.uuid4().hex}\n"


def make_wheel(dest: Path, name: str, version: str, source: str) -> Path:
    """A pure-Python wheel of one module ``name`` (written by hand: the wheel format is a zip with METADATA,
    WHEEL and RECORD), so a test can serve a requirement from a wheelhouse of its own, offline."""
    import base64
    import hashlib
    import zipfile

    dist = f"{name}-{version}.dist-info"
    files = {f"{name}.py": source.encode(),
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: ddpctl-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return wheel


def image_ids(engine, **filters) -> set[str]:
    """The ids of the engine's images (``all``/``filters`` as docker's image list takes them), read in one request:
    docker-py's ``images.list()`` inspects every image after listing, which fails when a test on another worker
    removes one in between."""
    return {r["Id"] for r in engine.api.images(**filters)}


def remove_project_images(engine, repository: str, source) -> None:
    """Remove the workspace images under ``repository`` built from the project folder ``source`` (those of another
    session's project of the same name stay) and the requirements layer image each was built on."""
    for img in engine.api.images(filters={"reference": repository}):  # one request (see image_ids)
        labels = img.get("Labels") or {}
        if str(source) != labels.get("ai.ddpctl.workspace.source"):
            continue  # another session's
        for ref in (img["Id"], f"ddpctl/workspace-deps:{labels.get('ai.ddpctl.workspace.deps-hash')}"):
            try:
                engine.images.remove(ref, force=ref == img["Id"])
            except docker.errors.APIError:  # gone, or the deps layer still serves another image
                pass


def remove_requirements_layer(engine, base: str, requirements: Path) -> None:
    """Remove the requirements layer image ``ddpctl/workspace-deps:<hash>`` that ``requirements`` (its text now) on
    ``base`` makes, if there is one and no image is built on it any more. A build that failed after the layer (a
    registry that is down, a refused push: no workspace image is left tagged) leaves it behind, so a test's
    ``project`` removes it at the end instead of counting on its workspace images to lead to it."""
    from ddpctl.images import workspace as ws

    try:
        deps = ws.deps_hash(engine.images.get(base).id, requirements)
    except (OSError, docker.errors.DockerException):  # no file (the test removed it) or no base: nothing was built
        return
    try:
        engine.images.remove(f"ddpctl/workspace-deps:{deps}")
    except docker.errors.APIError:  # never built, already removed, or still the parent of another image
        pass


def remove_workspace_images(engine, repository: str) -> None:
    """Remove every image tagged under ``repository`` and the requirements layer image it was built on."""
    for img in engine.api.images():  # one request, no inspect per image (see image_ids)
        for tag in img.get("RepoTags") or ():
            if repository in tag:
                deps = (img.get("Labels") or {}).get("ai.ddpctl.workspace.deps-hash")
                try:
                    engine.images.remove(tag, force=True)
                except docker.errors.ImageNotFound:
                    pass
                if deps:
                    try:
                        engine.images.remove(f"ddpctl/workspace-deps:{deps}")
                    except Exception:  # noqa: BLE001 - shared with another of the test's images, or gone
                        pass
