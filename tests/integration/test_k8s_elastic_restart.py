"""An elastic PyTorchJob with restartPolicy ExitCode survives a killed pod (operator EMULATION, real containers).

No Kubernetes API server runs here: tests/support/k8s_contract.py gives the pods the Training Operator v1.9.4 would
create (Worker replicas, elasticPolicy -> PET_NNODES=MIN:MAX, PET_RDZV_ENDPOINT=<job>-worker-0, ...) and what it
does when a pod's container exits (``after_exit``: ExitCode recreates the pod for a code >= 128). This test
starts each pod as a container (hostname, Service alias, env, argv, the hostPath volume as a bind mount), kills
one pod's process mid-run (SIGKILL: exit 137, as an OOM kill or a lost node), plays the operator (removes the
pod and creates it again, same name and env), and checks that the job completes from its checkpoint: the
surviving pod's torchrun restarts its workers (elastic, maxRestarts), the new pod rejoins the c10d rendezvous
and ddp-train resumes (--resume auto on the shared /checkpoints)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml

from itest_helpers import CPU_IMAGE, ddpctl

TRAIN = ["--", "ddp-train", "--workload", "toy", "--train-size", "512", "--test-size", "64", "--batch-size", "32",
         "--epochs", "2", "--no-eval", "--sync-check", "off", "--log-interval", "1", "--checkpoint-interval", "2",
         "--debug-step-sleep", "0.4"]  # 2 ranks: 16 steps, a checkpoint every 2


def _records(ckpt: Path, kind: str):
    path = ckpt / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line being written
        if rec.get("event") == kind:
            out.append(rec)
    return out


def _create(engine, net, pod, labels):
    api = engine.api
    binds = {m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in pod.mounts}
    host_config = api.create_host_config(network_mode=net.name, shm_size=pod.shm_size or None, binds=binds)
    endpoint = api.create_endpoint_config(aliases=list(pod.aliases))
    made = api.create_container(
        pod.image, list(pod.argv), name=pod.name, hostname=pod.hostname, environment=pod.env,
        volumes=[m.target for m in pod.mounts], labels={**labels, "ddpctl.node-rank": str(pod.index)},
        host_config=host_config, networking_config=api.create_networking_config({net.name: endpoint}))
    c = engine.containers.get(made["Id"])
    c.start()
    return c


def test_killed_pod_is_recreated_and_the_job_completes_from_its_checkpoint(engine, cpu_image, job_name, tmp_path):
    from k8s_contract import after_exit, pods_for

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    ckpt.chmod(0o777)
    text = ddpctl("render", "pytorchjob", "--name", job_name, "--nodes", "1:2", "--max-restarts", "3",
                  "--image", CPU_IMAGE, "-v", f"{ckpt}:/checkpoints", *TRAIN, check=True).stdout
    job = yaml.safe_load(text)
    assert job["spec"]["elasticPolicy"]["minReplicas"] == 1
    pods = pods_for(job)
    assert [p.name for p in pods] == [f"{job_name}-worker-0", f"{job_name}-worker-1"]
    labels = {"ddpctl.job": job_name, "app.kubernetes.io/managed-by": "ddpctl", "ddpctl.purpose": "k8s-contract"}
    net = engine.networks.create(f"{job_name}-net", driver="bridge", labels=labels)
    running = {}
    logs = {p.name: "" for p in pods}
    try:
        for pod in pods:
            running[pod.name] = _create(engine, net, pod, labels)
        deadline = time.monotonic() + 300
        while not any(r["step"] >= 4 for r in _records(ckpt, "checkpoint")):
            assert time.monotonic() < deadline, ("no checkpoint at step >= 4 in metrics.jsonl within 300 s",
                                                 {n: c.logs().decode()[-1500:] for n, c in running.items()})
            time.sleep(0.5)
        victim = pods[1]
        running[victim.name].kill()  # SIGKILL: the pod's process dies (OOM kill, lost node)
        killed_at = time.time()
        recreated = 0
        done: dict[str, int] = {}
        deadline = time.monotonic() + 420
        while len(done) < len(pods):
            assert time.monotonic() < deadline, (f"pods {sorted(set(running) - set(done))} did not succeed within "
                                                 "420 s of the kill",
                                                 {n: c.logs().decode()[-2000:] for n, c in running.items()})
            for pod in pods:
                if pod.name in done:
                    continue
                c = running[pod.name]
                c.reload()
                if c.status != "exited":
                    continue
                code = c.wait()["StatusCode"]
                logs[pod.name] += c.logs().decode("utf-8", "replace")
                action = after_exit(job, pod, code)
                if action == "recreate":  # the operator: delete the pod, create it again
                    assert recreated < 3, (f"{pod.name} recreated 3 times, exit {code} again", logs,
                                           {n: r.logs().decode("utf-8", "replace")[-3000:] for n, r in running.items()
                                            if n not in done})
                    recreated += 1
                    c.remove(force=True)
                    running[pod.name] = _create(engine, net, pod, labels)
                else:
                    assert action == "succeeded", (pod.name, code, logs[pod.name][-3000:])
                    done[pod.name] = code
            time.sleep(0.5)
        assert recreated >= 1
        summaries = [json.loads(m) for log in logs.values()
                     for m in re.findall(r'^rank-\d+ \| (\{"event": "summary".*)$', log, re.M)]
        assert summaries, logs
        final = summaries[-1]
        assert final["steps"] == 16 and final["world_size"] == 2, final
        assert final["resumed_from"] and final["resumed_from"].startswith("/checkpoints/ckpt-"), final
        after = [r for r in _records(ckpt, "step") if r["time"] > killed_at]
        assert after, "no training step after the kill"
        resumed_step = int(Path(final["resumed_from"]).name[5:13])
        assert resumed_step >= 4
        # the first step of the run that resumed (the survivor may still log a step it had begun before the kill)
        restarted = [r for r in _records(ckpt, "start") if r["time"] > killed_at]
        first = next((r for r in after if restarted and r["time"] > restarted[-1]["time"]), after[0])
        print(f"k8s emulation: kill -> first training step of the resumed run {first['time'] - killed_at:.1f} s "
              f"(resumed at step {resumed_step}, {recreated} pod(s) recreated)")
    finally:
        for c in running.values():
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001
                pass
        net.remove()


pytestmark = pytest.mark.slow
