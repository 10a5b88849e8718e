"""``ddpctl validate FILE|DIR|- ...``: check manifests against the bundled schemas and the consumers' rules.

Problems go to stdout, one per line as ``FILE[#DOC]:PATH: message``; a summary line goes to stderr. Exit 0 when
there is no problem (warnings allowed), 1 when there is one, 2 when a file cannot be read as a manifest.
The validator (:mod:`ddpctl.validate`) is imported only when the command runs.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from ddpctl.cli.app import app
from ddpctl.errors import UsageError


@app.command("validate")
def validate(
    paths: Annotated[Optional[list[str]], typer.Argument(
        help="Manifest files, directories (their *.yaml, *.yml, *.json, recursively) or '-' for stdin.",
        show_default=False)] = None,
    skip_unknown: Annotated[bool, typer.Option(
        "--skip-unknown", help="Skip documents that are not compose files, PyTorchJobs or TrainJobs "
                               "(default: an error, exit 2).")] = False,
    no_warnings: Annotated[bool, typer.Option("--no-warnings", help="Do not print warnings.")] = False,
) -> None:
    """Check compose files, PyTorchJobs (kubeflow.org/v1) and TrainJobs (trainer.kubeflow.org/v1alpha1), also
    ones ddpctl did not write: the bundled schemas strictly (unknown keys are errors), Kubernetes name, label,
    env and quantity rules, the operators' webhook rules, docker-compose 1.29.2 constraints.

    Prints each problem as FILE:PATH: message. Exit 0: valid; 1: problems; 2: a file cannot be read.

    Examples:

      ddpctl validate k8s/pytorchjob.yaml

      ddpctl validate compose/ k8s/

      ddpctl render trainjob -f job.yaml | ddpctl validate -
    """
    from ddpctl.api.manifests import validate_paths

    if not paths:
        raise UsageError("no file given", "name manifest files or directories, or '-' for stdin")
    report = validate_paths(paths, skip_unknown=skip_unknown)  # what ddpctl.validate() checks
    for problem in report.problems:
        if problem.warning and no_warnings:
            continue
        typer.echo(str(problem))
    print(report.summary(), file=sys.stderr)
    if report.errors:
        raise typer.Exit(1)
