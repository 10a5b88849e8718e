"""ddpctl.host_gpus's nvidia-smi readers, against a stand-in nvidia-smi (a shell script: no GPU on this machine) that
answers the two queries the way the real one does; `ddpctl doctor` reads the same output with the same parsers
(tests/unit/test_doctor.py)."""

from __future__ import annotations

import stat

from ddpctl import host_gpus as host


def fake_smi(tmp_path, body: str):
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_the_readers_parse_a_two_gpu_host(tmp_path):
    exe = fake_smi(tmp_path, 'case "$1" in\n'
                             '  -L) printf "GPU 0: NVIDIA H100 (UUID: GPU-1)\\nGPU 1: NVIDIA H100 (UUID: GPU-2)\\n";;\n'
                             '  --query-gpu=driver_version) printf "570.86.15\\n570.86.15\\n";;\n'
                             '  *) exit 2;;\nesac\n')
    assert host.gpu_count(exe) == 2
    assert host.driver_version(exe) == "570.86.15"


def test_a_failing_nvidia_smi_reads_as_no_gpu_and_no_driver(tmp_path):
    exe = fake_smi(tmp_path, 'echo "NVIDIA-SMI has failed because it could not communicate with the driver"\n'
                             "exit 9\n")
    assert host.gpu_count(exe) == 0
    assert host.driver_version(exe) is None


def test_the_parsers():
    assert host.parse_gpu_count("GPU 0: A\nMIG 1g.10gb Device 0: (UUID)\nGPU 1: B\n") == 2
    assert host.parse_gpu_count(None) == 0
    assert host.parse_driver("\n  550.54.15 \n550.54.15\n") == "550.54.15"
    assert host.parse_driver("") is None
