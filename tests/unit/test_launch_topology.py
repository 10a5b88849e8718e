"""For nodes in 1..4 and GPUs in 0..8, the processes of every target end up with distinct ranks
0..WORLD_SIZE-1 and one master address.

Per target, each node's argv and env are taken from the rendered artifact: compose services (flags), the pods
of tests/support/k8s_contract.py (the operators' PET_* injection), and the Slurm script executed with a
recording ``srun``. torchrun's behaviour is then resolved by torch's own argument parser and
``config_from_args`` (with the node's PET_* env set), not re-implemented: its static rendezvous gives node rank
``rdzv_configs['rank']``; c10d (Slurm) hands out node ranks 0..N-1 in join order, so there we check that every
node joins the same rendezvous (endpoint, id, size).
"""

import os
from contextlib import contextmanager

import pytest

import k8s_contract  # tests/support/k8s_contract.py: the operators, emulated
import render_support as rs
from ddpctl.render import compose, pytorchjob, slurm, trainjob
from ddpctl.spec import spec_from_dict

run = pytest.importorskip("torch.distributed.run")

NODES = range(1, 5)
GPUS = range(0, 9)


@contextmanager
def node_env(env: dict[str, str]):
    """os.environ with exactly this node's PET_* variables (torch's parser reads them when it is built)."""
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith("PET_")]:
        del os.environ[key]
    os.environ.update({k: v for k, v in env.items() if k.startswith("PET_")})
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # else config_from_args sets it
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def torchrun_config(argv: list[str], env: dict[str, str]):
    assert argv[0] in ("torchrun", "ddp-train-launch"), argv  # the launcher takes torchrun's flags
    with node_env(env):
        args = run.get_args_parser().parse_args(argv[1:])
        config, cmd, cmd_args = run.config_from_args(args)
    return config, cmd, cmd_args


def static_ranks(nodes: list[tuple[list[str], dict[str, str]]]):
    """Global ranks and master address of every worker process under torchrun's static rendezvous."""
    ranks, masters, sizes = [], set(), set()
    for argv, env in nodes:
        config, cmd, _ = torchrun_config(argv, env)
        assert config.rdzv_backend == "static"
        assert config.min_nodes == config.max_nodes == len(nodes)
        node_rank = int(config.rdzv_configs["rank"])
        world = config.max_nodes * config.nproc_per_node
        sizes.add(world)
        masters.add(config.rdzv_endpoint)
        ranks += [node_rank * config.nproc_per_node + local for local in range(config.nproc_per_node)]
    return sorted(ranks), masters, sizes


def spec_for(nodes: int, gpus: int):
    return spec_from_dict({"name": "topo", "nodes": nodes, "gpus_per_node": gpus})


CASES = [(n, g) for n in NODES for g in GPUS]
IDS = [f"{n}x{g}" for n, g in CASES]


@pytest.mark.parametrize("nodes, gpus", CASES, ids=IDS)
def test_compose(nodes, gpus):
    spec = spec_for(nodes, gpus)
    doc = compose.render(spec)
    per_node = [([w.replace("$$", "$") for w in s["command"]], s["environment"]) for s in doc["services"].values()]
    ranks, masters, sizes = static_ranks(per_node)
    assert ranks == list(range(spec.world_size)) and sizes == {spec.world_size}
    (master,) = masters
    host = master.rsplit(":", 1)[0]
    assert host == next(iter(doc["services"].values()))["hostname"]  # node 0's hostname on the private network


@pytest.mark.parametrize("nodes, gpus", CASES, ids=IDS)
def test_pytorchjob(nodes, gpus):
    spec = spec_for(nodes, gpus)
    pods = k8s_contract.pytorchjob_pods(pytorchjob.render(spec))
    ranks, masters, sizes = static_ranks([(list(p.argv), p.env) for p in pods])
    assert ranks == list(range(spec.world_size)) and sizes == {spec.world_size}
    assert masters == {f"topo-master-0:{spec.port}"}
    assert pods[0].hostname == "topo-master-0"
    # The operator's own WORLD_SIZE agrees with torchrun's (it counts nprocPerNode per pod).
    assert {p.env["WORLD_SIZE"] for p in pods} == {str(spec.world_size)}


@pytest.mark.parametrize("nodes, gpus", CASES, ids=IDS)
def test_trainjob(nodes, gpus):
    spec = spec_for(nodes, gpus)
    pods = k8s_contract.trainjob_pods(trainjob.render(spec))
    ranks, masters, sizes = static_ranks([(list(p.argv), p.env) for p in pods])
    assert ranks == list(range(spec.world_size)) and sizes == {spec.world_size}
    assert masters == {"topo-node-0-0.topo:29500"}
    assert "topo-node-0-0.topo" in pods[0].aliases


@pytest.mark.parametrize("gpus", GPUS)
def test_slurm(tmp_path, gpus):
    for nodes in NODES:
        spec = spec_for(nodes, gpus)
        got = rs.run_sbatch(slurm.render(spec), tmp_path, nodes)
        argv = got["argv"]
        assert argv[:4] == [f"--nodes={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "torchrun"]
        torchrun = argv[3:]
        # srun starts the same torchrun on each of the `nodes` hosts; c10d then assigns node ranks 0..N-1.
        config, cmd, _ = torchrun_config(torchrun, got["env"])
        assert config.rdzv_backend == "c10d"
        assert config.rdzv_endpoint == f"gpu-node-1:{spec.port}"
        assert config.run_id == "4242"
        assert config.rdzv_configs["is_host"] == "false"  # every torchrun is a client of the store step
        assert config.min_nodes == config.max_nodes == nodes
        assert config.nproc_per_node == spec.procs_per_node
        ranks = sorted(n * config.nproc_per_node + lr for n in range(nodes) for lr in range(config.nproc_per_node))
        assert ranks == list(range(spec.world_size))
        assert got["env"]["MASTER_ADDR"] == "gpu-node-1"
        # The store: one task on the first host, on the rendezvous port.
        store = got["store"]["argv"]
        assert store[:4] == ["--overlap", "--nodes=1", "--ntasks=1", "--nodelist=gpu-node-1"]
        assert store[4:6] == ["python3", "-c"] and store[-1] == str(spec.port)
