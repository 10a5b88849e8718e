"""The field table: every key of a job spec, once, with its check and, if it has one, its CLI flag.

Validation (:mod:`ddpctl.spec.build`), ``spec_to_dict``, the flags of ``ddpctl render *`` and ``ddpctl up``
(:mod:`ddpctl.cli.spec_options`) and the unit test that every model field has an entry all read this table. Adding a
spec field: the attribute on the model (:mod:`ddpctl.spec.model`) and one :class:`Field` here; a rule that
relates two fields goes in :func:`ddpctl.spec.build.cross_checks`. See docs/architecture.md.

Top-level keys are plain (``nodes``); the options of a section are dotted (``kubernetes.namespace``) and their
section's entry checks them through the same table.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ddpctl import rules
from ddpctl.spec import checks as c
from ddpctl.spec.checks import Checker
from ddpctl.spec.fieldtypes import Check, Field, Flag  # noqa: F401  (Field, Flag: the table's entries)
from ddpctl.spec.model import MAX_GPUS_PER_NODE, MAX_NAME_LEN, MAX_NODES, SECTIONS


def _int(lo: int | None, hi: int | None) -> Check:
    return lambda ck, p, v: ck.integer(p, v, lo, hi)


def _choice(*choices: str) -> Check:
    return lambda ck, p, v: ck.choice(p, v, choices)


def _string(pattern=None, what: str = "") -> Check:
    return lambda ck, p, v: ck.string(p, v, pattern, what)


def _bool(ck: Checker, p, v) -> bool:
    return ck.boolean(p, v)


def _size(ck: Checker, p, v) -> int:
    return ck.size(p, v)


MIN_MEMORY = 6 * 1024**2  # the Docker Engine's minimum memory limit ("Minimum memory limit allowed is 6MB")


def _memory(ck: Checker, p, v) -> int:
    n = ck.size(p, v)
    if n < MIN_MEMORY:
        raise ck.fail(p, f"is {n} bytes, less than the 6m a container engine accepts as a memory limit",
                      "give at least 6m (a training process needs far more)")
    return n


def _section(name: str) -> Check:
    def check(ck: Checker, p, v) -> Any:
        data = ck.mapping(p, v)
        known = SUB_KEYS[name]
        for key in data:
            if key not in known:
                raise c.unknown(ck, p, key, known)
        kw = {key: FIELDS[f"{name}.{key}"].check(ck, p + (key,), x) for key, x in data.items() if x is not None}
        return SECTIONS[name](**kw)
    return check


def _dump_section(value: Any) -> dict[str, Any]:
    default = type(value)()
    out: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        x = getattr(value, f.name)
        if x != getattr(default, f.name):
            entry = FIELDS[f"{_SECTION_OF[type(value)]}.{f.name}"]
            out[f.name] = entry.dump(x) if entry.dump else (list(x) if isinstance(x, tuple) else x)
    return out


_SECTION_OF = {cls: name for name, cls in SECTIONS.items()}
_K8S = ("pytorchjob", "trainjob")


# The order of the flagged entries is the order of the flags in --help.
_TABLE: list[Field] = [
    Field("name", lambda ck, p, v: c.job_name(ck, p, v, MAX_NAME_LEN),
          Flag(("--name",), str, "Job name (DNS-1035 label)."),
          sample="sample-job"),
    Field("image", lambda ck, p, v: ck.rule(p, rules.image_ref, ck.string(p, v)),
          Flag(("--image",), str, "Container image."),
          sample="example.com/team/img:1", needs={"slurm": {"container": "pyxis"}}),
    Field("nodes", c.nodes,
          Flag(("--nodes", "-n"), str, "Number of nodes, or MIN:MAX for an elastic job (torchrun c10d, "
               "--nnodes MIN:MAX; PyTorchJob elasticPolicy, Slurm --nodes=MIN-MAX)."),
          sample=2),
    Field("min_nodes", _int(1, MAX_NODES), sample=1, needs={"nodes": 3}),  # `nodes: 1:3` in a file
    Field("gpus_per_node", _int(0, MAX_GPUS_PER_NODE),
          Flag(("--gpus-per-node", "-g"), int, "GPUs per node (0 = CPU)."),
          sample=2),
    Field("nproc_per_node", _int(1, 256),
          Flag(("--nproc-per-node",), int, "Processes per node (default: GPUs per node, or 1 on CPU)."),
          sample=3),
    Field("backend", _choice("auto", "nccl", "gloo"), Flag(("--backend",), str, "auto | nccl | gloo."),
          sample="gloo", needs={"gpus_per_node": 1}),
    Field("port", _int(1024, 65535), Flag(("--port",), int, "Master / rendezvous port."),
          sample=29600),
    Field("env", c.env, Flag(("--env", "-e"), list, "KEY=VALUE, repeatable."), dump=dict,
          sample={"SAMPLE": "1"}),
    Field("secret_env", c.secret_env,
          Flag(("--secret-env",), list,
               "NAME[=SECRET[:KEY]], repeatable: NAME's value never lands in a file; Kubernetes reads it from "
               "Secret SECRET (key KEY, default NAME), compose/up/Slurm from the caller's environment."),
          dump=lambda value: {e.name: (None if e.secret is None else e.secret + (f":{e.key}" if e.key else ""))
                              for e in value},
          sample={"HF_TOKEN": "hf:token"}),
    Field("volumes", c.volumes, Flag(("--volume", "-v"), list, "SOURCE:TARGET[:ro], repeatable.", param="volume"),
          dump=lambda value: [str(v) for v in value],
          sample=["/data:/data:ro"], needs={"slurm": {"container": "pyxis"}}),
    Field("shm_size", _size,
          Flag(("--shm-size",), str, "Private /dev/shm of this size (e.g. 16g) instead of ipc: host."),
          sample="1g"),
    Field("ipc", _choice("host", "private"), Flag(("--ipc",), str, "host | private."),
          sample="private"),
    Field("network", _choice("bridge", "host"),
          Flag(("--network",), str, "bridge (one host, private network) | host (multi-host)."),
          sample="host"),
    Field("hosts", lambda ck, p, v: ck.str_list(p, v, c.HOST_RE, "a host name or IP address"),
          Flag(("--hosts",), str, "Comma-separated host addresses, one per node, master first (multi-host).",
               commands=("up", "compose", "pytorchjob", "trainjob", "slurm")),
          sample=["node-a"], needs={"network": "host"}),
    Field("docker_hosts", lambda ck, p, v: tuple(ck.rule(p, rules.docker_host, h) for h in ck.str_list(
              p, v, c.DOCKER_HOST_RE, "a Docker host URL (unix://, tcp://, ssh://) or context name")),
          Flag(("--docker-hosts",), str,
               "Comma-separated Docker hosts, one per node, node 0 first: unix:///PATH, tcp://HOST[:PORT] (TLS "
               "from DOCKER_TLS_VERIFY/DOCKER_CERT_PATH), ssh://[USER@]HOST or docker context names; host "
               "networking, node 0's address the master (--hosts, else the URL's host). Default: "
               "$DDPCTL_DOCKER_HOSTS.", commands=("up",)),
          sample=["tcp://10.0.0.1:2376"]),
    Field("max_restarts", _int(0, 100), Flag(
        ("--max-restarts",), int, "Restarts after a node fails with a retryable exit code (>= 128: killed, OOM, "
        "lost peer) before the job fails; 0 (default): fail at once. up: the whole job restarts and resumes from "
        "its last checkpoint in /checkpoints (docs/fault-tolerance.md)."),
          sample=2),
    Field("device_ids", lambda ck, p, v: tuple(ck.rule(p, rules.device_id, x) for x in ck.str_list(p, v)),
          Flag(("--device-ids",), str, "Comma-separated host GPU ids to split across nodes."),
          sample=["1"], needs={"gpus_per_node": 1}),
    Field("workdir", lambda ck, p, v: ck.rule(p, rules.host_path, ck.string(p, v), what="workdir"),
          Flag(("--workdir",), str,
               "Host directory with your code, mounted at /workspace as the working directory (e.g. '.'); "
               "with --bake (up) or --push (render) built into the image instead."),
          sample="/srv/code"),
    Field("user", _string(c.USER_RE, "a user such as 1000:1000, 1000 or root"),
          Flag(("--user",), str,
               "uid[:gid] or name the containers run as, e.g. root (up: the caller's uid:gid when a host "
               "directory is mounted, so files written through --workdir/--volume are yours; compose: only when "
               "given)."),
          sample="1000:1000"),
    Field("command", c.command,
          sample=["python", "train.py"]),  # the positional words after '--' (cli/spec_options.py: Command)
    Field("master_addr", _string(c.HOST_RE, "a host name or IP address"),
          sample="10.0.0.1", needs={"network": "host"}),
    Field("memlock", _bool,
          sample=True),
    Field("tensorboard", _bool, Flag(
        ("--tensorboard",), bool, "ddp-train writes TensorBoard event files to tensorboard/ in the job's checkpoint "
        "directory (--tensorboard DIR; other programs read DDPCTL_TENSORBOARD): /checkpoints/tensorboard on the "
        "volume <job>-ckpt (up, compose) or on your -v DIR:/checkpoints (needed on Kubernetes and several hosts); "
        "Slurm: $DDPCTL_CHECKPOINTS/tensorboard.",
        commands=("up", "compose", "pytorchjob", "trainjob", "slurm")),
          sample=True, needs={"volumes": ["/mnt/shared/ckpt:/checkpoints"], "slurm": {"container": "pyxis"}}),
    Field("cpus_per_node", c.cpus,
          sample=2),
    Field("memory_per_node", _memory,
          sample="4g"),
    # ---- nccl:
    Field("nccl", _section("nccl"), dump=_dump_section),
    Field("nccl.socket_ifname", _string(c.IFNAME_RE, "a network interface name such as eth0"),
          sample="eth0"),
    Field("nccl.debug", lambda ck, p, v: ck.choice(p, str(v).upper() if isinstance(v, str) else v,
                                                   ("VERSION", "WARN", "INFO", "TRACE")),
          sample="INFO"),
    Field("nccl.ib_disable", _bool,
          sample=True),
    # ---- kubernetes: (PyTorchJob, TrainJob)
    Field("kubernetes", _section("kubernetes"), dump=_dump_section),
    Field("kubernetes.namespace", c.k8s_name(rules.dns1123_label, "namespace"),
          Flag(("--namespace",), str, "metadata.namespace.", commands=_K8S),
          sample="ml"),
    Field("kubernetes.restart_policy", _choice("OnFailure", "ExitCode", "Never"),
          Flag(("--restart-policy",), str, "OnFailure | ExitCode | Never (PyTorchJob).", commands=("pytorchjob",)),
          sample="Never"),
    Field("kubernetes.backoff_limit", _int(0, 1000),
          sample=5),
    Field("kubernetes.clean_pod_policy", _choice("Running", "All", "None"),
          sample="All"),
    Field("kubernetes.ttl_seconds_after_finished", _int(0, rules.INT32_MAX),
          sample=60),
    Field("kubernetes.active_deadline_seconds", _int(1, rules.INT64_MAX),
          sample=600),
    Field("kubernetes.gang", _bool,
          Flag(("--gang",), bool, "Gang scheduling: runPolicy.schedulingPolicy.minAvailable = nodes.",
               commands=("pytorchjob",)),
          sample=True),
    Field("kubernetes.scheduler_name", c.k8s_name(rules.dns1123_subdomain, "scheduler name"),
          Flag(("--scheduler-name",), str, "Pod schedulerName (e.g. volcano).", commands=("pytorchjob",)),
          sample="volcano"),
    Field("kubernetes.queue", c.k8s_name(rules.dns1123_subdomain, "queue name"),
          Flag(("--queue",), str, "schedulingPolicy.queue (Volcano).", commands=("pytorchjob",)),
          sample="q1"),
    Field("kubernetes.priority_class", c.k8s_name(rules.dns1123_subdomain, "priority class name"),
          sample="high"),
    Field("kubernetes.kueue_queue", c.k8s_name(rules.dns1123_subdomain, "Kueue LocalQueue name", label_value=True),
          Flag(("--kueue-queue",), str, "Kueue LocalQueue (label kueue.x-k8s.io/queue-name).", commands=_K8S),
          sample="team-a"),
    Field("kubernetes.istio_sidecar", _bool,
          sample=True),
    Field("kubernetes.node_selector", c.node_selector, dump=dict,
          sample={"gpu": "a100"}),
    Field("kubernetes.tolerations", c.tolerations, dump=lambda value: [dict(t) for t in value],
          sample=[{"key": "gpu", "operator": "Exists"}]),
    Field("kubernetes.service_account", c.k8s_name(rules.dns1123_subdomain, "service account name"),
          Flag(("--service-account",), str, "Pod serviceAccountName.", commands=_K8S),
          sample="trainer"),
    Field("kubernetes.runtime", c.k8s_name(rules.dns1123_subdomain, "ClusterTrainingRuntime name"),
          Flag(("--runtime",), str, "ClusterTrainingRuntime name (default torch-distributed).",
               commands=("trainjob",)),
          sample="my-runtime"),
    Field("kubernetes.shm_size", _size,
          sample="2g"),
    # ---- slurm:
    Field("slurm", _section("slurm"), dump=_dump_section),
    Field("slurm.partition", _string(), Flag(("--partition",), str, "#SBATCH --partition.", commands=("slurm",)),
          sample="gpu"),
    Field("slurm.account", _string(), Flag(("--account",), str, "#SBATCH --account.", commands=("slurm",)),
          sample="acct"),
    Field("slurm.qos", _string(), Flag(("--qos",), str, "#SBATCH --qos.", commands=("slurm",)),
          sample="high"),
    Field("slurm.time", _string(c.SLURM_TIME_RE, "a Slurm time such as 02:00:00 or 1-00:00:00"),
          Flag(("--time",), str, "#SBATCH --time, e.g. 02:00:00.", commands=("slurm",)),
          sample="01:00:00"),
    Field("slurm.cpus_per_task", _int(1, 100_000),
          sample=4),
    Field("slurm.mem", _string(c.SLURM_MEM_RE, "a Slurm memory size such as 64G"),
          sample="64G"),
    Field("slurm.container", _choice("none", "pyxis", "apptainer"),
          Flag(("--container",), str, "none | pyxis | apptainer.", commands=("slurm",)),
          sample="pyxis"),
    Field("slurm.container_image", lambda ck, p, v: ck.rule(p, rules.container_image, ck.string(p, v)),
          Flag(("--container-image",), str, "Image for pyxis/apptainer (default: the job image).",
               commands=("slurm",)),
          sample="nvcr.io#nvidia/pytorch:25.08-py3", needs={"slurm": {"container": "pyxis"}}),
    Field("slurm.output", _string(),
          sample="out-%j.txt"),
    Field("slurm.requeue", _bool,
          Flag(("--requeue",), bool, "#SBATCH --requeue; after a --signal-seconds checkpoint the job requeues "
               "itself and resumes (ddp-train: --resume auto).", commands=("slurm",)),
          sample=True),
    Field("slurm.signal_seconds", _int(10, 86_400),
          Flag(("--signal-seconds",), int, "#SBATCH --signal=B:USR1@SECONDS: the training stops at a checkpoint "
               "that long before the time limit.", commands=("slurm",)),
          sample=120, needs={"slurm": {"time": "01:00:00"}}),
    # ---- workspace: (your code in an image: render --push, up --bake; see ddpctl/images/bake.py)
    Field("workspace", _section("workspace"), dump=_dump_section),
    Field("workspace.dir", lambda ck, p, v: ck.rule(p, rules.host_path, ck.string(p, v), what="workspace dir"),
          sample="/home/u/proj"),
    Field("workspace.requirements", lambda ck, p, v: ck.rule(p, rules.host_path, ck.string(p, v),
                                                             what="requirements file"),
          Flag(("--requirements",), str, "pip requirements of the --workdir code, installed into the workspace "
               "image (default: DIR/requirements.txt when it exists)."),
          sample="/home/u/proj/requirements.txt"),
    Field("workspace.repository", lambda ck, p, v: ck.rule(p, rules.image_ref, ck.string(p, v)),
          Flag(("--push",), str, "Build the --workdir code into an image on the job image, push it to this "
               "repository (REGISTRY/NAME) and render with it pinned by digest.", param="push",
               commands=("compose", "pytorchjob", "trainjob", "slurm")),
          # what the renderers get from 'ddpctl render --push': the image built, pushed and pinned by digest
          sample="registry.example:5000/team/proj",
          needs={"image": "registry.example:5000/team/proj@sha256:" + "ab" * 32, "slurm": {"container": "pyxis"}}),
]

FIELDS: dict[str, Field] = {f.key: f for f in _TABLE}
TOP_KEYS: frozenset[str] = frozenset(k for k in FIELDS if "." not in k)
SUB_KEYS: dict[str, frozenset[str]] = {
    name: frozenset(k.split(".", 1)[1] for k in FIELDS if k.startswith(name + ".")) for name in SECTIONS
}


def flags(command: str) -> list[Field]:
    """The fields with a flag on ``command`` (``up``, ``compose``, ``pytorchjob``, ``trainjob``, ``slurm``), in
    --help order: the job-spec flags first, then the target's own options."""
    chosen = [f for f in _TABLE if f.flag and (f.flag.commands is None or command in f.flag.commands)]
    return [f for f in chosen if not f.section] + [f for f in chosen if f.section]
