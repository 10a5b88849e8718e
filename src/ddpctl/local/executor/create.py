"""Create and start a job's containers (all or nothing), and remove a job by label.

The one place where a job's network and containers are created on an engine and started: ``up`` is
preflight -> replace a finished run -> :func:`create` -> :func:`start`. A failure (or Ctrl-C) halfway
removes what was created (:func:`rollback`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Callable, Mapping

from ddpctl.errors import EngineError
from ddpctl.local.engine import Engine
from ddpctl.local.executor.common import Say, _quiet, _reason, job_label
from ddpctl.local.executor.preflight import port_free, preflight, secret_values
from ddpctl.local.plan import LocalPlan, container_request


@dataclass
class Job:
    plan: LocalPlan
    ids: dict[int, str]  # rank -> container id
    network_id: str | None


def remove_job(engine: Engine, job: str, *, network: str | None = None) -> tuple[int, int]:
    """Remove every container and network labelled ``job``. Idempotent. Returns (containers, networks)."""
    n_c = n_n = 0
    for c in engine.containers(label=job_label(job)):
        engine.remove_container(c.id)
        n_c += 1
    nets = engine.networks(label=job_label(job))
    for net in nets:
        engine.remove_network(net.id)
        n_n += 1
    return n_c, n_n


def create(plan: LocalPlan, engine: Engine, *, say: Say = _quiet,
           secrets: Mapping[str, str] | None = None) -> Job:
    """Create the network and every container, or nothing at all."""
    if secrets is None:
        secrets = secret_values(plan, os.environ)
    ids: dict[int, str] = {}
    network_id = None
    try:
        if plan.network:
            network_id = engine.create_network(plan.network, dict(plan.network_labels))
        for c in plan.containers:
            ids[c.rank] = engine.create_container(container_request(c, secrets))
        return Job(plan, ids, network_id)
    except BaseException as exc:
        rollback(engine, list(ids.values()), network_id)
        if isinstance(exc, KeyboardInterrupt):
            raise
        if isinstance(exc, EngineError):
            raise
        raise EngineError(f"creating job {plan.job} failed ({_reason(exc)}); nothing was left behind",
                          "fix the cause above and run 'ddpctl up' again") from None


def start(job: Job, engine: Engine) -> None:
    """Start every node (node 0 first); a failure stops and removes the whole job."""
    try:
        for rank in sorted(job.ids):
            engine.start(job.ids[rank])
    except BaseException as exc:
        rollback(engine, list(job.ids.values()), job.network_id)
        if isinstance(exc, KeyboardInterrupt):
            raise
        reason = _reason(exc)
        launcher = job.plan.containers[0].argv[0] if job.plan.containers else ""
        if "executable file not found" in reason and launcher and launcher in reason:
            raise EngineError(f"image {job.plan.image} has no '{launcher}' (the ddp-train package's torchrun "
                              "wrapper every node starts with); nothing was left behind",
                              f"build on it with 'ddpctl image build --base {job.plan.image} --tag ...', or "
                              "'pip install' this project in it") from None
        raise EngineError(f"starting job {job.plan.job} failed ({reason}); nothing was left behind",
                          "fix the cause above and run 'ddpctl up' again") from None


def rollback(engine: Engine, cids: list[str], network_id: str | None) -> None:
    for cid in cids:
        try:
            engine.remove_container(cid)
        except Exception as exc:  # noqa: BLE001 - keep removing the rest; say what stayed
            print(f"warning: could not remove container {cid[:12]}: {_reason(exc)}", file=sys.stderr)
    if network_id:
        try:
            engine.remove_network(network_id)
        except Exception as exc:  # noqa: BLE001
            print(f"warning: could not remove network {network_id[:12]}: {_reason(exc)}", file=sys.stderr)


def up(plan: LocalPlan, engine: Engine, *, host_gpus: int, say: Say = _quiet,
       port_check: Callable[[int], bool] = port_free, environ: Mapping[str, str] | None = None) -> Job:
    """Preflight, replace a finished run of the same name, create all, start all.

    Secret references take their values from ``environ`` (default: this process's environment), read here,
    when the job starts: never in the plan or a dry run."""
    secrets = secret_values(plan, os.environ if environ is None else environ)
    previous = preflight(plan, engine, host_gpus=host_gpus, port_check=port_check)
    if previous:
        say(f"removing the finished earlier run of job {plan.job}")
        remove_job(engine, plan.job)
    elif plan.network:
        remove_job(engine, plan.job)  # a network left without containers
    job = create(plan, engine, say=say, secrets=secrets)
    start(job, engine)
    return job

