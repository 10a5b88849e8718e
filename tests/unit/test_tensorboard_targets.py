"""``tensorboard`` (``--tensorboard``) on every target: ddp-train gets ``--tensorboard <checkpoint dir>/tensorboard``
on the job's checkpoint volume, every node gets the directory as DDPCTL_TENSORBOARD, and a target with no volume
all nodes see refuses in one line with the fix. The rendered files are checked by the real schemas and validators
(compose spec + docker-compose rules, the CRDs, the webhooks, core pod validation) and the sbatch script by bash;
the render cases here are also golden files (tests/support/render_cases.py), validated again by test_render_validate."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import render_support as rs
from ddpctl.errors import UnsupportedFeature
from ddpctl.local.plan import plan_local
from ddpctl.render import compose, pytorchjob, render_files, slurm, trainjob
from ddpctl.spec import spec_from_dict

TB = ["--tensorboard", "/checkpoints/tensorboard"]
SHARED = ["/mnt/shared/ckpt:/checkpoints"]


def _spec(**kw):
    return spec_from_dict({"name": "tb", "nodes": 2, "tensorboard": True, **kw})


def test_up_and_compose_put_the_files_on_the_volume_up_creates():
    plan = plan_local(_spec(), cwd=Path("/tmp"))
    doc = compose.render(_spec())
    assert rs.compose_errors(doc) == []  # the compose-spec schema, strictly, plus docker-compose 1.29.2's rules
    assert doc["volumes"] == {"tb-ckpt": {"name": "tb-ckpt", "labels": {
        "ddpctl.job": "tb", "ddpctl.version": doc["volumes"]["tb-ckpt"]["labels"]["ddpctl.version"],
        "app.kubernetes.io/managed-by": "ddpctl"}}}
    assert plan.checkpoint_volume == "tb-ckpt"  # the same name: a compose run and an up run of tb share it
    for c, (_, svc) in zip(plan.containers, sorted(doc["services"].items()), strict=True):
        assert svc["command"][-2:] == TB and c.argv[-2:] == tuple(TB)
        assert svc["volumes"] == ["tb-ckpt:/checkpoints"]
        assert svc["environment"]["DDPCTL_TENSORBOARD"] == "/checkpoints/tensorboard" == dict(c.env)["DDPCTL_TENSORBOARD"]
        assert svc["environment"]["DDPCTL_CHECKPOINTS"] == "/checkpoints"
    text = compose.render_text(_spec())["compose.yaml"]
    assert ("# TensorBoard: ddp-train writes event files in /checkpoints/tensorboard on volume tb-ckpt; copy them "
            "out with: docker cp tb-node-0:/checkpoints/tensorboard ./tb-tensorboard, then: tensorboard --logdir "
            "./tb-tensorboard\n") in text


def test_compose_uses_the_spec_mount_and_declares_no_volume():
    doc = compose.render(_spec(volumes=["./runs:/checkpoints"]))
    assert "volumes" not in doc and rs.compose_errors(doc) == []
    header = compose.header(_spec(volumes=["./runs:/checkpoints"]), "compose.yaml")
    assert "/checkpoints/tensorboard, which is ./runs/tensorboard on this host: tensorboard --logdir ./runs/tensorboard" in header
    assert all(s["volumes"] == ["./runs:/checkpoints"] and s["command"][-2:] == TB for s in doc["services"].values())


def test_compose_on_several_hosts_needs_a_shared_mount():
    hosts = {"network": "host", "hosts": ["10.0.0.1", "10.0.0.2"]}
    with pytest.raises(UnsupportedFeature) as exc:
        compose.render_files(_spec(**hosts))
    assert "\n" not in str(exc.value) and "-v /shared/ckpt:/checkpoints" in str(exc.value)
    files = compose.render_files(_spec(**hosts, volumes=["/shared/ckpt:/checkpoints"]))
    for doc in files.values():
        assert rs.compose_errors(doc) == [] and "volumes" not in doc
        (svc,) = doc["services"].values()
        assert svc["command"][-2:] == TB and svc["volumes"] == ["/shared/ckpt:/checkpoints"]


def test_compose_refuses_a_user_who_could_not_write_the_new_volume():
    with pytest.raises(UnsupportedFeature, match="belongs to root.*-v ./runs:/checkpoints"):
        compose.render(_spec(user="1000:1000"))
    assert compose.render(_spec(user="1000:1000", volumes=["./runs:/checkpoints"]))["services"]
    assert compose.render(_spec(user="root"))["volumes"]


@pytest.mark.parametrize("mod", [pytorchjob, trainjob])
def test_kubernetes_needs_a_volume_at_checkpoints(mod):
    with pytest.raises(UnsupportedFeature) as exc:
        mod.render(_spec())
    msg = str(exc.value)
    assert "\n" not in msg and "a pod's own file system goes with the pod" in msg
    assert msg.endswith("mount storage every pod sees there: -v /mnt/shared/ckpt:/checkpoints")
    job = mod.render(_spec(volumes=SHARED))
    assert rs.crd_errors(job) == []
    webhook = rs.pytorchjob_webhook_errors if mod is pytorchjob else rs.trainjob_webhook_errors
    assert webhook(job) == []
    for where, template in rs.pod_templates(job):
        assert rs.pod_template_errors(template) == [], where
    text = yaml.safe_dump(job)
    assert "- --tensorboard\n" in text and "/checkpoints/tensorboard" in text and "DDPCTL_TENSORBOARD" in text


def test_pytorchjob_with_restarts_resumes_and_writes_tensorboard():
    job = pytorchjob.render(_spec(volumes=SHARED, max_restarts=2))
    cmd = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert cmd[cmd.index("ddp-train"):] == ["ddp-train", "--output-dir", "/checkpoints", "--resume", "auto", *TB]


def test_slurm_writes_to_the_checkpoint_directory_of_the_script(tmp_path):
    script = slurm.render(_spec())
    assert 'export DDPCTL_TENSORBOARD="$DDPCTL_CHECKPOINTS/tensorboard"' in script
    got = rs.run_sbatch(script, tmp_path, nodes=2)  # real bash; srun records what it got
    ckpt = f"{tmp_path}/tb-ckpt"
    assert got["env"]["DDPCTL_CHECKPOINTS"] == ckpt and got["env"]["DDPCTL_TENSORBOARD"] == f"{ckpt}/tensorboard"
    assert got["argv"][-3:] == ["ddp-train", "--tensorboard", f"{ckpt}/tensorboard"]
    assert Path(ckpt).is_dir()  # made by the script (ddp-train makes tensorboard/ in it)
    assert "DDPCTL_RESTART_COUNT" not in script  # no resume asked for
    # an exported DDPCTL_CHECKPOINTS wins, as for checkpoints
    got = rs.run_sbatch(script, tmp_path, nodes=2, extra_env={"DDPCTL_CHECKPOINTS": str(tmp_path / "mine")})
    assert got["argv"][-1] == f"{tmp_path}/mine/tensorboard"


def test_slurm_in_a_container_needs_a_volume_at_checkpoints(tmp_path):
    with pytest.raises(UnsupportedFeature, match="tensorboard in a container without a volume at /checkpoints"):
        slurm.render(_spec(slurm={"container": "pyxis"}))
    script = slurm.render(_spec(volumes=["/lustre/ckpt:/checkpoints"], slurm={"container": "pyxis"}))
    got = rs.run_sbatch(script, tmp_path, nodes=2)
    assert got["argv"][-3:] == ["ddp-train", *TB] and got["env"]["DDPCTL_TENSORBOARD"] == "/checkpoints/tensorboard"
    assert "--container-mounts=/lustre/ckpt:/checkpoints" in got["argv"]


@pytest.mark.parametrize("target", ["compose", "pytorchjob", "trainjob", "slurm"])
def test_other_programs_get_the_directory_in_the_env_and_own_flags_win(target):
    kw = {"volumes": SHARED} if target in ("pytorchjob", "trainjob") else {}
    text = "\n".join(render_files(target, _spec(command=["python", "train.py"], **kw)).values())
    assert "--tensorboard" not in text and "DDPCTL_TENSORBOARD" in text
    text = "\n".join(render_files(target, _spec(command=["ddp-train", "--tensorboard=/x"], **kw)).values())
    assert "--tensorboard=/x" in text and text.count("--tensorboard") == text.count("--tensorboard=/x")


def test_nothing_changes_without_tensorboard():
    for target in ("compose", "pytorchjob", "trainjob", "slurm"):
        text = "\n".join(render_files(target, spec_from_dict({"name": "tb", "nodes": 2, "volumes": SHARED}
                                                             if target != "slurm" else {"name": "tb"})).values())
        assert "tensorboard" not in text.lower()


def test_env_cannot_set_the_directory_tensorboard_sets():
    from ddpctl.errors import SpecError

    with pytest.raises(SpecError, match="sets DDPCTL_TENSORBOARD, which tensorboard sets"):
        _spec(env={"DDPCTL_TENSORBOARD": "/x"})
    assert spec_from_dict({"name": "tb", "env": {"DDPCTL_TENSORBOARD": "/x"}}).env  # without tensorboard: yours
