"""``ddpctl image build | base | check``: make and inspect the ddp-train images."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ddpctl.cli.app import app

image_app = typer.Typer(
    name="image",
    help="Build, push and check ddp-train and workspace images.\n\nExample:\n\n  ddpctl image base && ddpctl image build --cpu "
    "--wheelhouse wheelhouse && ddpctl image check ddpctl/ddp-train:cpu",
    no_args_is_help=True,
)
app.add_typer(image_app, name="image")


def _image_ref(value: str | None, flag: str) -> None:
    """Refuse an empty or malformed image reference before any Docker call (exit 2, one line)."""
    from ddpctl import rules
    from ddpctl.errors import UsageError

    if value is not None:
        try:
            rules.image_ref(value)
        except rules.RuleError as exc:
            raise UsageError(f"{flag} {value!r} is not an image reference ({exc.problem})",
                             "pass e.g. ddpctl/ddp-train:cpu or pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime") from None


@image_app.command("build")
def build(
    cpu: Annotated[bool, typer.Option("--cpu", help="CPU image: local Debian base (ddpctl image base), "
                                                    "tag ddpctl/ddp-train:cpu.")] = False,
    base: Annotated[Optional[str], typer.Option("--base", help="Base image (default: pinned pytorch/pytorch "
                                                               "CUDA runtime, or the local base with --cpu). 'local': "
                                                               "the same torch/CUDA with no registry, on the local "
                                                               "Debian base (ddpctl image base) with CUDA wheels "
                                                               "downloaded on this host.",
                                                show_default=False)] = None,
    tag: Annotated[Optional[str], typer.Option("--tag", "-t", help="Image tag (default: ddpctl/ddp-train:cuda, "
                                                                   "or :cpu).", show_default=False)] = None,
    wheelhouse: Annotated[Optional[Path], typer.Option("--wheelhouse", help="Directory of wheels (torch and "
                                                       "ddpctl's dependencies) to install offline.",
                                                       show_default=False)] = None,
    index_url: Annotated[Optional[str], typer.Option("--index-url", help="Package index (mirror) for torch "
                                                     "and the dependencies.", show_default=False)] = None,
    ca_file: Annotated[Optional[Path], typer.Option("--ca-file", help="CA bundle (PEM) for --index-url.",
                                                    show_default=False)] = None,
    torch_version: Annotated[str, typer.Option("--torch-version", help="torch to install when the base has "
                                                                       "none.")] = "2.13.0",
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the image is up to date.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not use the layer cache (cold build).")] = False,
    workdir: Annotated[Optional[Path], typer.Option("--workdir", help="Build a workspace image instead: this "
                                                    "directory's files at /workspace on the ddp-train image (or "
                                                    "--base), tagged by content.", show_default=False)] = None,
    requirements: Annotated[Optional[Path], typer.Option("--requirements", help="With --workdir: pip requirements "
                                                         "to install (default: DIR/requirements.txt if present).",
                                                         show_default=False)] = None,
    push: Annotated[bool, typer.Option("--push", help="With --workdir: push the image (--tag names the "
                                                      "registry) and print it by digest.")] = False,
    allow_credential_files: Annotated[bool, typer.Option(
        "--allow-credential-files", help="With --workdir: let files that look like credentials (.env, private keys, "
        ".netrc, .ssh/, cloud and Docker credential files) go into the image; by default they are refused unless "
        "DIR/.dockerignore leaves them out.")] = False,
) -> None:
    """Build the ddp-train image, or with --workdir a workspace image of your own code, with the Docker SDK
    (streamed progress on stderr; prints the tag, or REPO@sha256:... with --push).

    Skips the build when an image with the same inputs exists (ddp-train: base, Dockerfile, wheel,
    wheelhouse; workspace: base, requirements, the directory's files). A workspace image is the directory's
    files (less .git, virtualenvs, __pycache__, bench reports and what DIR/.dockerignore lists) copied to
    /workspace, on a cached layer with the requirements installed by pip from --wheelhouse / --index-url;
    its tag is REPO:ws-<content hash> unless --tag gives REPO:TAG.

    Examples:

      ddpctl image build --cpu --wheelhouse wheelhouse

      ddpctl image build --base local            # the CUDA image with no container registry

      ddpctl image build --index-url https://mirror.example/simple --ca-file corp-ca.pem

      ddpctl image build --cpu --workdir . --wheelhouse wheelhouse --tag 127.0.0.1:5000/me/proj --push
    """
    from ddpctl import images

    _image_ref(base, "--base")
    _image_ref(tag, "--tag")
    if workdir is not None:
        _build_workspace(workdir, requirements=requirements, base=base, tag=tag, cpu=cpu, wheelhouse=wheelhouse,
                         index_url=index_url, ca_file=ca_file, push=push, force=force,
                         allow_credentials=allow_credential_files)
        return
    from ddpctl.errors import UsageError

    if requirements is not None or push or allow_credential_files:
        flag = "--requirements" if requirements is not None else "--push" if push else "--allow-credential-files"
        raise UsageError(f"{flag} applies to workspace images only",
                         "add --workdir DIR, or push the ddp-train image with 'ddpctl image push'")
    from ddpctl.images.plans import refuse_index_credentials

    refuse_index_credentials(index_url)  # before anything is built
    plan = images.build_plan(cpu=cpu, base=base, tag=tag, wheelhouse=wheelhouse, index_url=index_url,
                             ca_file=ca_file, torch_version=torch_version)
    result = images.build_image(plan, force=force, nocache=no_cache)
    typer.echo(result.tag)


def _build_workspace(workdir: Path, *, requirements, base, tag, cpu, wheelhouse, index_url, ca_file, push,
                     force, allow_credentials) -> None:
    from ddpctl.images import workspace as ws
    from ddpctl.images.plans import build_plan
    from ddpctl.images.workspace_build import build_workspace

    # the same pip source checks (and messages) as the ddp-train build
    plan = build_plan(cpu=cpu, base=base, wheelhouse=wheelhouse, index_url=index_url, ca_file=ca_file)
    source = ws.scan(workdir, requirements, allow_credentials=allow_credentials)
    repository, version = ws.split_ref(tag) if tag else (ws.default_repository(source.root), None)
    if push and ws.registry_of(repository) is None:
        from ddpctl.errors import UsageError

        raise UsageError(f"--push needs a registry in --tag (got {repository!r})",
                         "pass e.g. --tag registry.example:5000/team/project")
    built = build_workspace(source, base=plan.tag if base is None else base, repository=repository, tag=version,
                            pip=ws.PipOptions(wheelhouse, index_url, ca_file), force=force)
    if push:
        from ddpctl.images.push import push_image

        typer.echo(push_image(built.tag))
    else:
        typer.echo(built.tag)


@image_app.command("push")
def push(
    ref: Annotated[str, typer.Argument(help="Local image to push, REPO:TAG (REPO names the registry).",
                                       show_default=False)],
) -> None:
    """Push REF through the Docker Engine with streamed progress; prints REPO@sha256:... (the digest the
    registry stored).

    Credentials come from your Docker config (docker login). A plain-HTTP registry is used only when the
    Docker Engine lists it under insecure-registries (127.0.0.0/8 is there by default).

    Example:

      ddpctl image push 127.0.0.1:5000/me/proj:ws-0123456789abcdef
    """
    from ddpctl.images.push import push_image

    _image_ref(ref, "REF")
    typer.echo(push_image(ref))


@image_app.command("base")
def base(
    tag: Annotated[str, typer.Option("--tag", "-t", help="Tag of the base image.")] = "ddpctl/base:bookworm",
    suite: Annotated[str, typer.Option("--suite", help="Debian suite.")] = "bookworm",
    mirror: Annotated[str, typer.Option("--mirror", help="Debian mirror URL.")] = "http://deb.debian.org/debian",
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the image is up to date.")] = False,
) -> None:
    """Make a minimal Debian + Python base image offline-style (debootstrap, then import); needs root.

    For sites with no registry: the CPU image then builds with no download but the apt mirror's.

    Example:

      sudo ddpctl image base && ddpctl image build --cpu --wheelhouse wheelhouse
    """
    from ddpctl import images
    from ddpctl.errors import UsageError

    _image_ref(tag, "--tag")
    if not mirror.startswith(("http://", "https://", "file://")):
        raise UsageError(f"--mirror {mirror!r} is not an http(s):// or file:// URL",
                         "pass e.g. --mirror http://deb.debian.org/debian")
    images.build_base(images.BasePlan(tag=tag, suite=suite, mirror=mirror), force=force)
    typer.echo(tag)


@image_app.command("check")
def check(
    image: Annotated[str, typer.Argument(help="Image to check.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the facts as JSON.")] = False,
) -> None:
    """Run IMAGE once: torch, CUDA, cuDNN, NCCL, the GPUs it sees, and whether the host driver is new
    enough for the image's CUDA (exit 1 when it is not).

    Example:

      ddpctl image check ddpctl/ddp-train:cpu
    """
    from ddpctl import images
    from ddpctl.errors import EngineError

    _image_ref(image, "IMAGE")
    report = images.check_image(image)
    if as_json:
        typer.echo(json.dumps({"image": image, **report.facts, "host_driver": report.driver,
                               "driver_ok": report.verdict.ok, "driver_reason": report.verdict.reason}, indent=2))
    else:
        width = max(len(k) for k, _ in report.rows())
        for key, value in report.rows():
            typer.echo(f"{key:<{width}}  {value}")
    if not report.ok:
        sys.stdout.flush()
        problem = report.facts.get("error") or report.verdict.reason
        raise EngineError(f"{image}: {problem}", "see the table above")
