"""Apply a :class:`~ddpctl.local.plan.LocalPlan` to an engine, and find/stream/remove jobs by label.

This package is the only part of the local cluster with side effects, and it knows the container engine only
through :class:`~ddpctl.local.engine_interface.Engine` (it never imports :mod:`ddpctl.dockerengine`). Rules:

- preflight first (engine reachable, GPUs, image, name clash, port): nothing is created on bad input;
- creation is all-or-nothing: a failure (or Ctrl-C) halfway removes what was created;
- every container and network carries the job labels, so ``ps``, ``logs`` and ``down`` need no state;
- a finished job of the same name is replaced; a running one is a clash.

The parts (callers use the names re-exported here):

- :mod:`.preflight`  checks before anything is created (:func:`preflight`, :func:`secret_values`, ports);
- :mod:`.create`     the one place a job's network and containers are created and started on an engine
                     (:func:`create`, :func:`start`, :func:`up`), with rollback, and :func:`remove_job`;
- :mod:`.attach`     the one place that waits on a started job: streams its output, stops it at the first
                     failure, names the root cause (:func:`attach`, :func:`job_root_cause`, :func:`failure_message`);
- :mod:`.supervise`  an attached job to its end: restarts after retryable node failures
                     (:func:`supervise`, ``up --max-restarts``; the rules in :mod:`ddpctl.local.restarts`),
                     an engine that went away included;
- :mod:`.lifecycle`  an attached ``up`` from start to end: Ctrl-C, SIGTERM, a closed stdout, ``--rm`` and a
                     failed restart each leave nothing behind (:func:`start_job`, :func:`run_attached`);
- :mod:`.stream`     the log pumps and the engine heartbeat (threads that never raise: they hand everything
                     to the main flow) and the bounded wait for a lost engine (``DDPCTL_ENGINE_WAIT``);
- :mod:`.ending`     the one-line ends that are no node's own (engine lost, run not finished) and the command
                     that resumes a job (``up --resume``);
- :mod:`.lines`      the text of node output (``rank-N |`` prefixes, the launcher's failure line);
- :mod:`.several_hosts`  a job on several Docker hosts: preflight on each (the image pulled where missing),
                     then the same create/start through the one engine that spans them (``node_per_host``);
- :mod:`.jobs`       ``ps`` / ``logs`` / ``down --all`` by label;
- :mod:`.common`     labels and helpers the others share.
"""

from __future__ import annotations

from ddpctl.joboutput.lines import (
    COLORS,
    LAUNCH_FAILURE,
    LAUNCHER,
    PEER_GRACE_S,
    RANK_LINE,
    RESET,
    format_line,
    label,
    label_width,
    node_ranks,
    parse_launch_failure,
    peer_loss_line,
    prefix,
    silent_ranks_line,
    split_rank,
)
from ddpctl.launch import job_label
from ddpctl.local.executor.attach import (
    Lost,
    NodeFailure,
    Outcome,
    OutputClosed,
    attach,
    failure_message,
    job_root_cause,
    node_failure,
    root_cause,
)
from ddpctl.local.executor.common import MANAGED, Say
from ddpctl.local.executor.create import Job, check_resume, create, remove_job, restart, rollback, start, up
from ddpctl.local.executor.ending import EXIT_ENGINE_LOST, resume_argv
from ddpctl.local.executor.jobs import (
    NodeRow,
    all_jobs,
    follow_logs,
    format_age,
    job_nodes,
    list_nodes,
    merged_logs,
    wait_for_line,
)
from ddpctl.local.executor.lifecycle import Started, Stopped, run_attached, start_job
from ddpctl.local.executor.preflight import host_cpus, port_free, preflight, secret_values
from ddpctl.local.executor.several_hosts import ensure_image, preflight_hosts, up_hosts
from ddpctl.local.executor.stream import ENGINE_WAIT_ENV, engine_wait_s
from ddpctl.local.executor.supervise import Finished, supervise

__all__ = [
    "COLORS", "LAUNCHER", "LAUNCH_FAILURE", "MANAGED", "PEER_GRACE_S", "RANK_LINE", "RESET", "Finished", "Job",
    "NodeFailure",
    "NodeRow", "Outcome", "OutputClosed", "Say", "all_jobs", "attach", "create", "failure_message",
    "follow_logs", "format_age", "format_line", "host_cpus", "job_label", "job_nodes", "job_root_cause",
    "label", "label_width", "list_nodes", "merged_logs", "node_failure", "node_ranks", "parse_launch_failure",
    "peer_loss_line", "port_free", "prefix", "preflight", "remove_job", "restart", "rollback", "root_cause", "secret_values",
    "silent_ranks_line", "split_rank", "start", "supervise", "up", "wait_for_line",
    "ensure_image", "preflight_hosts", "up_hosts",
    "ENGINE_WAIT_ENV", "EXIT_ENGINE_LOST", "Lost", "Started", "Stopped", "engine_wait_s", "resume_argv",
    "check_resume", "run_attached", "start_job",
]
