"""The pure parts of the CUDA image with no registry (``--base local``) and of the host-made wheelhouse."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from ddpctl.errors import UsageError
from ddpctl.images import host_wheels, torch_base
from ddpctl.images.check import libs_row
from ddpctl.images.plans import DEFAULT_LOCAL_BASE, build_plan


def test_base_local_is_the_cuda_image_on_the_local_torch_base():
    plan = build_plan(cpu=False, base="local")
    assert plan.local_base and plan.base == torch_base.tag_for("2.13.0", "13.0") == \
        "ddpctl/torch:2.13.0-cuda13.0-cudnn9-runtime"
    assert plan.tag == "ddpctl/ddp-train:cuda" and plan.cuda_version == "13.0"
    assert plan.buildargs()["CUDA_VERSION"] == "13.0" and plan.buildargs()["BASE_IMAGE"] == plan.base
    cpu = build_plan(cpu=True, base="local")
    assert not cpu.local_base and cpu.base == DEFAULT_LOCAL_BASE and cpu.cuda_version == ""


def test_torch_base_key_follows_its_inputs_not_the_wheelhouse():
    one = torch_base.input_hash("sha256:a", "2.13.0", "13.0")
    assert one == torch_base.input_hash("sha256:a", "2.13.0", "13.0")
    assert one != torch_base.input_hash("sha256:b", "2.13.0", "13.0")
    assert one != torch_base.input_hash("sha256:a", "2.14.1", "13.0")
    text = torch_base.dockerfile(DEFAULT_LOCAL_BASE, {"ai.ddpctl.torch.version": "2.13.0"})
    # two stages: the wheelhouse is installed in the first, only the installed tree reaches the image
    assert text.count("FROM ddpctl/base:bookworm") == 2 and "COPY --from=wheels /stage/usr/local/ /usr/local/" in text
    assert "--no-index" in text and "gcc" in text and '"ai.ddpctl.torch.version"="2.13.0"' in text
    assert torch_base.requirements("2.13.0") == ["torch==2.13.0", "numpy"]


def test_target_platforms_list_every_older_manylinux():
    t = host_wheels.Target("3.11", "x86_64", (2, 36))
    tags = t.platforms()
    assert tags[0] == "manylinux_2_36_x86_64" and "manylinux_2_28_x86_64" in tags and "manylinux_2_17_x86_64" in tags
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    args = t.pip_args()
    assert args[:2] == ["--only-binary=:all:", "--python-version"] and "cp311" in args
    assert args.count("--platform") == len(tags)
    with pytest.raises(UsageError, match="not glibc"):
        host_wheels.Target("3.11", "x86_64", None).platforms()


def test_fake_site_is_what_pip_sees_installed(tmp_path):
    site = tmp_path / "site"
    host_wheels._fake_site(site, [{"name": "torch", "version": "2.13.0+cpu", "requires": ["filelock", "sympy>=1"],
                                  "requires_python": ">=3.10", "extras": ["opt"]}])
    out = subprocess.run([sys.executable, "-S", "-c", "import importlib.metadata as m; d = m.distribution('torch'); "
                          "print(d.version, d.requires, d.metadata.get_all('Provides-Extra'))"], capture_output=True, text=True,
                         env={"PYTHONPATH": str(site)}, check=True).stdout
    assert out.strip() == "2.13.0+cpu ['filelock', 'sympy>=1'] ['opt']"
    assert (site / "pip").resolve() == Path(importlib.metadata.distribution("pip").locate_file("pip")).resolve()


def test_image_facts_and_libs_row():
    facts = host_wheels.ImageFacts(host_wheels.Target("3.11", "x86_64", (2, 36)),
                                  [{"name": "Torch", "version": "2.13.0", "requires": []}])
    assert facts.has("torch") == "2.13.0" and facts.has("numpy") is None
    assert libs_row({}) == "none (CPU build)"
    row = libs_row({"cudnn": {"so": "libcudnn.so.9", "version": "9.20.0"},
                     "nccl": {"so": "libnccl.so.2", "error": "cannot open"}})
    assert row.startswith("libcudnn.so.9 9.20.0, libnccl.so.2 FAILED: cannot open")


def test_unreachable_registry_names_the_local_cuda_base_first_for_the_default_base():
    from ddpctl.errors import EngineError
    from ddpctl.images.build_output import BuildProgress
    from ddpctl.images.plans import DEFAULT_CUDA_BASE
    from ddpctl.images.pull import pull_base

    class Api:  # the daemon's answer when no registry is reachable (a unit test of the message only)
        def pull(self, *a, **k):
            raise RuntimeError("Get https://registry-1.docker.io/v2/: dial tcp: lookup registry-1.docker.io: no such host")

    class Client:
        api = Api()

    import io

    for ref, first in ((DEFAULT_CUDA_BASE, "make image CUDA_BASE=local"), ("example.org/x:1", "pull it on a machine")):
        with pytest.raises(EngineError) as info:
            pull_base(Client(), ref, BuildProgress(io.StringIO(), tty=False))
        assert first in info.value.fix.split(";")[0] and "docker load" in info.value.fix, info.value.fix
        assert "no registry is reachable" in info.value.problem


def test_direct_references_pip_would_build_are_found():
    """Host resolution refuses these (workspace_requirements.layer_sources): pip builds a source reference to read its
    dependencies, running its build code, whatever --only-binary says."""
    from ddpctl.images import requirements_file

    text = ("numpy>=1.26\n"
            "git+https://github.com/a/b.git\n"
            "foo @ https://x.example/foo-1.tar.gz ; python_version > '3'\n"
            "bar @ https://x.example/bar-1-py3-none-any.whl\n"
            "https://x.example/baz-1-py3-none-any.whl\n"
            "# qux @ git+https://x.example/qux.git\n"
            "baz[x] @ git+https://x.example/r.git \\\n  --hash=sha256:00\n")
    assert [n for n, _ in requirements_file.source_references(text)] == [2, 3, 7]
    assert requirements_file.source_references("torch==2.13.0\nlightning\n") == []
