"""``ddpctl up --nodes 2 --tensorboard`` on the real Docker Engine: ddp-train writes its TensorBoard event files to
``/checkpoints/tensorboard`` on the job's volume, ``status`` says where they are and the ``docker cp`` it prints
brings them to the host, ``down`` keeps a copy with the job's output, and tensorboard's own reader (on the host)
reads both back with the loss values of the job's progress records. The same job from a rendered compose file
(docker-compose 1.29.2) writes them to the volume that file declares.

The job runs on the CPU image as it is: every image ddpctl builds carries the tensorboard package
(``IMAGE_EXTRAS`` in ddpctl.images.build; the CPU image's wheelhouse has its wheels)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

from itest_helpers import ddpctl

TRAIN = ["ddp-train", "--workload", "toy", "--train-size", "512", "--test-size", "128", "--batch-size", "32",
         "--epochs", "2", "--log-interval", "2"]  # 8 steps an epoch, a record every 2, an evaluation each epoch


def _scalars(logdir) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_up_tensorboard_event_files_on_the_job_volume_read_back_on_the_host(engine, cpu_image, tmp_path, job_name):
    try:
        up = ddpctl("up", "--name", job_name, "-n", "2", "--image", cpu_image, "--tensorboard", "--", *TRAIN,
                    timeout=900)
        assert up.returncode == 0, up.stderr[-3000:]
        assert f"TensorBoard event files in /checkpoints/tensorboard ('ddpctl status {job_name}' says" in up.stderr
        st = json.loads(ddpctl("status", job_name, "--json", check=True).stdout)
        assert st["result"] == "succeeded" and st["progress"]["step"] == 16
        tb = st["tensorboard"]
        assert tb["dir"] == "/checkpoints/tensorboard" and tb["volume"] == f"{job_name}-ckpt", tb
        assert tb["container"] == f"{job_name}-node-0" and tb["host_path"] is None
        # the command status prints, run as printed
        line = next(x for x in ddpctl("status", job_name, check=True).stdout.splitlines()
                    if x.startswith("tensorboard: "))
        copy = line.split("copy them out with: ", 1)[1].split(", then: ", 1)[0]
        assert copy == f"docker cp {job_name}-node-0:/checkpoints/tensorboard ./{job_name}-tensorboard", line
        assert subprocess.run(shlex.split(copy), cwd=tmp_path, capture_output=True, timeout=120).returncode == 0
        live = _scalars(tmp_path / f"{job_name}-tensorboard")
        records = [json.loads(x.split(" | ", 1)[1]) for x in ddpctl("logs", job_name, "--records", check=True)
                   .stdout.splitlines() if '"event":"progress"' in x]
        rank0 = [(r["step"], r["loss"]) for r in records if r["rank"] == 0]
        assert [s for s, _ in rank0] == [2, 4, 6, 8, 10, 12, 14, 16], rank0
        assert [(s, round(v, 4)) for s, v in live["train/loss"]] == rank0
        assert [s for s, _ in live["eval/test_acc"]] == [8, 16]
        assert {"train/lr", "train/samples_per_sec"} <= set(live)
        # down removes the volume; the job's kept output has the files, and status says so
        down = ddpctl("down", job_name, check=True)
        assert not engine.volumes.list(filters={"name": f"{job_name}-ckpt"})
        assert f"/{job_name} (TensorBoard event files: " in down.stderr and "/tensorboard)" in down.stderr
        after = json.loads(ddpctl("status", job_name, "--json", check=True).stdout)["tensorboard"]
        assert after["kept"] and after["kept"].endswith(f"/{job_name}/tensorboard"), after
        assert _scalars(after["kept"]) == live
        assert f"tensorboard --logdir {after['kept']}" in ddpctl("status", job_name, check=True).stdout
        # the same job from a rendered compose file (docker-compose 1.29.2): the volume the file declares
        out = tmp_path / "compose.yaml"
        ddpctl("render", "compose", "--name", job_name, "-n", "2", "--image", cpu_image, "--tensorboard", "-o", str(out),
               "--", *TRAIN, check=True)
        compose = [shutil.which("docker-compose") or "docker-compose", "-f", str(out), "-p", job_name, "--no-ansi"]
        run = subprocess.run([*compose, "up", "--abort-on-container-exit", "--no-color"], capture_output=True,
                             text=True, timeout=400)
        assert run.returncode == 0, run.stderr[-2000:]
        assert engine.volumes.get(f"{job_name}-ckpt").attrs["Labels"]["ddpctl.job"] == job_name
        assert subprocess.run(["docker", "cp", f"{job_name}-node-0:/checkpoints/tensorboard", "compose-tb"],
                              cwd=tmp_path, capture_output=True, timeout=120).returncode == 0
        assert [s for s, _ in _scalars(tmp_path / "compose-tb")["train/loss"]] == [s for s, _ in rank0]
    finally:
        if (tmp_path / "compose.yaml").exists():
            subprocess.run([shutil.which("docker-compose") or "docker-compose", "-f", str(tmp_path / "compose.yaml"),
                            "-p", job_name, "down", "-v"], capture_output=True, timeout=120)
        ddpctl("down", job_name)
