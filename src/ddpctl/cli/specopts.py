"""Job-spec flags shared by every command that takes a spec (``render *``, ``up``).

Each command declares ``**SPEC_OPTIONS``-style parameters with the aliases below and calls
:func:`spec_from_cli`; flags override the YAML file key of the same name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ddpctl.spec import JobSpec, load_spec

SPEC_PANEL = "Job spec (flags override the -f file)"

JobFile = Annotated[
    Optional[Path],
    typer.Option("-f", "--file", help="Job spec YAML file.", rich_help_panel=SPEC_PANEL, show_default=False),
]
Name = Annotated[Optional[str], typer.Option("--name", help="Job name (DNS-1035 label).",
                                             rich_help_panel=SPEC_PANEL, show_default=False)]
Image = Annotated[Optional[str], typer.Option("--image", help="Container image.",
                                              rich_help_panel=SPEC_PANEL, show_default=False)]
Nodes = Annotated[Optional[int], typer.Option("--nodes", "-n", help="Number of nodes.",
                                              rich_help_panel=SPEC_PANEL, show_default=False)]
GpusPerNode = Annotated[Optional[int], typer.Option("--gpus-per-node", "-g", help="GPUs per node (0 = CPU).",
                                                    rich_help_panel=SPEC_PANEL, show_default=False)]
NprocPerNode = Annotated[Optional[int], typer.Option(
    "--nproc-per-node", help="Processes per node (default: GPUs per node, or 1 on CPU).",
    rich_help_panel=SPEC_PANEL, show_default=False)]
Backend = Annotated[Optional[str], typer.Option("--backend", help="auto | nccl | gloo.",
                                                rich_help_panel=SPEC_PANEL, show_default=False)]
Port = Annotated[Optional[int], typer.Option("--port", help="Master / rendezvous port.",
                                             rich_help_panel=SPEC_PANEL, show_default=False)]
Env = Annotated[Optional[list[str]], typer.Option("--env", "-e", help="KEY=VALUE, repeatable.",
                                                  rich_help_panel=SPEC_PANEL, show_default=False)]
SecretEnvOpt = Annotated[Optional[list[str]], typer.Option(
    "--secret-env", help="NAME[=SECRET[:KEY]], repeatable: NAME's value never lands in a file; Kubernetes reads it "
    "from Secret SECRET (key KEY, default NAME), compose/up/Slurm from the caller's environment.",
    rich_help_panel=SPEC_PANEL, show_default=False)]
Volumes = Annotated[Optional[list[str]], typer.Option("--volume", "-v", help="SOURCE:TARGET[:ro], repeatable.",
                                                      rich_help_panel=SPEC_PANEL, show_default=False)]
ShmSize = Annotated[Optional[str], typer.Option(
    "--shm-size", help="Private /dev/shm of this size (e.g. 16g) instead of ipc: host.",
    rich_help_panel=SPEC_PANEL, show_default=False)]
Ipc = Annotated[Optional[str], typer.Option("--ipc", help="host | private.",
                                            rich_help_panel=SPEC_PANEL, show_default=False)]
Network = Annotated[Optional[str], typer.Option(
    "--network", help="bridge (one host, private network) | host (multi-host).",
    rich_help_panel=SPEC_PANEL, show_default=False)]
Hosts = Annotated[Optional[str], typer.Option(
    "--hosts", help="Comma-separated host addresses, one per node, master first (multi-host).",
    rich_help_panel=SPEC_PANEL, show_default=False)]
MaxRestarts = Annotated[Optional[int], typer.Option(
    "--max-restarts", help="Restarts after a node fails with a retryable exit code (>= 128: killed, OOM, lost "
    "peer) before the job fails; 0 (default): fail at once. up: the whole job restarts and resumes from its last "
    "checkpoint in /checkpoints (docs/fault-tolerance.md).", rich_help_panel=SPEC_PANEL, show_default=False)]
DeviceIds = Annotated[Optional[str], typer.Option(
    "--device-ids", help="Comma-separated host GPU ids to split across nodes.",
    rich_help_panel=SPEC_PANEL, show_default=False)]
Workdir = Annotated[Optional[str], typer.Option(
    "--workdir", help="Host directory mounted at /workspace and used as working directory (e.g. '.').",
    rich_help_panel=SPEC_PANEL, show_default=False)]
User = Annotated[Optional[str], typer.Option(
    "--user", help="uid[:gid] or name the containers run as, e.g. root (up: the caller's uid:gid when a host "
    "directory is mounted, so files written through --workdir/--volume are yours; compose: only when given).",
    rich_help_panel=SPEC_PANEL, show_default=False)]
Command = Annotated[Optional[list[str]], typer.Argument(
    help="Command to run in every process after '--' (default: ddp-train).", show_default=False)]


def spec_from_cli(
    file: Path | None = None,
    *,
    name: str | None = None,
    image: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    nproc_per_node: int | None = None,
    backend: str | None = None,
    port: int | None = None,
    env: list[str] | None = None,
    secret_env: list[str] | None = None,
    volume: list[str] | None = None,
    shm_size: str | None = None,
    ipc: str | None = None,
    network: str | None = None,
    hosts: str | None = None,
    max_restarts: int | None = None,
    device_ids: str | None = None,
    workdir: str | None = None,
    user: str | None = None,
    command: list[str] | None = None,
    extra: dict | None = None,
) -> JobSpec:
    """Merge the file and the flags, then validate once (same rules and messages for both)."""
    overrides = {
        "name": name,
        "image": image,
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "nproc_per_node": nproc_per_node,
        "backend": backend,
        "port": port,
        "env": list(env) if env else None,
        "secret_env": list(secret_env) if secret_env else None,
        "volumes": list(volume) if volume else None,
        "shm_size": shm_size,
        "ipc": ipc,
        "network": network,
        "hosts": hosts,
        "max_restarts": max_restarts,
        "device_ids": device_ids,
        "workdir": workdir,
        "user": user,
        "command": list(command) if command else None,
    }
    if shm_size is not None and ipc is None:
        overrides["ipc"] = "private"  # a size on the command line replaces the file's ipc: host
    overrides.update(extra or {})
    return load_spec(file, overrides)
