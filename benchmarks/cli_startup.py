"""CLI start-up time: `ddpctl --help`, `ddpctl render compose` and the Python API's `import ddpctl` (target < 0.3 s
each, median of N runs).

Also checks with `python -X importtime` that neither path imports torch or docker. Prints the load average
before and after, and the CPU time (user + sys) of the runs next to their wall time: on a shared machine the
wall time moves with the load, the CPU time much less.

Measured as an installed ddpctl starts: with its bytecode cached (pip compiles a wheel's modules at install
time). The runs drop PYTHONDONTWRITEBYTECODE from their environment and one untimed run per command goes first,
so `__pycache__` exists; with the variable set, every start would compile ddpctl's sources again (about half the
start-up time on this machine).

    python benchmarks/cli_startup.py [--runs 15] [--target 0.3] [--no-fastparams]

``--no-fastparams`` measures Typer's own parameter coercion (ddpctl.cli.fast_params not installed), what an
unsupported Typer version would give; it runs ``python -c`` instead of the console script.

Exit status 1 when a median is above the target or a forbidden module is imported.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

FORBIDDEN = ("torch", "docker")
COMMANDS = {
    "ddpctl --help": ["--help"],
    "ddpctl render compose": ["render", "compose", "-n", "2"],
    "python -c 'import ddpctl'": None,  # the Python API (docs/api.md): its names are imported on first use
}
IMPORT_ONLY = "import ddpctl"


def ddpctl_path() -> str:
    return str(Path(sys.executable).parent / "ddpctl")


NO_FASTPARAMS = "import ddpctl.cli.fast_params as f; f.install = lambda: None; "


def child_env() -> dict:
    """This environment, with bytecode caching on (as an installed package has it)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall_times(argv: list[str] | None, runs: int, fastparams: bool = True) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + sys) seconds of each run, after one untimed run that writes the bytecode cache."""
    times, cpu = [], []
    if argv is None:
        cmd = [sys.executable, "-c", IMPORT_ONLY]
    elif fastparams:
        cmd = [ddpctl_path(), *argv]
    else:
        cmd = [sys.executable, "-c", NO_FASTPARAMS + (
            f"import sys; sys.argv = ['ddpctl', *{argv!r}]; from ddpctl.cli.main import main; main()")]
    env = child_env()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return times, cpu


def imported_top_levels(argv: list[str] | None) -> set[str]:
    code = f"import sys; sys.argv = ['ddpctl', *{argv!r}]; from ddpctl.cli.main import main; main()"
    if argv is None:
        code = IMPORT_ONLY
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                            env=child_env())
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--target", type=float, default=0.3)
    ap.add_argument("--no-fastparams", action="store_true", help="Typer's own coercion (no cli/fast_params.py)")
    args = ap.parse_args()
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {_load()}")
    ok = True
    for label, argv in COMMANDS.items():
        times, cpu = wall_times(argv, args.runs, fastparams=not args.no_fastparams)
        med = statistics.median(times)
        mods = imported_top_levels(argv)
        bad = sorted(m for m in FORBIDDEN if m in mods)
        verdict = "ok" if med < args.target and not bad else "FAIL"
        ok &= verdict == "ok"
        print(f"{label:26s} median {med:.3f} s  min {min(times):.3f} s  max {max(times):.3f} s  "
              f"cpu median {statistics.median(cpu):.3f} s  ({args.runs} runs)  modules: {len(mods)} top-level, "
              f"forbidden imported: {bad or 'none'}  {verdict}")
    print(f"load average after: {_load()}")
    return 0 if ok else 1


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
