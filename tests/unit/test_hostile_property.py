"""Hostile input: a property test over random, partly hostile specs and flags, for every target and ``up``.

For each generated spec, every target either renders output that passes the real checks (the bundled
compose schema; the PyTorchJob/TrainJob CRD schemas with unknown keys as errors, the operators' webhook rules
and a strict core-v1 PodTemplate check from tests/support/render_support.py; plus the Kubernetes value rules a
manifest must meet), or fails with a SpecError / UnsupportedFeature (through the CLI: exit 2 and one line).
The Slurm script is executed by bash with STAND-IN ``srun`` and ``scontrol`` (tests/support/render_support.py's
recorders: there is no Slurm cluster here); the test checks that no injected command ran (a canary file is
never created), and that srun received exactly the user's command words and env values.

Seeded (derandomize=True) and bounded: a few hundred examples per target, no deadline.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import render_support as rs
from ddpctl import launch, rules
from ddpctl.errors import DdpctlError, SpecError, UnsupportedFeature
from ddpctl.local.plan import container_request, plan_local
from ddpctl.render import render_files, to_yaml
from ddpctl.spec import spec_from_dict

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("DDPCTL_HOSTILE_EXAMPLES", "200"))  # per target; CLI: half as many more
SETTINGS = settings(derandomize=True, max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])

CANARY = "pwned"
# Fragments that have broken a shell script, YAML or an argument list somewhere.
HOSTILE = [
    f"$(touch {CANARY})", f"`touch {CANARY}`", f"'; touch {CANARY}; '", f"\ntouch {CANARY}\n", f'"; touch {CANARY} #',
    "x\n=/x", "=/x", "-x", "--node-rank=5", "--privileged", "a:b", "a,b", "/a:/b", "../..", "/x/../y", "~", ".",
    "\x85", "a\u2028b", "\x00", "\x1b[2J", "\r", "\t", "$$", "${HOME}", "$(PET_NNODES)", "%x", "*", "?", "[a]",
    "{a,b}", "!", "&", "|", "<", ">", "\\", "'", '"', " ", "", "A" * 70, "é", "🙂", "NaN", "inf", "-1", "0", "00",
    "1e400", "9" * 40, "SHELLOPTS", "RANK", "PATH", "SLURM_JOB_ID", "PET_NNODES", "BASH_ENV", "IFS", "LD_PRELOAD",
    "UPPER", "a..b", "a.b", "-a", "a-", "/dev/shm", "/", "docker://-x", "nvcr.io#x/y:1",
]
ALPHABET = "abcXYZ019-_./:,;$`'\" \n\t\x85\u2028=~@#%*?()[]{}!&|<>\\é"

hostile_text = st.one_of(st.sampled_from(HOSTILE), st.text(alphabet=ALPHABET, max_size=12))
word = st.one_of(st.sampled_from(["python", "train.py", "-c", "--epochs", "3", "ddp-train", "a b", "print(1)"]),
                 hostile_text)
hostile_number = st.one_of(st.integers(-5, 70000), st.sampled_from([2**31, 2**63, 10**30, 10**400]),
                           st.floats(allow_nan=True, allow_infinity=True), hostile_text)
env_name = st.one_of(st.sampled_from(["A", "HF_HOME", "NCCL_DEBUG", "X_1", "LD_PRELOAD"]), hostile_text)
host_path = st.one_of(st.sampled_from(["/data", "/srv/a b", "./data", "data/x", "~/x", ".", "/a/$(id)"]),
                      hostile_text)
ctr_path = st.one_of(st.sampled_from(["/data", "/out", "/workspace", "/x y"]), hostile_text)
volume = st.one_of(
    st.builds(lambda s, t, ro: f"{s}:{t}" + (":ro" if ro else ""), host_path, ctr_path, st.booleans()),
    st.fixed_dictionaries({"source": host_path, "target": ctr_path}, optional={"read_only": st.booleans()}),
    hostile_text,
)
k8s_name = st.one_of(st.sampled_from(["ml", "team-a", "volcano", "high", "a.b", "trainer"]), hostile_text)
label_value = st.one_of(st.sampled_from(["H100", "gpu", "a_b.c"]), hostile_text)
toleration = st.fixed_dictionaries({}, optional={
    "key": st.one_of(st.sampled_from(["nvidia.com/gpu", "pool"]), hostile_text),
    "operator": st.one_of(st.sampled_from(["Exists", "Equal"]), hostile_text),
    "value": label_value,
    "effect": st.one_of(st.sampled_from(["NoSchedule", "NoExecute"]), hostile_text),
    "tolerationSeconds": hostile_number,
})


def maybe(valid, bad=hostile_text):
    """Mostly valid values (so that rendering is reached often), sometimes hostile ones."""
    return st.one_of(valid, valid, valid, bad)


spec_dicts = st.fixed_dictionaries({}, optional={
    "name": maybe(st.sampled_from(["job", "a-b", "x" * 40, "resnet-ddp"])),
    "image": maybe(st.sampled_from(["ddpctl/ddp-train:cpu", "pytorch/pytorch:2.13.0", "localhost:5000/a/b:c"])),
    "nodes": maybe(st.integers(1, 4), hostile_number),
    "gpus_per_node": maybe(st.integers(0, 2), hostile_number),
    "nproc_per_node": maybe(st.integers(1, 2), hostile_number),
    "port": maybe(st.sampled_from([29500, 29600]), hostile_number),
    "command": maybe(st.lists(word, min_size=1, max_size=4), st.one_of(hostile_text, st.lists(word, max_size=2))),
    "env": maybe(st.dictionaries(env_name, st.one_of(hostile_text, hostile_number), max_size=4),
                 st.lists(st.one_of(hostile_text, st.builds(lambda k, v: f"{k}={v}", env_name, hostile_text)),
                          max_size=3)),
    "volumes": st.lists(volume, max_size=3),
    "workdir": maybe(host_path),
    "shm_size": maybe(st.sampled_from(["1g", "512m", 2**20]), hostile_number),
    "ipc": st.sampled_from(["private", "host"]),
    "network": maybe(st.sampled_from(["bridge", "host"])),
    "hosts": maybe(st.lists(st.sampled_from(["h1", "h2", "10.0.0.1", "gpu-01"]), min_size=1, max_size=2,
                            unique=True)),
    "master_addr": maybe(st.sampled_from(["h1", "10.0.0.9", "job-node-0"])),
    "device_ids": maybe(st.lists(st.sampled_from(["0", "1", "00", "GPU-abc"]), max_size=3)),
    "cpus_per_node": maybe(st.sampled_from([0.5, 2, 2.5, 0.0004]), hostile_number),
    "memory_per_node": maybe(st.sampled_from(["4g", "1Gi", 2**30]), hostile_number),
    "max_restarts": maybe(st.integers(0, 3), hostile_number),
    "kubernetes": st.fixed_dictionaries({}, optional={
        "namespace": k8s_name, "service_account": k8s_name, "scheduler_name": k8s_name, "queue": k8s_name,
        "priority_class": k8s_name, "kueue_queue": k8s_name, "runtime": k8s_name,
        "node_selector": st.dictionaries(st.one_of(st.sampled_from(["pool", "nvidia.com/gpu.product"]),
                                                   hostile_text), label_value, max_size=2),
        "tolerations": st.lists(toleration, max_size=2),
        "ttl_seconds_after_finished": hostile_number, "active_deadline_seconds": hostile_number,
        "restart_policy": maybe(st.sampled_from(["OnFailure", "ExitCode"])),
    }),
    "slurm": st.fixed_dictionaries({}, optional={
        "container": st.sampled_from(["none", "pyxis", "apptainer"]),
        "container_image": maybe(st.sampled_from(["docker://a/b:1", "nvcr.io#nvidia/pytorch:25.08-py3",
                                                  "/img/a b.sif"])),
        "partition": maybe(st.sampled_from(["gpu", "a100"])), "time": maybe(st.sampled_from(["01:00:00"])),
        "output": maybe(st.sampled_from(["%x-%j.out", "logs/%j.out"])),
    }),
})


# Specs that are valid by construction, with hostile text where text is allowed (env values, command words
# after the first, paths with spaces and shell characters): most of these must render, and their output is
# where injection would show.
SHELLY = [f"$(touch {CANARY})", f"`touch {CANARY}`", f"'; touch {CANARY}; '", f'"; touch {CANARY} #', "${HOME}",
          "$(PET_NNODES)", "a b", "%x", "*", "!", "&&", "|", "\\", "'", '"', "", "é", "🙂", "--flag=$(id)"]
legal_text = st.one_of(st.sampled_from(SHELLY), st.text(alphabet="abcXYZ019-_./:,;$`'\" =~@#%*?()[]{}!&|<>\\é",
                                                        max_size=12))
legal_path = st.sampled_from(["/data", "/srv/a b", "/srv/$(touch pwned)", "/x/'q'", "/srv/é"])
valid_specs = st.fixed_dictionaries({}, optional={
    "name": st.sampled_from(["job", "a-b", "x" * 40]),
    "image": st.sampled_from(["ddpctl/ddp-train:cpu", "pytorch/pytorch:2.13.0", "localhost:5000/a/b:c"]),
    "nodes": st.integers(1, 3),
    "gpus_per_node": st.integers(0, 2),
    "command": st.builds(lambda first, rest: [first, *rest], st.sampled_from(["python", "ddp-train", "bash"]),
                         st.lists(legal_text.filter(lambda w: "\n" not in w), max_size=3)),
    "env": st.dictionaries(st.sampled_from(["A", "HF_HOME", "NCCL_DEBUG", "X_1", "LD_PRELOAD", "_A"]),
                           st.one_of(legal_text, st.sampled_from(["a\nb", "x\ty"]), st.integers(-5, 5)),
                           max_size=4),
    "volumes": st.lists(st.builds(lambda s, t: f"{s}:{t}", legal_path, st.sampled_from(["/in", "/out", "/x y"])),
                        max_size=2, unique_by=lambda v: v.split(":")[1]),
    "shm_size": st.sampled_from(["1g", "512m", 2**20]),
    "cpus_per_node": st.sampled_from([0.5, 2, 2.5, 0.001, 1.0005]),
    "memory_per_node": st.sampled_from(["4g", "1Gi", 2**30]),
    "max_restarts": st.integers(0, 2),
    "kubernetes": st.fixed_dictionaries({}, optional={
        "namespace": st.sampled_from(["ml", "0team", "a" * 63]),
        "service_account": st.sampled_from(["trainer", "a.b", "s" * 253]),
        "priority_class": st.sampled_from(["high", "a.b"]),
        "node_selector": st.dictionaries(st.sampled_from(["pool", "nvidia.com/gpu.product"]),
                                         st.sampled_from(["H100", "", "a_b.c", "x" * 63]), max_size=2),
        "tolerations": st.lists(st.sampled_from([{"operator": "Exists"}, {"key": "a", "value": "b"},
                                                 {"key": "a", "effect": "NoExecute", "tolerationSeconds": 9}]),
                                max_size=2),
        "ttl_seconds_after_finished": st.sampled_from([0, 2**31 - 1]),
    }),
    "slurm": st.fixed_dictionaries({}, optional={
        "container": st.sampled_from(["pyxis", "apptainer"]),
        "container_image": st.sampled_from(["docker://a/b:1", "nvcr.io#nvidia/pytorch:25.08-py3", "/img/a b.sif"]),
    }),
})
specs = st.one_of(valid_specs, spec_dicts)


def spec_or_none(data):
    try:
        return spec_from_dict(data)
    except SpecError as exc:
        assert "\n" not in exc.message and len(exc.message.splitlines()) == 1
        return None


def rendered(target, spec):
    try:
        return render_files(target, spec)
    except (SpecError, UnsupportedFeature) as exc:
        assert len(exc.message.splitlines()) == 1
        return None


# ------------------------------------------------------------------------------------------ the checks


def compose_errors(doc) -> list[str]:
    errors = rs.compose_errors(doc)  # the package validator: schema, strictly, plus 1.29.2 and engine rules
    for name, svc in doc["services"].items():
        for vol in svc.get("volumes", []):
            parts = vol.split(":")
            if len(parts) not in (2, 3) or not parts[0].startswith(("/", ".", "~")) or not parts[1].startswith("/"):
                errors.append(f"{name}: volume {vol!r} is re-split or names a volume")
        targets = [v.split(":")[1] for v in svc.get("volumes", [])]
        if len(set(targets)) != len(targets) or "/dev/shm" in targets:
            errors.append(f"{name}: two mounts on one target or on /dev/shm")
        for key in svc.get("environment", {}):
            errors += [f"{name}: env {key!r}"] if not rules.ENV_NAME_RE.fullmatch(key) else []
        if "cpus" in svc and not (math.isfinite(svc["cpus"]) and svc["cpus"] >= 0.001):
            errors.append(f"{name}: cpus {svc['cpus']}")
        if svc["command"][0] not in ("torchrun", launch.EXIT_CODE_LAUNCHER) or "--no-python" not in svc["command"]:
            errors.append(f"{name}: command {svc['command'][:2]}")
    return errors


def k8s_value_errors(doc) -> list[str]:
    """The Kubernetes value rules the API server applies and the CRD schemas do not encode."""
    errors: list[str] = []

    def check(fn, value, **kw):
        try:
            fn(value, **kw)
        except rules.RuleError as exc:
            errors.append(exc.problem)

    meta = doc["metadata"]
    check(rules.dns1035_label, meta["name"])
    if "namespace" in meta:
        check(rules.dns1123_label, meta["namespace"])
    for k, v in meta.get("labels", {}).items():
        check(rules.label_key, k)
        check(rules.label_value, v)
    rp = doc["spec"].get("runPolicy", {})
    if "ttlSecondsAfterFinished" in rp:
        check(rules.int32, rp["ttlSecondsAfterFinished"], lo=0)
    for q in ("queue", "priorityClass"):
        if q in rp.get("schedulingPolicy", {}):
            check(rules.dns1123_subdomain, rp["schedulingPolicy"][q])
    if doc["kind"] == "TrainJob":
        check(rules.dns1123_subdomain, doc["spec"]["runtimeRef"]["name"])
        trainer = doc["spec"]["trainer"]
        for e in trainer["env"]:
            check(rules.env_name, e["name"])
        for part in trainer.get("resourcesPerNode", {}).values():
            for v in part.values():
                check(rules.k8s_quantity, v)
                errors += ["zero quantity"] if str(v).strip("0m") == "" else []
    for _, template in rs.pod_templates(doc):
        pod = template["spec"]
        for k in ("serviceAccountName", "schedulerName", "priorityClassName"):
            if k in pod:
                check(rules.dns1123_subdomain, pod[k])
        for k, v in pod.get("nodeSelector", {}).items():
            check(rules.label_key, k)
            check(rules.label_value, v)
        for t in pod.get("tolerations", []):
            check(rules.toleration, t)
        for vol in pod.get("volumes", []):
            if "hostPath" in vol:
                path = vol["hostPath"]["path"]
                errors += [f"hostPath {path!r}"] if not path.startswith("/") or ".." in path.split("/") else []
        for c in pod["containers"]:
            mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
            errors += ["two mounts on one path"] if len(set(mounts)) != len(mounts) else []
            for e in c.get("env", []):
                check(rules.env_name, e["name"])
            for part in c.get("resources", {}).values():
                for v in part.values():
                    check(rules.k8s_quantity, v)
                    errors += ["zero quantity"] if str(v).strip("0m") == "" else []
    return errors


def k8s_errors(doc) -> list[str]:
    errors = rs.crd_errors(doc)
    webhook = rs.pytorchjob_webhook_errors if doc["kind"] == "PyTorchJob" else rs.trainjob_webhook_errors
    errors += webhook(doc)
    for _, template in rs.pod_templates(doc):
        errors += rs.pod_template_errors(template)
    return errors + k8s_value_errors(doc)


def slurm_check(script: str, spec) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "=").mkdir()  # `=/x` would run ./=/x if an env name could end a line
        (tmp / "=" / "x").write_text(f"#!/bin/sh\ntouch {tmp}/{CANARY}\n")
        (tmp / "=" / "x").chmod(0o755)
        got = rs.run_sbatch(script, tmp, nodes=spec.nodes)  # STAND-IN srun/scontrol: records, runs nothing
        assert not (tmp / CANARY).exists(), "an injected command ran"
        # the user's words arrive literally right after torchrun's --no-python (a restarting ddp-train job gets
        # --output-dir/--resume appended after them)
        start = got["argv"].index("--no-python") + 1
        assert got["argv"][start:start + len(spec.command)] == list(spec.command)
        for k, v in spec.env:
            assert got["env"][k] == v, k


# ---------------------------------------------------------------------------------------- the properties


@pytest.mark.parametrize("target", ["compose", "pytorchjob", "trainjob", "slurm"])
def test_every_spec_renders_valid_output_or_fails_cleanly(target):
    stats = {"rendered": 0, "refused": 0}

    @SETTINGS
    @given(data=specs)
    def prop(data):
        spec = spec_or_none(data)
        files = rendered(target, spec) if spec is not None else None
        if files is None:
            stats["refused"] += 1
            return
        stats["rendered"] += 1
        for name, text in files.items():
            if target == "slurm":
                slurm_check(text, spec)
                continue
            doc = yaml.safe_load(text)
            assert yaml.safe_load(to_yaml(doc)) == doc  # what is written is what is read back (U+0085...)
            errors = compose_errors(doc) if target == "compose" else k8s_errors(doc)
            assert errors == [], (name, errors)

    prop()
    # the generator must reach the renderer often, or the property says little. A share of the examples
    # hypothesis actually ran (it may run fewer than max_examples, and which ones depends on its internal
    # state), not of max_examples: 47 of 200 was seen once with about half refused as usual.
    total = stats["rendered"] + stats["refused"]
    assert total >= EXAMPLES // 4 and stats["rendered"] >= max(10, total // 5), stats


def test_every_spec_plans_for_up_or_fails_cleanly():
    @SETTINGS
    @given(data=specs)
    def prop(data):
        spec = spec_or_none(data)
        if spec is None:
            return
        try:
            plan = plan_local(spec, cwd=Path("/home/u/proj"))
        except DdpctlError as exc:
            assert exc.exit_code == 2 and len(exc.message.splitlines()) == 1
            return
        for c in plan.containers:
            req = container_request(c)
            assert all(rules.ENV_NAME_RE.fullmatch(k) for k in req["environment"])
            for m in req.get("mounts", []):
                if m["type"] == "volume":  # the only named volume: a restartable job's checkpoints
                    assert m["source"] == plan.checkpoint_volume == f"{spec.name}-ckpt" and spec.max_restarts
                    assert m["target"] == "/checkpoints"
                    continue
                assert m["type"] == "bind" and m["source"].startswith("/") and ".." not in m["source"].split("/")
            if "nano_cpus" in req:
                assert req["nano_cpus"] >= 10**6

    prop()


flag_value = st.one_of(st.sampled_from(["2", "0", "-1", "ml", "x" * 70, "/a:/b", "gpu"]), hostile_text)
FLAGS = ["--name", "--image", "--nodes", "--gpus-per-node", "--port", "-e", "-v", "--shm-size", "--workdir",
         "--device-ids", "--hosts", "--network"]


@pytest.mark.parametrize("target", ["compose", "pytorchjob", "trainjob", "slurm"])
def test_cli_flags_exit_0_or_2_with_one_line(target, tmp_path):
    from ddpctl.cli.main import main

    @settings(derandomize=True, max_examples=max(EXAMPLES // 2, 20), deadline=None, database=None)
    @given(flags=st.lists(st.tuples(st.sampled_from(FLAGS), flag_value), max_size=4),
           command=st.lists(word, max_size=3))
    def prop(flags, command):
        argv = ["render", target]
        for flag, value in flags:
            argv.append(f"{flag}={value}")
        if command:
            argv += ["--", *command]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            with pytest.raises(SystemExit) as exc:
                main(argv)
        code = exc.value.code
        assert code in (0, 2), (argv, code, err.getvalue())
        if code == 2:
            lines = err.getvalue().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err.getvalue())
            assert out.getvalue() == ""

    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        prop()
    finally:
        os.chdir(old)
