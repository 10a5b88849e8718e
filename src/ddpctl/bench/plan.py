"""Planning the benchmark matrix. Pure: options + what the host has -> the list of cells to run.

A *cell* is one (workload, data pipeline, strategy, GPU count) combination; each cell runs ``repeat``
times for ``warmup`` + ``steps`` training steps. The rules:

- ``single`` runs on 1 GPU only; ``dp`` (DataParallel) and ``ddp`` run on every GPU count >= 2 asked for
  (``ddp`` on 1 GPU too when 1 is the only count, so a 1-GPU host still exercises DDP);
- a workload runs only the data pipelines it supports (the synthetic ImageNet set has no CPU DataLoader
  variant: its images are generated on the device);
- the ``classic`` pipeline is the reference input pipeline every report compares with: a torchvision model,
  PIL per-sample transforms in DataLoader workers, fp32, eager steps; it runs as ``single`` and ``ddp`` (the
  reference program is a DDP program), never as ``dp``;
- ``--links socket`` adds the network-bound regime: every ``ddp`` cell of ddp-train's own pipelines (not
  ``classic``, whose CPU input pipeline sets its pace) on an even count >= 2 runs again as a
  two-node emulation on this host (two torchrun agents of N/2 GPUs each, a TCP rendezvous on 127.0.0.1, NCCL
  forced onto its socket transport over loopback), what multi-node users on Ethernet meet; ``--socket-nodes``
  names other node counts (e.g. ``2,4``: a 4-GPU cell also as 4 nodes x 1), each wherever it divides the GPU
  count; the all-reduce probe runs over the two-node shape only, which the forecast's measured link is fitted
  from, so a cell of more nodes checks the forecast where it was not fitted;
- cells run workload by workload, then the socket cells, ``dp`` cells last (a ``--time-budget`` that runs out
  cuts them first);
- on a host without GPUs "GPUs" are CPU processes (gloo): ``dp`` is dropped (DataParallel needs GPUs),
  the default matrix shrinks to the ``toy`` workload at 1 and 2 processes with few steps, so the command
  always works.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpctl.errors import UsageError

STRATEGIES = ("single", "dp", "ddp")
PIPELINES = ("device", "dataloader", "classic")  # ddp-train's --data-pipeline names
# Deprecated spellings, kept for one release: "gpu" was the device pipeline's name in ddpctl bench. The CLI
# warns when one is passed; BenchOptions and reports read from older files (compare.load_report) map them.
PIPELINE_ALIASES = {"gpu": "device"}
RUNTIMES = ("host", "docker")
LINKS = ("local", "socket")  # local: the host's own interconnect (NVLink, PCIe, shared memory); socket: 2 nodes
SOCKET_NODES = (2,)  # node counts of the socket emulation (--socket-nodes)
MAX_SOCKET_NODES = 64
MAX_REPEAT = 100  # runs per cell: the median and spread need few; more is a typo
# bench-state.schema.json's bounds (--warmup/--steps/--batch-size, --gpus counts, GPUs, --probe-max): beyond, no --resume
MAX_COUNT, MAX_LIST, MAX_GPUS, MAX_PROBE_BYTES = 1_000_000, 16, 1024, 1 << 40


@dataclass(frozen=True)
class Workload:
    """A benchmark workload: a ddp-train workload + model, with what the report needs to know of it."""

    name: str
    train_workload: str
    model: str | None
    pipelines: tuple[str, ...]
    batch_size_gpu: int  # per GPU
    batch_size_cpu: int  # per process on a CPU host
    dataset_size: int  # training images per epoch (for the epoch time when the program reports none)
    param_count: int | None  # trainable parameters, when known ahead (the program's summary wins)
    warmup_gpu: int = 20  # default warm-up / timed steps on GPU: about a second or more of timed work
    steps_gpu: int = 50
    classic_model: str | None = None  # the torchvision model of the classic pipeline (None: no classic cell)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("toy", "toy", None, ("device", "dataloader"), 256, 32, 2_048, None, 20, 100),
        Workload("cifar10-resnet18", "cifar10", "resnet18", ("device", "dataloader", "classic"), 256, 32, 50_000,
                 11_173_962, 30, 200, "torchvision-resnet18"),
        # 20 + 80 steps: at least ddp-train's GRAPH_MIN_STEPS (100), so the cell runs the step mode a real
        # (longer) run gets: the whole-step CUDA graph
        Workload("imagenet-synthetic-resnet50", "imagenet-synthetic", "resnet50", ("device",), 256, 8,
                 1_281_167, 25_557_032, 20, 80),
    )
}


@dataclass(frozen=True)
class BenchOptions:
    """Everything the user chose (None = the default for this host)."""

    workloads: tuple[str, ...] | None = None
    strategies: tuple[str, ...] | None = None
    gpus: tuple[int, ...] | None = None
    pipelines: tuple[str, ...] | None = None
    warmup: int | None = None
    steps: int | None = None
    repeat: int = 1
    batch_size: int | None = None  # per GPU; None = the workload's default
    runtime: str = "host"
    probe: bool = True
    probe_max_bytes: int | None = None
    cell_timeout_s: float = 900.0
    time_budget_s: float | None = None  # whole matrix; runs that do not fit are skipped (exit 0)
    extra_args: tuple[str, ...] = ()  # appended to every ddp-train command
    image: str | None = None  # --runtime docker
    links: tuple[str, ...] | None = None  # None: ("local",)
    socket_nodes: tuple[int, ...] | None = None  # None: SOCKET_NODES

    def __post_init__(self) -> None:
        if self.pipelines:  # a deprecated spelling means the pipeline it was the name of
            names = dict.fromkeys(PIPELINE_ALIASES.get(p, p) for p in self.pipelines)  # device,gpu: one pipeline
            object.__setattr__(self, "pipelines", tuple(names))


@dataclass(frozen=True)
class Cell:
    workload: str
    pipeline: str
    strategy: str
    gpus: int  # GPUs, or processes on a CPU host
    batch_size: int  # per GPU
    warmup: int
    steps: int
    link: str = "local"  # "socket": the node emulation (socket_nodes agents of gpus/socket_nodes, NCCL over TCP)
    socket_nodes: int = 2  # with link "socket": how many emulated nodes

    @property
    def nodes(self) -> int:
        return self.socket_nodes if self.link == "socket" else 1

    @property
    def key(self) -> str:
        return cell_key(self.workload, self.pipeline, self.strategy, self.gpus, self.link, self.nodes)

    @property
    def label(self) -> str:
        return f"{self.workload} {self.pipeline} {self.strategy} x{self.gpus}" + (
            f" ({self.nodes} nodes x {self.gpus // self.nodes}, sockets)" if self.link == "socket" else "")


def nodes_of(cell: dict) -> int:
    """A report cell's emulated nodes: its ``nodes``, or (older reports have none) 2 over sockets, 1 local."""
    return int(cell.get("nodes") or (2 if cell.get("link") == "socket" else 1))


def cell_key(workload: str, pipeline: str, strategy: str, gpus: int, link: str = "local", nodes: int = 1) -> str:
    """``workload/pipeline/strategy/gpus``, then ``/socket`` for the two-node emulation and ``/socket/N-nodes`` for
    N other than 2 (the form report.schema.json's key pattern holds)."""
    base = f"{workload}/{pipeline}/{strategy}/{gpus}"
    if link != "socket":
        return base
    return base + "/socket" + ("" if nodes == 2 else f"/{nodes}-nodes")


@dataclass(frozen=True)
class Plan:
    device: str  # "cuda" or "cpu"
    gpu_counts: tuple[int, ...]
    cells: tuple[Cell, ...]
    repeat: int
    probe_sizes: tuple[int, ...]  # world sizes the all-reduce probe runs at
    probe_max_bytes: int
    skipped: tuple[str, ...] = field(default=())  # human-readable notes of combinations left out
    socket_probe_sizes: tuple[int, ...] = ()  # world sizes of the socket cells: probed with and without ddpctl's
    # NCCL socket settings

    @property
    def total_runs(self) -> int:
        return len(self.cells) * self.repeat + len(self.probe_sizes) + 2 * len(self.socket_probe_sizes)


def default_gpu_counts(available: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to what the host has (and the host's count itself when not a power of two)."""
    if available < 1:
        return (1, 2)  # CPU host: 1 and 2 processes
    counts, n = [], 1
    while n <= available:
        counts.append(n)
        n *= 2
    if counts[-1] != available:
        counts.append(available)
    return tuple(counts)


def plan(options: BenchOptions, gpus_available: int) -> Plan:
    """The cells to run, in order. ``gpus_available`` = 0 means a CPU-only host."""
    validate(options)
    cpu = gpus_available < 1

    workloads = options.workloads or (("toy",) if cpu else ("cifar10-resnet18", "imagenet-synthetic-resnet50"))
    strategies = options.strategies or (("single", "ddp") if cpu else STRATEGIES)
    pipelines = options.pipelines or (("device",) if cpu else PIPELINES)
    links = options.links or ("local",)
    socket_nodes = tuple(sorted(set(options.socket_nodes or SOCKET_NODES)))

    if options.gpus:
        counts = tuple(sorted(set(options.gpus)))
        if counts[0] < 1:
            raise UsageError(f"GPU counts must be at least 1, got {counts[0]}", "pass e.g. --gpus 1,2")
        if not cpu and counts[-1] > gpus_available:
            raise UsageError(f"--gpus asks for {counts[-1]} GPUs but this host has {gpus_available}",
                             f"pass counts up to {gpus_available}")
        if cpu and counts[-1] > 8:
            raise UsageError(f"--gpus asks for {counts[-1]} processes on a CPU-only host",
                             "pass at most 8 on a CPU host")
    else:
        counts = default_gpu_counts(gpus_available)

    skipped: list[str] = []
    cells: list[Cell] = []
    for wname in workloads:
        w = WORKLOADS[wname]
        batch = options.batch_size or (w.batch_size_cpu if cpu else w.batch_size_gpu)
        warmup = options.warmup if options.warmup is not None else (2 if cpu else w.warmup_gpu)
        steps = options.steps if options.steps is not None else (5 if cpu else w.steps_gpu)
        for pipe in pipelines:
            if pipe not in w.pipelines:
                skipped.append(f"{wname}: no {pipe} pipeline (its data are generated on the device)"
                               if pipe != "classic" else f"{wname}: no classic (reference pipeline) variant")
                continue
            for strat in strategies:
                if strat == "dp" and cpu:
                    skipped.append("dp: needs GPUs (DataParallel on CPU is one process)")
                    continue
                if strat == "dp" and pipe == "classic":
                    skipped.append("classic: no DataParallel cell (the reference program is DDP)")
                    continue
                for n in counts:
                    if strat == "single" and n != 1:
                        continue
                    if strat == "dp" and n < 2:
                        continue
                    if strat == "ddp" and n < 2 and counts != (1,):
                        continue
                    if "local" in links or strat != "ddp" or n < 2 or pipe == "classic":  # 1-GPU baselines always run
                        cells.append(Cell(wname, pipe, strat, n, batch, warmup, steps))
                    # the classic program's pace is its CPU input pipeline's: over sockets it would measure that
                    for k in socket_nodes if (strat == "ddp" and "socket" in links and pipe != "classic") else ():
                        if n >= k and n % k == 0:
                            cells.append(Cell(wname, pipe, strat, n, batch, warmup, steps, link="socket",
                                              socket_nodes=k))
    if "socket" in links and not any(c.link == "socket" for c in cells):
        skipped.append("socket: no ddp cell whose GPU count the node count(s) "
                       f"{', '.join(map(str, socket_nodes))} divide")
    # DataParallel is the comparison point, not the headline: its cells run last, so a --time-budget that
    # runs out cuts them first; before them the socket cells (stable sort: otherwise workload, pipeline,
    # strategy, GPU order).
    cells.sort(key=lambda c: (c.strategy == "dp", c.link == "socket", c.nodes))
    if not cells:
        raise UsageError("the chosen workloads, pipelines, strategies and GPU counts leave nothing to run",
                         "add a GPU count of 2 or more for dp/ddp, or the strategy single for 1 GPU")
    ddp_counts = tuple(sorted({c.gpus for c in cells if c.strategy == "ddp" and c.gpus >= 2 and c.link == "local"}))
    socket_counts = tuple(sorted({c.gpus for c in cells if c.link == "socket" and c.nodes == 2}))
    max_bytes = options.probe_max_bytes or ((16 << 20) if cpu else (1 << 30))
    return Plan(
        device="cpu" if cpu else "cuda",
        gpu_counts=counts,
        cells=tuple(cells),
        repeat=options.repeat,
        probe_sizes=ddp_counts if options.probe else (),
        probe_max_bytes=max_bytes,
        skipped=tuple(dict.fromkeys(skipped)),
        socket_probe_sizes=socket_counts if options.probe else (),
    )


def validate(options: BenchOptions) -> None:
    """Names and ranges; what does not depend on the host. Raises UsageError (exit 2)."""
    _check_names("workload", options.workloads, WORKLOADS)
    _check_names("strategy", options.strategies, STRATEGIES)
    _check_names("pipeline", options.pipelines, PIPELINES)
    _check_names("link", options.links, LINKS)
    if options.socket_nodes is not None:
        if not options.socket_nodes or any(not 2 <= k <= MAX_SOCKET_NODES for k in options.socket_nodes):
            raise UsageError(f"--socket-nodes {','.join(map(str, options.socket_nodes))}: each node count must be "
                             f"between 2 and {MAX_SOCKET_NODES}", "pass e.g. --socket-nodes 2,4")
        if not (options.links and "socket" in options.links):
            raise UsageError("--socket-nodes applies to the socket link only", "add --links local,socket")
    if options.links and "socket" in options.links and options.runtime != "host":
        raise UsageError("--links socket (the two-node emulation) runs on --runtime host only",
                         "drop socket from --links, or use --runtime host")
    if options.runtime not in RUNTIMES:
        raise UsageError(f"unknown runtime {options.runtime!r}", f"use one of: {', '.join(RUNTIMES)}")
    if not 1 <= options.repeat <= MAX_REPEAT:
        raise UsageError(f"--repeat must be between 1 and {MAX_REPEAT}, got {options.repeat}",
                         f"pass --repeat 1 to {MAX_REPEAT}")
    for flag, value, low in (("--warmup", options.warmup, 0), ("--steps", options.steps, 1),
                             ("--batch-size", options.batch_size, 1)):
        if value is not None and not low <= value <= MAX_COUNT:
            raise UsageError(f"{flag} must be between {low} and {MAX_COUNT:,}, got {value}", f"pass {flag} {low} or more")
    if options.gpus and min(options.gpus) < 1:
        raise UsageError(f"GPU counts must be at least 1, got {min(options.gpus)}", "pass e.g. --gpus 1,2")
    if options.gpus and (len(options.gpus) > MAX_LIST or max(options.gpus) > MAX_GPUS):
        raise UsageError(f"--gpus: at most {MAX_LIST} counts of at most {MAX_GPUS} GPUs", "pass e.g. --gpus 1,2,4,8")
    if options.probe_max_bytes is not None and not 1 <= options.probe_max_bytes <= MAX_PROBE_BYTES:
        raise UsageError(f"--probe-max must be between 1 byte and {MAX_PROBE_BYTES >> 30} GiB", "pass e.g. --probe-max 256m")
    if len(options.extra_args) > MAX_LIST * 4 or any(len(a) > 1024 for a in options.extra_args):
        raise UsageError(f"--train-arg: at most {MAX_LIST * 4} of at most 1024 characters each", "pass fewer, shorter ones")
    if options.time_budget_s is not None and options.time_budget_s <= 0:
        raise UsageError("--time-budget must be positive", "pass seconds, e.g. --time-budget 600")
    if options.cell_timeout_s <= 0:
        raise UsageError("--cell-timeout must be positive", "pass seconds, e.g. --cell-timeout 900")


def _check_names(kind: str, given, allowed) -> None:
    for name in given or ():
        if name not in allowed:
            raise UsageError(f"unknown {kind} {name!r}", f"use one of: {', '.join(allowed)}")
