"""``ddpctl render compose | pytorchjob | trainjob | slurm``: manifests on stdout or in files.

Each command takes the shared job-spec flags (:mod:`ddpctl.cli.spec_options`) plus its target's own options, which
override the spec's ``kubernetes:`` / ``slurm:`` sections. Only the pure renderers are imported (no torch, no
docker). ``-o`` writes through :mod:`ddpctl.outfiles`: only regular files are replaced, atomically, all files or
none.
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from ddpctl.api import workspace_rules
from ddpctl.cli import spec_options as so
from ddpctl.cli import workspace_options
from ddpctl.cli.app import app
from ddpctl.targets import REGISTRY, render_targets

render_app = typer.Typer(
    name="render",
    help="Render the job as docker-compose, Kubeflow PyTorchJob / TrainJob or Slurm manifests.\n\n"
    "\b\nExamples:\n  ddpctl render compose -f job.yaml\n  ddpctl render pytorchjob -f job.yaml -o k8s/job.yaml\n"
    "  ddpctl render slurm -n 2 -g 8 --partition gpu -- python train.py --epochs 3",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(render_app, name="render")

Output = Annotated[Optional[str], typer.Option(  # str: a Path would drop the trailing '/' of a directory
    "-o", "--output", show_default=False,
    help="Write to this file instead of stdout ('-'); DIR/ gets the default file names. Replaces only regular "
    "files, atomically.")]

def default_output_names(files: dict[str, str], output_arg: str) -> dict[Path, str]:
    """Where ``-o`` puts each rendered file.

    An existing directory (or a path ending in '/') gets the renderer's default names. A file path is used as is
    for one file; several files (multi-host compose) become ``<stem>.node-<i><suffix>`` beside it.
    """
    output = Path(output_arg)
    if os.path.isdir(output) or output_arg.endswith(("/", os.sep)):  # isdir: False, not OSError, on a bad path
        return {output / name: content for name, content in files.items()}
    if len(files) == 1:
        return {output: next(iter(files.values()))}
    out: dict[Path, str] = {}
    suffix = output.suffix or ".yaml"
    stem = output.name[: -len(output.suffix)] if output.suffix else output.name
    for name, content in files.items():
        tag = name.split(".")[1]  # compose.node-<i>.yaml -> node-<i>
        out[output.with_name(f"{stem}.{tag}{suffix}")] = content
    return out


ValidateFlag = Annotated[bool, typer.Option(
    "--validate", help="Check the rendered manifest as 'ddpctl validate' does; on a problem print it, write "
    "nothing and exit 1.")]


def _validate(files: dict[str, str]) -> None:
    from ddpctl.validate import Report, validate_text

    report = Report()
    for name, text in files.items():
        validate_text(text, name, report)
    for problem in report.problems:
        print(str(problem), file=sys.stderr)
    if report.errors:
        print(f"error: the rendered manifest is not valid: {report.summary()}; nothing was written",
              file=sys.stderr)
        raise typer.Exit(1)


def _warn_clear_secrets(target: str, spec: Any) -> None:
    """A literal value under a secret-looking env name lands in the file in clear: say so (not an error: the
    name test is a heuristic, and a throwaway token may be meant)."""
    from ddpctl.secrets import looks_secret

    for name in spec.env_dict:
        if looks_secret(name):
            ref = f"{name}=SECRET[:KEY]" if target in ("pytorchjob", "trainjob") else name
            print(f"warning: env {name} looks like a secret and its value is written in clear into the {target} "
                  f"output; use --secret-env {ref} to keep it out of the file", file=sys.stderr)


DryRun = Annotated[bool, typer.Option(
    "--dry-run", help="With --push: print what would be built and pushed; build, push and render nothing.")]


def _run(target: str, kw: dict[str, Any]) -> None:
    from ddpctl.api.manifests import join, render_files

    validate = kw.pop("validate", False)
    output: str | None = kw.pop("output")
    dry_run = kw.pop("dry_run", False)
    pip = workspace_rules.pip_options(kw)
    allow_credentials = kw.pop("allow_credential_files", False)
    push, job_file = bool(kw.get("push")), kw.get("file")
    workspace_rules.absolute_code_paths(kw, push)
    spec = so.spec_from_cli(target, kw)
    if workspace_rules.asked_to_build(spec, push, flag="--push", source=job_file):
        from ddpctl.images import bake

        bake.check_target(target, spec)  # the target must take the spec before anything is built or pushed
        if dry_run:
            sys.stdout.write(bake.plan_text(spec, target, push=True, pip=pip, allow_credentials=allow_credentials))
            return
        if output == "":
            from ddpctl.errors import UsageError

            raise UsageError("-o is empty", "give a file, a directory ending in '/', or '-' for stdout")
        spec = bake.bake(spec, push=True, pip=pip, allow_credentials=allow_credentials)
    else:
        workspace_rules.refuse_unused(pip, None, flag="--push", allow_credentials=allow_credentials)  # only for a build
        if dry_run:
            from ddpctl.errors import UsageError

            raise UsageError("--dry-run applies to --push (what would be built and pushed)",
                             "add --push REGISTRY/NAME, or drop --dry-run")
    files = render_files(target, spec)
    _warn_clear_secrets(target, spec)
    if validate:
        _validate(files)
    if output == "":
        from ddpctl.errors import UsageError

        raise UsageError("-o is empty", "give a file, a directory ending in '/', or '-' for stdout")
    if output is None or output == "-":
        sys.stdout.write(join(files))  # ddpctl.render's text, byte for byte
        return
    from ddpctl.outfiles import write_files

    placed = default_output_names(files, output)
    # `-o out/` names a directory, created (its parent must exist) only now that rendering succeeded.
    new_dir = (Path(output),) if output.endswith(("/", os.sep)) else ()
    write_files(placed, mode=REGISTRY[target].file_mode, create_dirs=new_dir)
    for path in placed:
        print(f"wrote {path}", file=sys.stderr)


def _make_command(target: str) -> Callable[..., None]:
    """The options: the spec flags and the target's own options (the spec's field table), then -o, --validate."""
    own = [inspect.Parameter("output", inspect.Parameter.KEYWORD_ONLY, annotation=Output, default=None),
           inspect.Parameter("dry_run", inspect.Parameter.KEYWORD_ONLY, annotation=DryRun, default=False),
           *workspace_options.workspace_params()]
    if REGISTRY[target].schema:  # no schema for an sbatch script
        own.append(inspect.Parameter("validate", inspect.Parameter.KEYWORD_ONLY, annotation=ValidateFlag,
                                     default=False))

    def command(**kw: Any) -> None:
        _run(target, kw)

    command.__doc__ = REGISTRY[target].help
    command.__name__ = target
    return so.install(command, so.command_params(target, own))


for _target in render_targets():
    render_app.command(_target)(_make_command(_target))
