"""Matrix planning and the ddp-train command lines of `ddpctl bench` (pure parts)."""

import pytest

from ddpctl.bench.option_lists import parse_counts, parse_list
from ddpctl.bench.plan import BenchOptions, default_gpu_counts, plan
from ddpctl.bench.programs import HostRunner, Launch
from ddpctl.bench.runner import ddp_train_args, parse_event
from ddpctl.errors import UsageError


def keys(p):
    return [c.key for c in p.cells]


@pytest.mark.parametrize("available, counts", [(0, (1, 2)), (1, (1,)), (2, (1, 2)), (3, (1, 2, 3)),
                                               (4, (1, 2, 4)), (8, (1, 2, 4, 8))])
def test_default_gpu_counts(available, counts):
    assert default_gpu_counts(available) == counts


def test_cpu_host_runs_a_small_matrix():
    p = plan(BenchOptions(), 0)
    assert p.device == "cpu"
    assert keys(p) == ["toy/device/single/1", "toy/device/ddp/2"]
    assert p.probe_sizes == (2,) and p.probe_max_bytes == 16 << 20
    assert (p.cells[0].warmup, p.cells[0].steps, p.cells[0].batch_size) == (2, 5, 32)


def test_two_gpu_host_default_matrix():
    p = plan(BenchOptions(), 2)
    assert keys(p) == [  # DataParallel last
        "cifar10-resnet18/device/single/1", "cifar10-resnet18/device/ddp/2",
        "cifar10-resnet18/dataloader/single/1", "cifar10-resnet18/dataloader/ddp/2",
        "cifar10-resnet18/classic/single/1", "cifar10-resnet18/classic/ddp/2",
        "imagenet-synthetic-resnet50/device/single/1", "imagenet-synthetic-resnet50/device/ddp/2",
        "cifar10-resnet18/device/dp/2", "cifar10-resnet18/dataloader/dp/2", "imagenet-synthetic-resnet50/device/dp/2",
    ]
    assert p.probe_sizes == (2,) and p.probe_max_bytes == 1 << 30
    assert any("imagenet-synthetic-resnet50: no dataloader" in s for s in p.skipped)
    assert any("imagenet-synthetic-resnet50: no classic" in s for s in p.skipped)
    assert any(s.startswith("classic: no DataParallel") for s in p.skipped)
    assert p.total_runs == 11 + 1
    # Per-workload step defaults: about a second or more of timed work each on a current GPU.
    assert {(c.workload, c.warmup, c.steps, c.batch_size) for c in p.cells} == {
        ("cifar10-resnet18", 30, 200, 256), ("imagenet-synthetic-resnet50", 20, 80, 256)}


def test_eight_gpus_scale_out_and_repeat():
    p = plan(BenchOptions(workloads=("toy",), pipelines=("device",), strategies=("ddp",), repeat=3), 8)
    assert keys(p) == ["toy/device/ddp/2", "toy/device/ddp/4", "toy/device/ddp/8"]
    assert p.probe_sizes == (2, 4, 8)
    assert p.total_runs == 3 * 3 + 3


def test_one_gpu_only_still_runs_ddp():
    p = plan(BenchOptions(workloads=("toy",), pipelines=("device",)), 1)
    assert keys(p) == ["toy/device/single/1", "toy/device/ddp/1"]
    assert p.probe_sizes == ()


def test_cpu_drops_dataparallel_with_a_note():
    p = plan(BenchOptions(strategies=("single", "dp", "ddp")), 0)
    assert [c.strategy for c in p.cells] == ["single", "ddp"]
    assert any(s.startswith("dp: needs GPUs") for s in p.skipped)


def test_no_probe():
    assert plan(BenchOptions(probe=False), 2).probe_sizes == ()


@pytest.mark.parametrize("options, available, needle", [
    (BenchOptions(workloads=("resnet",)), 2, "unknown workload 'resnet'"),
    (BenchOptions(strategies=("fsdp",)), 2, "unknown strategy 'fsdp'"),
    (BenchOptions(pipelines=("dali",)), 2, "unknown pipeline 'dali'"),
    (BenchOptions(gpus=(1, 4)), 2, "asks for 4 GPUs but this host has 2"),
    (BenchOptions(gpus=(0,)), 2, "at least 1"),
    (BenchOptions(repeat=0), 2, "--repeat"),
    (BenchOptions(steps=0), 2, "--steps"),
    (BenchOptions(warmup=-1), 2, "--warmup"),
    (BenchOptions(batch_size=0), 2, "--batch-size"),
    (BenchOptions(runtime="k8s"), 2, "unknown runtime"),
    (BenchOptions(strategies=("dp",), gpus=(1,)), 2, "nothing to run"),
    (BenchOptions(gpus=(16,)), 0, "CPU-only host"),
])
def test_bad_options(options, available, needle):
    with pytest.raises(UsageError) as exc:
        plan(options, available)
    assert needle in exc.value.message and "\n" not in exc.value.message
    assert exc.value.exit_code == 2


def test_parse_helpers():
    assert parse_list(" a, b ,", what="x") == ("a", "b")
    assert parse_list(None, what="x") is None
    assert parse_counts("1,2,4") == (1, 2, 4)
    with pytest.raises(UsageError):
        parse_counts("1,two")
    with pytest.raises(UsageError):
        parse_list(",", what="gpus")


def test_ddp_train_args_gpu_cell():
    c = plan(BenchOptions(workloads=("cifar10-resnet18",), pipelines=("dataloader",), strategies=("ddp",),
                          warmup=10, steps=30), 2).cells[0]
    assert ddp_train_args(c, "cuda", ("--compile",)) == [
        "--workload", "cifar10", "--model", "resnet18", "--strategy", "ddp", "--data-pipeline", "dataloader",
        "--batch-size", "256", "--warmup-steps", "10", "--max-steps", "40", "--epochs", "1000", "--no-eval", "--progress", "lines",
        "--compile"]


def test_the_deprecated_gpu_spelling_is_the_device_pipeline():
    assert BenchOptions(pipelines=("gpu", "dataloader")).pipelines == ("device", "dataloader")
    assert BenchOptions(pipelines=("device", "gpu")).pipelines == ("device",)  # one cell, not two
    p = plan(BenchOptions(workloads=("toy",), pipelines=("gpu",), strategies=("single",)), 0)
    assert [c.key for c in p.cells] == ["toy/device/single/1"]
    args = ddp_train_args(p.cells[0], "cpu")
    assert args[args.index("--data-pipeline") + 1] == "device"


def test_ddp_train_args_cpu_toy():
    c = plan(BenchOptions(), 0).cells[0]
    args = ddp_train_args(c, "cpu")
    assert args[:2] == ["--workload", "toy"] and "--model" not in args
    assert args[args.index("--data-pipeline") + 1] == "device"
    assert args[-2:] == ["--device", "cpu"]


def test_host_runner_argv_and_visible_gpus():
    ex = HostRunner(python="/py", env={"PATH": "/bin"})
    dist = Launch("x", "ddp_train", ("--a",), nprocs=2, distributed=True, gpus=2)
    assert ex.argv(dist) == ["/py", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             "-m", "ddp_train", "--a"]
    assert ex.environ(dist)["CUDA_VISIBLE_DEVICES"] == "0,1"
    one = Launch("y", "ddp_train.sysinfo", ())
    assert ex.argv(one) == ["/py", "-m", "ddp_train.sysinfo"]
    assert "CUDA_VISIBLE_DEVICES" not in ex.environ(one)
    # A user's own CUDA_VISIBLE_DEVICES is respected: the first N of it.
    ex2 = HostRunner(python="/py", env={"CUDA_VISIBLE_DEVICES": "3,5,7"})
    assert ex2.environ(Launch("z", "m", (), gpus=2))["CUDA_VISIBLE_DEVICES"] == "3,5"


def test_parse_event_takes_the_last_matching_json_line():
    out = "\n".join([
        'ddp-train: world_size=2',
        '{"event": "summary", "images_per_sec": 1}',
        '[rank1]: some warning {not json}',
        '{"event": "summary", "images_per_sec": 2}',
        '{"event": "other"}',
        'trailing text',
    ])
    assert parse_event(out, "summary") == {"event": "summary", "images_per_sec": 2}
    assert parse_event(out, "other") == {"event": "other"}
    assert parse_event(out, "allreduce_probe") is None


def test_classic_cell_runs_the_seeds_way():
    """The classic pipeline: torchvision model, PIL per-sample transforms in 4 DataLoader workers, fp32, NCHW,
    no cuDNN autotuning, eager steps; a --compile meant for ddp-train's cells does not reach it."""
    c = plan(BenchOptions(workloads=("cifar10-resnet18",), pipelines=("classic",), strategies=("single", "ddp")),
             2).cells
    assert [x.key for x in c] == ["cifar10-resnet18/classic/single/1", "cifar10-resnet18/classic/ddp/2"]
    args = ddp_train_args(c[1], "cuda", ("--compile",))
    assert args[:4] == ["--workload", "cifar10", "--model", "torchvision-resnet18"]
    for flag in ("--precision fp32", "--no-channels-last", "--no-cudnn-benchmark", "--step-mode eager",
                 "--workers 4", "--data-pipeline classic"):
        assert flag in " ".join(args)
    assert "--compile" not in args
    assert "--step-mode" not in ddp_train_args(c[0].__class__(**{**c[0].__dict__, "pipeline": "device"}), "cuda")


def test_socket_link_adds_two_node_cells_before_dataparallel():
    p = plan(BenchOptions(workloads=("imagenet-synthetic-resnet50",), links=("local", "socket")), 4)
    assert keys(p) == [
        "imagenet-synthetic-resnet50/device/single/1", "imagenet-synthetic-resnet50/device/ddp/2",
        "imagenet-synthetic-resnet50/device/ddp/4", "imagenet-synthetic-resnet50/device/ddp/2/socket",
        "imagenet-synthetic-resnet50/device/ddp/4/socket", "imagenet-synthetic-resnet50/device/dp/2",
        "imagenet-synthetic-resnet50/device/dp/4"]
    sock = p.cells[4]
    assert (sock.link, sock.nodes, sock.label) == ("socket", 2, "imagenet-synthetic-resnet50 device ddp x4 (2 nodes x 2, sockets)")
    assert p.probe_sizes == (2, 4) and p.socket_probe_sizes == (2, 4)
    assert p.total_runs == 7 + 2 + 2 * 2
    only = plan(BenchOptions(workloads=("toy",), pipelines=("device",), links=("socket",), gpus=(1, 3, 4)), 4)
    assert keys(only) == ["toy/device/single/1", "toy/device/ddp/4/socket", "toy/device/dp/3", "toy/device/dp/4"]
    assert only.probe_sizes == () and only.socket_probe_sizes == (4,)
    with pytest.raises(UsageError, match="runs on --runtime host only"):
        plan(BenchOptions(links=("socket",), runtime="docker"), 4)
    with pytest.raises(UsageError, match="unknown link 'ib'"):
        plan(BenchOptions(links=("ib",)), 4)


def test_socket_nodes_add_cells_of_more_nodes_where_they_divide_the_gpus():
    """--socket-nodes 2,4: a 4-GPU ddp cell also as 4 nodes x 1 (key .../socket/4-nodes), a 2-GPU one only as 2
    nodes; the socket probe runs over the two-node shapes only."""
    p = plan(BenchOptions(workloads=("toy",), pipelines=("device",), strategies=("ddp",), gpus=(2, 4),
                          links=("local", "socket"), socket_nodes=(4, 2)), 4)
    sock = [c for c in p.cells if c.link == "socket"]
    assert [(c.key, c.nodes) for c in sock] == [("toy/device/ddp/2/socket", 2), ("toy/device/ddp/4/socket", 2),
                                                ("toy/device/ddp/4/socket/4-nodes", 4)]
    assert sock[-1].label == "toy device ddp x4 (4 nodes x 1, sockets)"
    assert p.socket_probe_sizes == (2, 4)
    only4 = plan(BenchOptions(workloads=("toy",), pipelines=("device",), strategies=("single", "ddp"), gpus=(1, 2),
                              links=("socket",), socket_nodes=(4,)), 4)
    assert [c.key for c in only4.cells] == ["toy/device/single/1"]
    assert "socket: no ddp cell whose GPU count the node count(s) 4 divide" in only4.skipped
    with pytest.raises(UsageError, match="each node count must be between 2 and 64"):
        plan(BenchOptions(links=("socket",), socket_nodes=(1,)), 4)
    with pytest.raises(UsageError, match="--socket-nodes applies to the socket link only"):
        plan(BenchOptions(links=("local",), socket_nodes=(2,)), 4)
    assert parse_counts("2,4", what="socket_nodes") == (2, 4)
    with pytest.raises(UsageError, match="--socket-nodes must be comma-separated integers"):
        parse_counts("two", what="socket_nodes", example="2,4")


def test_host_runner_two_node_emulation():
    ex = HostRunner(python="/py", env={"PATH": "/bin"})
    two = Launch("x", "ddp_train", ("--a",), nprocs=4, distributed=True, gpus=4, nodes=2,
                 env=(("NCCL_NET", "Socket"),))
    assert ex.argv(two, 1, 29500) == ["/py", "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", "1",
                                      "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port",
                                      "29500", "-m", "ddp_train", "--a"]
    assert [ex.environ(two, i)["CUDA_VISIBLE_DEVICES"] for i in (0, 1)] == ["0,1", "2,3"]
    assert ex.environ(two, 0)["NCCL_NET"] == "Socket"


def test_socket_link_leaves_the_classic_program_on_the_local_link():
    """The classic (reference pipeline) program is paced by its CPU input pipeline: its ddp cells stay on the host's own
    link, also under --links socket alone; ddp-train's pipelines get their two-node cells."""
    p = plan(BenchOptions(workloads=("cifar10-resnet18",), pipelines=("device", "classic"), strategies=("single", "ddp"),
                          links=("local", "socket")), 4)
    assert [c.key for c in p.cells if c.link == "socket"] == ["cifar10-resnet18/device/ddp/2/socket",
                                                              "cifar10-resnet18/device/ddp/4/socket"]
    assert "cifar10-resnet18/classic/ddp/4" in {c.key for c in p.cells}
    only = plan(BenchOptions(workloads=("cifar10-resnet18",), pipelines=("classic",), strategies=("ddp",),
                             gpus=(2,), links=("socket",)), 4)
    assert [c.key for c in only.cells] == ["cifar10-resnet18/classic/ddp/2"]
