"""ddpctl.rules: one pure rule per kind of value (docs/security.md). Accepted and refused values for each rule."""

from __future__ import annotations

import time

import pytest

from ddpctl import rules
from ddpctl.errors import SpecError
from ddpctl.rules import RuleError
from ddpctl.spec import spec_from_dict


def refused(fn, value, **kw) -> str:
    with pytest.raises(RuleError) as exc:
        fn(value, **kw)
    assert "\n" not in exc.value.message
    return exc.value.message


def test_rule_error_is_a_spec_error_with_exit_2():
    assert issubclass(RuleError, SpecError) and RuleError("x", "y").exit_code == 2


@pytest.mark.parametrize("name", ["A", "_x", "NCCL_DEBUG", "a1_B2", "LD_PRELOAD", "HF_HOME"])
def test_env_name_ok(name):
    assert rules.user_env_name(name) == name


@pytest.mark.parametrize("name", ["X\n", "\nX", "1A", "A-B", "A B", "A=B", "", "Ä", "A\x85", "A.B", "X\r"])
def test_env_name_refused(name):
    assert "not a valid environment variable name" in refused(rules.env_name, name)


@pytest.mark.parametrize("name, fix", [
    ("RANK", "--nproc-per-node"), ("WORLD_SIZE", "--nodes"), ("LOCAL_RANK", "--port"),
    ("MASTER_ADDR", "master_addr"), ("MASTER_PORT", "--port"), ("SLURM_JOB_NUM_NODES", "--nodes"),
    ("SLURM_ANYTHING", "slurm:"), ("PET_NNODES", "--nodes"), ("PET_X", "--nproc-per-node"),
    ("TORCHELASTIC_RUN_ID", "--max-restarts"), ("CUDA_VISIBLE_DEVICES", "--device-ids"),
    ("SHELLOPTS", "remove it"), ("BASHOPTS", "remove it"), ("BASH_ENV", "remove it"), ("ENV", "remove it"),
    ("IFS", "remove it"), ("PS4", "remove it"), ("PATH", "PATH"), ("BASH_XTRACEFD", "remove it"),
    ("EXECIGNORE", "looks up a command"), ("POSIXLY_CORRECT", "POSIX mode"), ("SRUN_EXPORT_ENV", "slurm:"),
    ("SRUN_CPUS_PER_TASK", "cpus_per_task"), ("SLURM_EXPORT_ENV", "slurm:"),
    ("APPTAINER_BIND", "volumes:"), ("SINGULARITY_BIND", "volumes:"), ("APPTAINER_CACHEDIR", "before sbatch"),
])
def test_reserved_env_names_name_the_fix(name, fix):
    msg = refused(rules.user_env_name, name)
    assert "reserved" in msg and fix in msg


@pytest.mark.parametrize("name, inner, fix", [
    ("APPTAINERENV_CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "--device-ids"),
    ("SINGULARITYENV_PET_NNODES", "PET_NNODES", "--nodes"), ("APPTAINERENV_RANK", "RANK", "--nproc-per-node"),
    ("SINGULARITYENV_MASTER_ADDR", "MASTER_ADDR", "master_addr"), ("APPTAINERENV_PATH", "PATH", "PATH"),
    ("APPTAINERENV_PREPEND_PATH", "PATH", "PATH"), ("SINGULARITYENV_APPEND_PATH", "PATH", "PATH"),
    ("APPTAINERENV_BASH_ENV", "BASH_ENV", "remove it"),
    ("APPTAINERENV_SINGULARITYENV_RANK", "SINGULARITYENV_RANK", "--nproc-per-node"),
])
def test_apptainer_env_prefixes_of_a_reserved_name_are_reserved(name, inner, fix):
    # apptainer/singularity set INNER inside the container from APPTAINERENV_INNER / SINGULARITYENV_INNER
    msg = refused(rules.user_env_name, name)
    assert f"{name} is reserved" in msg and f"sets {inner} from it" in msg and fix in msg


@pytest.mark.parametrize("name", ["APPTAINERENV_HF_HOME", "SINGULARITYENV_NCCL_DEBUG", "APPTAINERENV_",
                                  "LD_LIBRARY_PATH", "SBATCH_PARTITION", "SRUN", "EXEC_IGNORE"])
def test_names_near_the_reserved_ones_are_allowed(name):
    assert rules.user_env_name(name) == name


@pytest.mark.parametrize("value", ["a\nb", "tab\there", "$(id) `x` 'q\"", "ünïcödé", ""])
def test_env_value_ok(value):
    assert rules.env_value(value) == value


@pytest.mark.parametrize("value, code", [("a\x85b", "0085"), ("a\u2028b", "2028"), ("a\u2029", "2029"),
                                         ("a\x00", "0000"), ("\x1b[2J", "001B"), ("a\rb", "000D"),
                                         ("\x7f", "007F"), ("\ufeff", "FEFF"), ("\udcff", "DCFF")])
def test_env_value_control_characters_refused(value, code):
    assert f"U+{code}" in refused(rules.env_value, value)


@pytest.mark.parametrize("ref", [
    "ddpctl/ddp-train:cpu", "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime", "ubuntu", "ubuntu:24.04",
    "localhost/x", "localhost:5000/team/img:tag", "nvcr.io/nvidia/pytorch:25.08-py3", "Registry.Example.com/x",
    "[::1]:5000/x", "a__b/c-d.e:TAG_1", "x@sha256:" + "a" * 64, "x:1@sha256:" + "0" * 64, "a---b",
])
def test_image_ref_ok(ref):
    assert rules.image_ref(ref) == ref


@pytest.mark.parametrize("ref, needle", [
    ("-x", "starts with '-'"), ("--privileged", "starts with '-'"), ("UPPER/x", "lowercase"), ("Ubuntu", "lowercase"),
    ("a b", "not a valid"), ("a:b:c", "not a valid"), (":t", "not a valid"), ("a//b", "not a valid"),
    ("x:" + "t" * 129, "not a valid"), ("x@sha256:abc", "not a valid"), ("a_/b", "not a valid"),
    ("x/" + "a" * 260, "longer than 255"), ("", "non-empty"), ("a\n", "newline"), ("x;id", "not a valid"),
])
def test_image_ref_refused(ref, needle):
    assert needle in refused(rules.image_ref, ref)


@pytest.mark.parametrize("ref", ["pytorch/pytorch:tägé", "x:\u0663", "x:\uff54ag", "x:t\u00e9", "x:_\u00df"])
def test_image_tags_are_ascii_as_in_dockers_grammar(ref):
    assert "not a valid image reference" in refused(rules.image_ref, ref)
    assert "not an image reference" in refused(rules.container_image, "docker://" + ref)


@pytest.mark.parametrize("value", ["docker://pytorch/pytorch:2.13.0", "nvcr.io#nvidia/pytorch:25.08-py3",
                                   "/images/train dir/$x.sif", "oras://ghcr.io/a/b:1"])
def test_container_image_ok(value):
    assert rules.container_image(value) == value


@pytest.mark.parametrize("value, needle", [("-B/:/host", "starts with '-'"), ("docker://-x", "starts with '-'"),
                                           ("docker://UP/x", "lowercase"), ("a\nb", "newline"),
                                           ("~/images/train.sif", "does not expand")])
def test_container_image_refused(value, needle):
    assert needle in refused(rules.container_image, value)


@pytest.mark.parametrize("value, shown", [
    ("https://user:s3cr3t@reg.example/x.sif", "https://user:***@reg.example/x.sif"),
    ("http://tok3n@reg.example/x.sif", "http://***@reg.example/x.sif"),
    ("https://:s3cr3t@reg.example/x.sif", "https://:***@reg.example/x.sif"),
])
def test_container_image_url_with_credentials_is_refused_like_a_docker_host(value, shown):
    msg = refused(rules.container_image, value)
    assert f"container image {shown!r} carries credentials" in msg and "s3cr3t" not in msg and "tok3n" not in msg
    assert "registry login" in msg
    # the same refusal (one function) as a Docker host's
    assert "carries credentials; write tcp://HOST[:PORT]" in refused(rules.docker_host, "tcp://u:s3cr3t@h:2376")


@pytest.mark.parametrize("value", ["https://[x/y.sif", "https://reg.example:99999/x.sif", "https://tok@[x/y.sif"])
def test_container_image_url_that_does_not_parse_is_one_line(value):
    msg = refused(rules.container_image, value)
    assert "not a valid URL" in msg and "tok" not in msg


@pytest.mark.parametrize("path, want", [("/data", "/data"), ("./data", "./data"), (".", "."), ("~/x", "~/x"),
                                        ("data/x", "./data/x"), ("code", "./code"), ("/a b/$(x)", "/a b/$(x)")])
def test_host_path_ok(path, want):
    assert rules.host_path(path) == want


@pytest.mark.parametrize("path, needle", [("/a:b", "':'"), ("/a,b", "','"), ("/a/../b", "'..'"), ("..", "'..'"),
                                          ("", "non-empty"), ("/a\nb", "newline"), ("/a\x00", "U+0000"),
                                          ("/" + "a" * 5000, "longer than")])
def test_host_path_refused(path, needle):
    assert needle in refused(rules.host_path, path)


@pytest.mark.parametrize("path, want", [("/data", "/data"), ("/data/", "/data"), ("//x//y", "/x/y")])
def test_container_path_ok(path, want):
    assert rules.container_path(path) == want


@pytest.mark.parametrize("path, needle", [("rel", "absolute"), ("/", "must not be '/'"), ("//", "must not be '/'"),
                                          ("/dev/shm", "/dev/shm"), ("/dev/shm/", "/dev/shm"),
                                          ("/dev//shm/x", "/dev/shm"), ("/x/../y", "'..'"), ("/a:b", "':'")])
def test_container_path_refused(path, needle):
    assert needle in refused(rules.container_path, path)


def test_kubernetes_names():
    assert rules.dns1123_label("0abc-9") == "0abc-9"
    assert rules.dns1123_label("a" * 63)
    for bad in ["a" * 64, "A", "a.b", "-a", "a-", "", "a_b", "a\n"]:
        refused(rules.dns1123_label, bad)
    assert rules.dns1123_subdomain("a.b-c.d") == "a.b-c.d"
    assert rules.dns1123_subdomain(".".join(["a" * 63] * 3) + "." + "b" * 61)  # 253
    for bad in ["a" * 254, "a..b", ".a", "a.", "A.b", "a_b", ""]:
        refused(rules.dns1123_subdomain, bad)
    assert rules.dns1035_label("abc") == "abc"
    for bad in ["0abc", "a" * 64, "Ab"]:
        refused(rules.dns1035_label, bad)
    refused(rules.dns1035_label, "a" * 41, max_len=40)


def test_labels():
    for ok in ["", "a", "A-b_c.d", "x" * 63, "H100"]:
        assert rules.label_value(ok) == ok
    for bad in ["x" * 64, "-a", "a-", "a b", "a/b", "a\n"]:
        refused(rules.label_value, bad)
    for ok in ["pool", "nvidia.com/gpu.product", "kubernetes.io/hostname", "a_b"]:
        assert rules.label_key(ok) == ok
    for bad in ["", "/x", "Bad.Prefix/x", "a/b/c", "x" * 64, "bad key", "p/"]:
        refused(rules.label_key, bad)


def test_integers_and_bounds():
    assert rules.int32(2**31 - 1) == 2**31 - 1
    assert "2147483647" in refused(rules.int32, 2**31)
    assert rules.int64("42") == 42
    assert "must be an integer" in refused(rules.integer, "9" * 5000)  # never int() on 5,000 digits
    assert "must be an integer" in refused(rules.integer, "1.5")
    assert "must be an integer" in refused(rules.integer, True)
    assert "digit number" in refused(rules.integer, 10**100, hi=5)  # the message does not print 100 digits


def test_cpus_round_to_millicores_and_refuse_non_finite():
    assert rules.cpus(2.5) == 2.5 and rules.cpus(0.001) == 0.001 and rules.cpus(2.0004) == 2.0
    assert rules.cpu_quantity(2.5) == "2500m" and rules.cpu_quantity(2) == "2" and rules.cpu_quantity(0.001) == "1m"
    for bad, needle in [(float("nan"), "finite"), (float("inf"), "finite"), (float("-inf"), "finite"),
                        (1e308, "at most"), (10**400, "at most"), (0.0004, "0.001"), (0, "0.001"), (-1, "0.001"),
                        ("two", "number"), (None, "number")]:
        assert needle in refused(rules.cpus, bad)


def test_sizes():
    assert rules.size_bytes("16g") == 16 * 2**30 and rules.size_bytes("2Gi") == 2 * 2**30
    assert rules.size_bytes("1.5k") == 1536 and rules.size_bytes(4096) == 4096 and rules.size_bytes(4096.0) == 4096
    assert rules.size_bytes("1P") == 2**50
    for bad, needle in [("nan", "not understood"), ("inf", "not understood"), ("9" * 400, "not understood"),
                        ("99999999999999999999t", "larger than"), (2**63, "larger than"), (0, "positive"),
                        ("0.0001", "positive"), (-5, "positive"), (float("nan"), "whole number"),
                        (1e300, "larger than"), (True, "number of bytes"), ([1], "string")]:
        assert needle in refused(rules.size_bytes, bad)


def test_k8s_quantity_syntax():
    for ok in ["500m", "2", "16Gi", "1e3", "0.5", "+1", "1.5Ti"]:
        assert rules.k8s_quantity(ok) == ok
    for bad in ["", "1 Gi", "Gi", "1GB", "nan", "1" * 65, True]:
        refused(rules.k8s_quantity, bad)


def test_device_ids_normalise():
    assert [rules.device_id(x) for x in ["0", "00", "007", 3]] == ["0", "0", "7", "3"]
    assert rules.device_id("GPU-6f3b1c2d-aaaa") == "GPU-6f3b1c2d-aaaa"
    for bad in ["-1", "a", "0,1", "GPU-", "99999", True]:
        refused(rules.device_id, bad)


def test_tolerations():
    assert rules.toleration({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}) == {
        "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert rules.toleration({"operator": "Exists"}) == {"operator": "Exists"}
    assert rules.toleration({"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": "30"})[
        "tolerationSeconds"] == 30
    for bad, needle in [({"key": "a", "operator": "Bogus"}, "operator"),
                        ({"key": "a", "effect": "Sometimes"}, "effect"),
                        ({"key": "a", "effect": "NoExecute", "tolerationSeconds": 1.5}, "integer"),
                        ({"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}, "NoExecute"),
                        ({"key": "a", "operator": "Exists", "value": "v"}, "must not have a value"),
                        ({"value": "v"}, "without a key"), ({"key": "bad key"}, "label key"),
                        ({"key": "a", "value": "x" * 64}, "label value"), ({"extra": 1}, "unknown key"),
                        ("Exists", "mapping")]:
        assert needle in refused(rules.toleration, bad)


def test_command():
    assert rules.command(["python", "-c", "x"]) == ("python", "-c", "x")
    for bad, needle in [([], "empty"), (["--node-rank=5", "python"], "own option"), (["-m", "x"], "own option"),
                        (["python", "a\x85"], "U+0085"), (["python", "a\nb"], "newline")]:
        assert needle in refused(rules.command, bad)


# ----------------------------------------------------------------------------------------------- YAML

LAUGHS = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))


def test_yaml_alias_expansion_is_bounded_and_fast():
    start = time.monotonic()
    assert "expands to more than" in refused(rules.compose_yaml_bounded, LAUGHS, source="x.yaml")
    assert time.monotonic() - start < 2


def test_yaml_limits():
    assert "nests deeper" in refused(rules.compose_yaml_bounded, "[" * 40 + "]" * 40, source="s")
    assert rules.compose_yaml_bounded("[" * 30 + "]" * 30, "s") is not None
    assert "contains it" in refused(rules.compose_yaml_bounded, "a: &a {b: *a}\n", source="s")
    assert "bytes" in refused(rules.compose_yaml_bounded, "#" * (rules.MAX_SPEC_BYTES + 1), source="s")
    assert "not valid YAML" in refused(rules.compose_yaml_bounded, "a: [1\n", source="s")
    assert "undefined alias" in refused(rules.compose_yaml_bounded, "a: *nope\n", source="s")
    # a few shared aliases are fine: only the expanded size is bounded
    assert rules.compose_yaml_bounded("a: &a {x: 1}\nb: *a\nc: *a\n", "s") is not None


def test_spec_layer_puts_the_key_in_front():
    with pytest.raises(SpecError, match=r"^'kubernetes.namespace' namespace 'A' is not a DNS-1123 label"):
        spec_from_dict({"kubernetes": {"namespace": "A"}})
    with pytest.raises(SpecError, match=r"'env.X\\n' '"):  # the key is shown escaped, on one line
        spec_from_dict({"env": {"X\n": "1"}})


@pytest.mark.parametrize("data", [{"slurm": {"time": "\u0660\u0662:00:00"}}, {"slurm": {"mem": "\u0666\u0664G"}}])
def test_slurm_times_and_sizes_are_ascii_digits(data):
    # written into #SBATCH as given: a Unicode digit would reach sbatch, so the field's own rule refuses it
    with pytest.raises(SpecError, match="such as"):
        spec_from_dict(data)


def test_kubernetes_quantities_are_ascii_digits():
    assert rules.k8s_quantity("16Gi") == "16Gi"
    refused(rules.k8s_quantity, "\u0661\u0666Gi")
