"""`ddpctl bench --runtime docker`: the same matrix, each program in a container started through the local
cluster code of `ddpctl up` (CPU image, gloo), and nothing left behind."""

from __future__ import annotations

import json
import re

import jsonschema

from ddpctl.bench.report import schema
from itest_helpers import ddpctl


def test_bench_in_containers(engine, cpu_image, tmp_path):
    out = tmp_path / "out"
    proc = ddpctl("bench", "--runtime", "docker", "--image", cpu_image, "--workloads", "toy", "--strategies",
                  "single,ddp", "--gpus", "1,2", "--warmup", "1", "--steps", "3", "--batch-size", "16",
                  "--probe-max", "256k", "--no-plots", "-o", str(out), timeout=600)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads((out / "report.json").read_text())
    jsonschema.validate(rep, schema(), cls=jsonschema.Draft202012Validator)
    assert rep["runtime"] == "docker"
    cells = {c["key"]: c for c in rep["cells"]}
    assert set(cells) == {"toy/device/single/1", "toy/device/ddp/2"}
    assert all(c["ok"] for c in cells.values())
    assert cells["toy/device/ddp/2"]["summary"]["world_size"] == 2
    assert cells["toy/device/ddp/2"]["sync_check"] == "pass"
    assert rep["interconnect"][0]["ok"] and rep["interconnect"][0]["backend"] == "gloo"
    # The torch side of the hardware section comes from inside the image.
    assert rep["hardware"]["torch"] and rep["hardware"]["gpu_count"] == 0
    logs = sorted(p.name for p in (out / "logs").iterdir())
    assert logs[0] == "01-probe-x2.log"
    assert "$ docker (" in (out / "logs" / logs[0]).read_text()
    # Every run's job was removed: no container of this bench's jobs remains (other bench runs on a shared
    # engine have other process ids in their job names).
    jobs = set(re.findall(r"job (bench-\d+)-\d+\)", "".join(p.read_text() for p in (out / "logs").iterdir())))
    assert len(jobs) == 1, jobs
    (prefix,) = jobs
    assert not [c.name for c in engine.containers.list(all=True) if c.name.startswith(prefix + "-")]
    assert not [n.name for n in engine.networks.list() if n.name.startswith(prefix + "-")]


def test_bench_docker_missing_image(engine, tmp_path):
    out = tmp_path / "out"
    proc = ddpctl("bench", "--runtime", "docker", "--image", "ddpctl/no-such-image:0", "--workloads", "toy",
                  "-o", str(out))
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()[-1]
    assert err.startswith("error: ") and "ddpctl/no-such-image:0 is not present" in err
    assert not out.exists()
