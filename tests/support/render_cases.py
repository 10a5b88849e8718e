"""Named specs that exercise every renderer option; shared by the golden and validation tests."""

from __future__ import annotations

TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]

COMPOSE = {
    "cpu-default": {},
    "cpu-2x2": {"name": "cpu-job", "nodes": 2, "nproc_per_node": 2},
    "gpu-1x4-count": {"name": "one", "gpus_per_node": 4},
    "gpu-2x2-split": {"name": "split", "nodes": 2, "gpus_per_node": 2},
    "gpu-device-ids": {"name": "ids", "nodes": 2, "gpus_per_node": 1, "device_ids": ["2", "5"]},
    "shm-memlock": {"name": "shm", "nodes": 2, "shm_size": "8g", "memlock": True},
    "ipc-private": {"name": "priv", "ipc": "private"},
    "volumes-workdir": {"name": "vol", "volumes": ["./data:/data:ro", "/out:/out"], "workdir": ".",
                        "command": ["python", "train.py", "--epochs", "3"]},
    "env-dollar": {"name": "envs", "env": {"A": "$(date) ${HOME} 'q\"", "B": 2},
                   "nccl": {"socket_ifname": "eth0", "debug": "INFO", "ib_disable": True}},
    "restarts-resources": {"name": "res", "nodes": 2, "max_restarts": 3, "cpus_per_node": 2.5,
                           "memory_per_node": "8g", "backend": "gloo", "port": 29511},
    "host-network-1": {"name": "hn", "network": "host"},
    "multi-host": {"name": "mh", "nodes": 3, "gpus_per_node": 2, "network": "host",
                   "hosts": ["10.0.0.1", "10.0.0.2", "10.0.0.3"], "device_ids": ["4", "5"]},
    "master-addr": {"name": "ma", "nodes": 2, "network": "host", "hosts": ["h1", "h2"],
                    "master_addr": "10.1.1.1"},
    "secret-env": {"name": "sec", "nodes": 2, "env": {"A": "1"}, "secret_env": {"HF_TOKEN": "hf-token:token"}},
    "user": {"name": "usr", "nodes": 2, "user": "1000:1000", "workdir": "."},
    "workspace": {},  # WORKSPACE below
    # tensorboard: ddp-train's event files on the job's checkpoint volume (declared with up's name), or on a mount
    "tensorboard": {"name": "tb", "nodes": 2, "tensorboard": True},
    "tensorboard-multi-host": {"name": "tbm", "nodes": 2, "network": "host", "hosts": ["10.0.0.1", "10.0.0.2"],
                               "volumes": ["/shared/ckpt:/checkpoints"], "tensorboard": True,
                               "command": ["python", "train.py"]},
}

PYTORCHJOB = {
    "cpu-default": {},
    "gpu-2x8": {"name": "big", "nodes": 2, "gpus_per_node": 8, "kubernetes": {"namespace": "ml"}},
    "four-nodes-cpu": {"name": "four", "nodes": 4, "nproc_per_node": 2, "cpus_per_node": 2,
                       "memory_per_node": "4Gi"},
    "host-network": {"name": "hn", "nodes": 2, "gpus_per_node": 1, "network": "host", "port": 23456},
    "gang": {"name": "gang", "nodes": 3, "gpus_per_node": 2,
             "kubernetes": {"gang": True, "scheduler_name": "volcano", "queue": "research",
                            "priority_class": "high"}},
    "kueue-istio": {"name": "kq", "nodes": 2, "kubernetes": {"kueue_queue": "team-a", "istio_sidecar": True}},
    "tensorboard-restarts": {"name": "tb", "nodes": 2, "max_restarts": 2, "tensorboard": True,
                             "volumes": ["/mnt/shared/ckpt:/checkpoints"]},
    "policies": {"name": "pol", "nodes": 2, "kubernetes": {
        "restart_policy": "ExitCode", "clean_pod_policy": "All", "ttl_seconds_after_finished": 60,
        "backoff_limit": 5, "active_deadline_seconds": 7200}},
    "placement": {"name": "place", "gpus_per_node": 2, "kubernetes": {
        "node_selector": {"nvidia.com/gpu.product": "H100"}, "tolerations": TOL, "service_account": "trainer"}},
    "volumes-memlock-shm": {"name": "vm", "nodes": 2, "gpus_per_node": 2, "shm_size": "4g", "memlock": True,
                            "volumes": ["/data:/data:ro", "/ckpt:/ckpt"], "max_restarts": 2,
                            "env": {"K": "$(NOT_EXPANDED)"}, "command": "python train.py --lr 0.1"},
    "secret-env": {"name": "sec", "nodes": 2, "env": {"A": "1"},
                   "secret_env": {"HF_TOKEN": "hf-token:token", "WANDB_API_KEY": "wandb"}},
    # elastic: elasticPolicy (Worker only, rendezvous at worker-0) + ExitCode + resume from /checkpoints
    "elastic": {"name": "el", "nodes": "1:3", "max_restarts": 3, "volumes": ["/mnt/ckpt:/checkpoints"],
                "kubernetes": {"gang": True}},
    "restarts-fixed": {"name": "rf", "nodes": 2, "max_restarts": 2},
}

TRAINJOB = {
    "cpu-default": {},
    "gpu-2x8": {"name": "big", "nodes": 2, "gpus_per_node": 8, "kubernetes": {"namespace": "ml"}},
    "cpu-resources": {"name": "cpu", "nodes": 3, "nproc_per_node": 4, "cpus_per_node": 4,
                      "memory_per_node": "8Gi"},
    "kueue-deadline": {"name": "kq", "nodes": 2, "kubernetes": {"kueue_queue": "team-a",
                                                                 "active_deadline_seconds": 600}},
    "placement-istio": {"name": "place", "gpus_per_node": 2, "kubernetes": {
        "node_selector": {"pool": "gpu"}, "tolerations": TOL, "service_account": "trainer",
        "istio_sidecar": True, "runtime": "torch-custom"}},
    "volumes-memlock-shm": {"name": "vm", "nodes": 2, "gpus_per_node": 2, "shm_size": "4g", "memlock": True,
                            "volumes": ["/data:/data:ro"], "env": {"K": "$(NOT_EXPANDED)"}},
    "secret-env": {"name": "sec", "nodes": 2, "env": {"A": "1"},
                   "secret_env": {"HF_TOKEN": "hf-token:token", "WANDB_API_KEY": "wandb"}},
    "tensorboard": {"name": "tb", "nodes": 2, "tensorboard": True, "volumes": ["/mnt/shared/ckpt:/checkpoints"]},
}

SLURM = {
    "cpu-default": {},
    "gpu-2x8": {"name": "big", "nodes": 2, "gpus_per_node": 8},
    "options": {"name": "opts", "nodes": 4, "gpus_per_node": 4, "cpus_per_node": 16, "memory_per_node": "64g",
                "slurm": {"partition": "gpu", "account": "proj-1", "qos": "high", "time": "1-00:00:00",
                          "output": "logs/%x-%j.out"}},
    "slurm-cpus-mem": {"name": "cm", "nodes": 2, "slurm": {"cpus_per_task": 8, "mem": "32G"}},
    "pyxis": {"name": "px", "nodes": 2, "gpus_per_node": 8, "volumes": ["/data:/data:ro"], "workdir": "/home/u/proj",
              "slurm": {"container": "pyxis", "container_image": "nvcr.io#nvidia/pytorch:25.08-py3"}},
    "apptainer": {"name": "ap", "nodes": 2, "gpus_per_node": 1, "volumes": ["/scratch:/scratch"],
                  "workdir": "/home/u/proj", "slurm": {"container": "apptainer"}},
    "workdir-hosts": {"name": "wd", "nodes": 2, "workdir": "/home/u/proj", "network": "host",
                      "hosts": ["gpu-01", "gpu-02"]},
    "master-addr-restarts": {"name": "mar", "nodes": 2, "master_addr": "head-node", "max_restarts": 2,
                             "port": 29600},
    "quoting": {"name": "q", "env": {"EVIL": "$(touch pwned) `id` 'x\" ; rm -rf /\nline2", "OK": "a b"},
                "command": ["python", "-c", "print('$HOME; `id`')"]},
    "secret-env": {"name": "sec", "nodes": 2, "env": {"A": "1"}, "secret_env": ["HF_TOKEN", "DB_PASSWORD"]},
    # requeue: requeue + USR1 checkpoint before the time limit, resume from $DDPCTL_CHECKPOINTS
    "requeue-signal": {"name": "rq", "nodes": 2, "slurm": {"time": "04:00:00", "requeue": True,
                                                          "signal_seconds": 300}},
    "elastic": {"name": "el", "nodes": "2:4", "max_restarts": 1},
    "requeue-pyxis": {"name": "rqp", "nodes": 2, "volumes": ["/lustre/ckpt:/checkpoints"],
                      "slurm": {"container": "pyxis", "requeue": True}},
    "tensorboard": {"name": "tb", "nodes": 2, "tensorboard": True},
    "tensorboard-requeue-apptainer": {"name": "tba", "nodes": 2, "volumes": ["/lustre/ckpt:/checkpoints"],
                                      "tensorboard": True, "slurm": {"container": "apptainer", "requeue": True}},
}

ALL = {"compose": COMPOSE, "pytorchjob": PYTORCHJOB, "trainjob": TRAINJOB, "slurm": SLURM}


# A workspace image as 'ddpctl render TARGET --workdir DIR --push REPO' renders it after the build and push: the
# image pinned by digest, no host directory mounted, the code's directory /workspace the working directory.
WORKSPACE = {"name": "ws", "nodes": 2, "image": "registry.example:5000/team/proj@sha256:" + "ab" * 32,
             "command": ["python", "train.py", "--epochs", "3"],
             "workspace": {"repository": "registry.example:5000/team/proj"}}
COMPOSE["workspace"] = WORKSPACE
PYTORCHJOB["workspace"] = WORKSPACE
TRAINJOB["workspace"] = WORKSPACE
SLURM["workspace-pyxis"] = {**WORKSPACE, "slurm": {"container": "pyxis"}}
SLURM["workspace-apptainer"] = {**WORKSPACE, "slurm": {"container": "apptainer"}}
