"""``ddpctl doctor``: does this machine have what the target needs? One line per check, with the fix."""

from __future__ import annotations

import json
import re
from typing import Annotated, Optional

import typer

from ddpctl.cli.app import app


@app.command("doctor")
def doctor(
    target: Annotated[str, typer.Option("--target", "-t", help="local | compose | k8s | slurm.")] = "local",
    nodes: Annotated[str, typer.Option("--nodes", "-n", help="Nodes of the job, or MIN:MAX for an elastic job "
                                       "(checked for MAX; local/compose: all on this host).")] = "1",
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", "-g", help="GPUs per node; > 0 adds the NVIDIA "
                                               "runtime, GPU count and driver checks.")] = 0,
    nproc_per_node: Annotated[int, typer.Option("--nproc-per-node", show_default=False, help="Processes per "
                                                "node (default: the GPUs, or 1 on CPU).")] = 0,
    workers: Annotated[int, typer.Option("--workers", help="DataLoader workers per process, for the /dev/shm "
                                         "check.")] = 4,
    port: Annotated[int, typer.Option("--port", help="Master port that must be free.")] = 29500,
    network: Annotated[str, typer.Option("--network", help="local/compose: bridge | host.")] = "bridge",
    image: Annotated[Optional[str], typer.Option("--image", help="Image whose CUDA the host driver must support "
                                                 "(default ddpctl/ddp-train:cuda).", show_default=False)] = None,
    partition: Annotated[Optional[str], typer.Option("--partition", help="slurm: the partition that must be "
                                                     "visible.", show_default=False)] = None,
    container: Annotated[str, typer.Option("--container", help="slurm: none | pyxis | apptainer (checks the "
                                           "runtime is there).")] = "none",
    checkpoint_dir: Annotated[Optional[str], typer.Option("--checkpoint-dir", help="local/compose: the directory "
                              "the job mounts at /checkpoints (-v DIR:/checkpoints); default: its checkpoint volume, "
                              "in the Docker Engine's data root.", show_default=False)] = None,
    checkpoint_size: Annotated[Optional[str], typer.Option("--checkpoint-size", help="local/compose: the size of one "
                               "checkpoint (e.g. 120m); default: read from a checkpoint already in --checkpoint-dir. "
                               "With either, checks there is room for --keep-checkpoints + 1 of them.",
                               show_default=False)] = None,
    keep_checkpoints: Annotated[int, typer.Option("--keep-checkpoints", help="ddp-train's --keep-checkpoints of "
                                                  "the job.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout instead of lines.")] = False,
) -> None:
    """Check what the chosen target needs on this machine; exit 1 when any check fails.

    local/compose: the Docker Engine and its version; with --gpus-per-node the NVIDIA runtime (or CDI
    devices), the host's GPU count and its driver against the image's CUDA. k8s: kubectl, a current context,
    the PyTorchJob/TrainJob CRDs. slurm: sbatch/srun/scontrol, visible partitions, pyxis or Apptainer with
    --container. All but k8s: /dev/shm for the DataLoader workers, memlock and stack ulimits, the master port.
    All: InfiniBand devices and NCCL_SOCKET_IFNAME candidates. With --checkpoint-dir or --checkpoint-size:
    room for the job's checkpoints (the kept ones plus the one being written).

    Examples:

      ddpctl doctor

      ddpctl doctor --target local --nodes 2 --gpus-per-node 4

      ddpctl doctor --target slurm --partition gpu --container pyxis --json

      ddpctl doctor --checkpoint-dir /shared/ckpt --checkpoint-size 1200m
    """
    from ddpctl import doctor as dr
    from ddpctl.errors import UsageError

    for flag, value, allowed in (("--target", target, dr.TARGETS), ("--container", container, dr.CONTAINERS),
                                 ("--network", network, ("bridge", "host"))):
        if value not in allowed:
            raise UsageError(f"{flag} {value!r} is not one of {', '.join(allowed)}", f"pass {flag} {allowed[0]}")
    count = re.fullmatch(r"\s*(\d+)\s*(?::\s*(\d+)\s*)?", nodes)
    if not count:
        raise UsageError(f"--nodes {nodes!r} is not a node count or MIN:MAX", "pass e.g. --nodes 2 or --nodes 1:4")
    low_nodes, most = int(count.group(1)), int(count.group(2) or count.group(1))
    if low_nodes > most:
        raise UsageError(f"--nodes {nodes}: MIN is above MAX", f"pass --nodes {most}:{low_nodes}")
    for flag, value, low in (("--nodes", low_nodes, 1), ("--gpus-per-node", gpus_per_node, 0),
                             ("--nproc-per-node", nproc_per_node, 0), ("--workers", workers, 0)):
        if value < low:
            raise UsageError(f"{flag} must be >= {low}, got {value}", f"pass {flag} {max(low, 1)}")
    if not 1 <= port <= 65535:
        raise UsageError(f"--port {port} is not a TCP port", "pass a port in 1..65535, e.g. --port 29500")
    size = None
    if checkpoint_size is not None:
        from ddpctl.spec.units import parse_size

        size = parse_size(checkpoint_size, lambda why: UsageError(f"--checkpoint-size {checkpoint_size!r}: {why}",
                                                                  "pass e.g. --checkpoint-size 120m"))
    if keep_checkpoints < 1:
        raise UsageError(f"--keep-checkpoints must be >= 1, got {keep_checkpoints}", "pass --keep-checkpoints 3")
    opts = dr.Options(target=target, nodes=most, gpus_per_node=gpus_per_node, nproc_per_node=nproc_per_node,
                      workers=workers, port=port, network=network, image=image, partition=partition,
                      container=container, checkpoint_dir=checkpoint_dir, checkpoint_size=size or None,
                      keep_checkpoints=keep_checkpoints)
    results = dr.run(opts, dr.host_probes())
    if as_json:
        typer.echo(json.dumps(dr.to_json(opts, results), indent=2))
    else:
        for c in results:
            typer.echo(c.line())
        bad = sum(c.status == "fail" for c in results)
        warn = sum(c.status == "warn" for c in results)
        typer.echo(f"doctor ({target}): {len(results)} checks, {bad} failed, {warn} warning(s)")
    if dr.failed(results):
        raise typer.Exit(1)
