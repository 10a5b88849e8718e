"""``ddpctl render compose | pytorchjob | trainjob | slurm``: manifests on stdout or in files.

Each command takes the shared job-spec flags (:mod:`ddpctl.cli.specopts`) plus its target's own options, which
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

from ddpctl.cli import specopts as so
from ddpctl.cli.app import app

render_app = typer.Typer(
    name="render",
    help="Render the job as docker-compose, Kubeflow PyTorchJob / TrainJob or Slurm manifests.\n\n"
    "\b\nExamples:\n  ddpctl render compose -f job.yaml\n  ddpctl render pytorchjob -f job.yaml -o k8s/job.yaml\n"
    "  ddpctl render slurm -n 2 -g 8 --partition gpu -- python train.py --epochs 3",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(render_app, name="render")

TARGET_PANEL = "Target options"

Output = Annotated[Optional[str], typer.Option(  # str: a Path would drop the trailing '/' of a directory
    "-o", "--output", show_default=False,
    help="Write to this file instead of stdout ('-'); DIR/ gets the default file names. Replaces only regular "
    "files, atomically.")]

# name -> (annotation, spec override key)
_SPEC_PARAMS: list[tuple[str, Any]] = [
    ("file", so.JobFile), ("name", so.Name), ("image", so.Image), ("nodes", so.Nodes),
    ("gpus_per_node", so.GpusPerNode), ("nproc_per_node", so.NprocPerNode), ("backend", so.Backend),
    ("port", so.Port), ("env", so.Env), ("secret_env", so.SecretEnvOpt), ("volume", so.Volumes), ("shm_size", so.ShmSize), ("ipc", so.Ipc),
    ("network", so.Network), ("hosts", so.Hosts), ("max_restarts", so.MaxRestarts),
    ("device_ids", so.DeviceIds), ("workdir", so.Workdir), ("user", so.User),
]


def _opt(flag: str, typ: Any, help: str) -> Any:
    return Annotated[Optional[typ], typer.Option(flag, help=help, rich_help_panel=TARGET_PANEL,
                                                 show_default=False)]


_K8S_OPTIONS: list[tuple[str, Any, str]] = [
    ("namespace", _opt("--namespace", str, "metadata.namespace."), "kubernetes.namespace"),
    ("restart_policy", _opt("--restart-policy", str, "OnFailure | ExitCode | Never (PyTorchJob)."),
     "kubernetes.restart_policy"),
    ("gang", _opt("--gang", bool, "Gang scheduling: runPolicy.schedulingPolicy.minAvailable = nodes."),
     "kubernetes.gang"),
    ("scheduler_name", _opt("--scheduler-name", str, "Pod schedulerName (e.g. volcano)."),
     "kubernetes.scheduler_name"),
    ("queue", _opt("--queue", str, "schedulingPolicy.queue (Volcano)."), "kubernetes.queue"),
    ("kueue_queue", _opt("--kueue-queue", str, "Kueue LocalQueue (label kueue.x-k8s.io/queue-name)."),
     "kubernetes.kueue_queue"),
    ("service_account", _opt("--service-account", str, "Pod serviceAccountName."), "kubernetes.service_account"),
]
_TRAINJOB_OPTIONS = [o for o in _K8S_OPTIONS if o[0] in ("namespace", "kueue_queue", "service_account")] + [
    ("runtime", _opt("--runtime", str, "ClusterTrainingRuntime name (default torch-distributed)."),
     "kubernetes.runtime"),
]
_SLURM_OPTIONS: list[tuple[str, Any, str]] = [
    ("partition", _opt("--partition", str, "#SBATCH --partition."), "slurm.partition"),
    ("account", _opt("--account", str, "#SBATCH --account."), "slurm.account"),
    ("qos", _opt("--qos", str, "#SBATCH --qos."), "slurm.qos"),
    ("time", _opt("--time", str, "#SBATCH --time, e.g. 02:00:00."), "slurm.time"),
    ("container", _opt("--container", str, "none | pyxis | apptainer."), "slurm.container"),
    ("container_image", _opt("--container-image", str, "Image for pyxis/apptainer (default: the job image)."),
     "slurm.container_image"),
]

_EXAMPLES = {
    "compose": "Render docker-compose file(s): one service per node on a private network, or one file per "
    "host (host networking) when the spec lists several hosts.\n\n\b\nExamples:\n"
    "  ddpctl render compose -n 2 -g 2\n"
    "  ddpctl render compose -f examples/single-node-2gpu.yaml -o compose.yaml\n"
    "  ddpctl render compose -f examples/multi-host.yaml -o out/   (writes out/compose.node-<i>.yaml)\n"
    "  ddpctl render compose -n 2 -- python train.py --epochs 3",
    "pytorchjob": "Render a Kubeflow PyTorchJob (kubeflow.org/v1, Training Operator v1.9.4).\n\n\b\nExamples:\n"
    "  ddpctl render pytorchjob -f examples/2x8-gpu.yaml --namespace ml\n"
    "  ddpctl render pytorchjob -n 4 -g 8 --gang --scheduler-name volcano -o job.yaml",
    "trainjob": "Render a Kubeflow Trainer TrainJob (trainer.kubeflow.org/v1alpha1, pinned to v2.3.0).\n\n"
    "\b\nExamples:\n"
    "  ddpctl render trainjob -f examples/2x8-gpu.yaml\n"
    "  ddpctl render trainjob -n 2 -g 8 --kueue-queue team-a -o trainjob.yaml",
    "slurm": "Render an sbatch script: srun starts torchrun on every node, c10d rendezvous on the first host."
    "\n\n\b\nExamples:\n"
    "  ddpctl render slurm -f examples/2x8-gpu.yaml --partition gpu --time 02:00:00\n"
    "  ddpctl render slurm -n 2 -g 8 --container pyxis -o job.sbatch -- python train.py",
}


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


def _run(target: str, options: list[tuple[str, Any, str]], kw: dict[str, Any]) -> None:
    from ddpctl.render import render_files

    extra = {key: kw.pop(param) for param, _, key in options}
    validate = kw.pop("validate", False)
    output: str | None = kw.pop("output")
    command = kw.pop("command")
    file = kw.pop("file")
    spec = so.spec_from_cli(file, command=command, extra=extra, **kw)
    files = render_files(target, spec)
    _warn_clear_secrets(target, spec)
    if validate:
        _validate(files)
    if output == "":
        from ddpctl.errors import UsageError

        raise UsageError("-o is empty", "give a file, a directory ending in '/', or '-' for stdout")
    if output is None or output == "-":
        sys.stdout.write("---\n".join(files.values()))
        return
    from ddpctl.outfiles import write_files

    placed = default_output_names(files, output)
    # `-o out/` names a directory, created (its parent must exist) only now that rendering succeeded.
    new_dir = (Path(output),) if output.endswith(("/", os.sep)) else ()
    write_files(placed, mode=0o755 if target == "slurm" else 0o644, create_dirs=new_dir)
    for path in placed:
        print(f"wrote {path}", file=sys.stderr)


def _make_command(target: str, options: list[tuple[str, Any, str]]) -> Callable[..., None]:
    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=None)
              for n, a in _SPEC_PARAMS]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=None)
               for n, a, _ in options]
    params.append(inspect.Parameter("output", inspect.Parameter.KEYWORD_ONLY, annotation=Output, default=None))
    if target != "slurm":  # no schema for an sbatch script
        params.append(inspect.Parameter("validate", inspect.Parameter.KEYWORD_ONLY, annotation=ValidateFlag,
                                        default=False))
    params.append(inspect.Parameter("command", inspect.Parameter.KEYWORD_ONLY, annotation=so.Command,
                                    default=None))

    def command(**kw: Any) -> None:
        _run(target, options, kw)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = _EXAMPLES[target]
    command.__name__ = target
    return command


render_app.command("compose")(_make_command("compose", []))
render_app.command("pytorchjob")(_make_command("pytorchjob", _K8S_OPTIONS))
render_app.command("trainjob")(_make_command("trainjob", _TRAINJOB_OPTIONS))
render_app.command("slurm")(_make_command("slurm", _SLURM_OPTIONS))
