"""A real one-machine Slurm cluster for the tests: ``munged``, one ``slurmctld`` and two ``slurmd -N n<i>``.

Everything lives under one temporary directory: the munge key, socket, pid, log and seed files, and
slurm.conf with its state, spool and log directories. Each slurmd has its own ``Port=``; all nodes have
``NodeAddr=127.0.0.1``. The daemons run in the foreground (``-D`` / ``-F``) as children of the test
process, so :meth:`SlurmCluster.stop` ends exactly the processes it started.

Node names must resolve for the job itself (the rendered script makes the first node of
``$SLURM_JOB_NODELIST`` the rendezvous host), so :func:`ensure_hosts` appends one line
``127.0.0.1 n1 n2 # ddpctl-test-slurm`` to /etc/hosts when those names do not resolve yet (idempotent: the
marked line is written once and left for later runs; it only names the loopback address).

Nothing here imports ddpctl: this module is test infrastructure only.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ports import free_ports

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "slurmstepd", "sbatch", "srun", "scontrol", "squeue",
           "scancel", "sinfo")
HOSTS_MARK = "# ddpctl-test-slurm"
NODES = ("n1", "n2")
PARTITION = "debug"
CRED_EXPIRE = 15  # seconds (AuthInfo=cred_expire); see _write_conf


def missing_binaries() -> list[str]:
    return [b for b in DAEMONS if not shutil.which(b, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]


def _which(name: str) -> str:
    found = shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if not found:
        raise RuntimeError(f"{name} not found")
    return found


def _resolves(name: str) -> bool:
    try:
        return socket.gethostbyname(name) == "127.0.0.1"
    except OSError:
        return False


def ensure_hosts(names: tuple[str, ...] = NODES, hosts_file: Path = Path("/etc/hosts")) -> None:
    """Make ``names`` resolve to 127.0.0.1 (one marked line in /etc/hosts, written only when needed)."""
    if all(_resolves(n) for n in names):
        return
    # under a lock: test sessions started at once (xdist workers, another developer's run) each find the names
    # unresolved; the first writes the line, the others then see them resolve
    with hosts_file.open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        if all(_resolves(n) for n in names):
            return
        f.seek(0)
        text = f.read()
        if HOSTS_MARK in text:
            raise RuntimeError(f"{hosts_file} has a '{HOSTS_MARK}' line but {names} do not resolve to 127.0.0.1")
        f.write(("" if text.endswith("\n") or not text else "\n") + f"127.0.0.1 {' '.join(names)} {HOSTS_MARK}\n")


@dataclass
class SlurmCluster:
    root: Path
    nodes: tuple[str, ...] = NODES
    cpus_per_node: int = 2
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    # -------------------------------------------------------------------------------- paths
    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "run" / "munge.socket"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for the Slurm clients (sbatch, squeue, ...) talking to this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    # -------------------------------------------------------------------------------- set-up
    def _write_munge(self) -> list[str]:
        base = self.root / "munge"
        for sub in ("etc", "run", "lib", "log"):
            (base / sub).mkdir(parents=True, exist_ok=True)
            (base / sub).chmod(0o755 if sub == "run" else 0o700)
        base.chmod(0o755)
        key = base / "etc" / "munge.key"
        subprocess.run([_which("mungekey"), "--create", f"--keyfile={key}"], check=True, capture_output=True)
        key.chmod(0o600)
        return [_which("munged"), "--foreground", "--force", f"--socket={self.munge_socket}",
                f"--key-file={key}", f"--pid-file={base / 'run' / 'munged.pid'}",
                f"--log-file={base / 'log' / 'munged.log'}", f"--seed-file={base / 'lib' / 'munged.seed'}"]

    def _write_conf(self) -> None:
        ctld, *node_ports = free_ports(1 + len(self.nodes))
        self.ports = {"slurmctld": ctld, **dict(zip(self.nodes, node_ports, strict=True))}
        for sub in ("state", "log", *(f"spool/{n}" for n in self.nodes)):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        host = socket.gethostname().split(".")[0]
        r = self.root
        lines = [
            "ClusterName=ddpctltest",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld}",
            f"SlurmdPort={node_ports[0]}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # cred_expire: also how long a requeued job is held (BeginTime = requeue + cred_expire + 1 s;
            # Slurm's default 120 s made each requeue test wait two minutes); 15 s still leaves a job step's
            # credential far more than the launch of a step takes here
            f"AuthInfo=socket={self.munge_socket},cred_expire={CRED_EXPIRE}",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}/%n",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd-%n.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SchedulerType=sched/builtin",
            # the main scheduling loop starts a pending job whose BeginTime has passed (no event does); every
            # 60 s by default, every second here (two nodes, a handful of jobs)
            "SchedulerParameters=sched_interval=1",
            "SelectType=select/linear",
            "ReturnToService=2",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            "MinJobAge=0",  # keep job records (scontrol show job) and make sbatch --wait poll every 2 s
            "SlurmctldParameters=enable_configless",
            f"NodeName=DEFAULT CPUs={self.cpus_per_node} State=UNKNOWN",
            *(f"NodeName={n} NodeAddr=127.0.0.1 Port={p}" for n, p in zip(self.nodes, node_ports, strict=True)),
            f"PartitionName={PARTITION} Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.log_dir / f"{name}.stdout").open("w")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env={**os.environ, "SLURM_CONF": str(self.conf)},
                                            start_new_session=True)

    def start(self, timeout: float = 60.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        munged = self._write_munge()
        self._write_conf()
        self._spawn("munged", munged)
        self._wait(lambda: self.munge_socket.exists(), timeout, "munged socket")
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-f", str(self.conf)])
        self._wait(lambda: self._run("scontrol", "ping").returncode == 0, timeout, "slurmctld ping")
        for n in self.nodes:
            self._spawn_slurmd(n)
        self._wait(self._nodes_idle, timeout, "nodes idle")

    def _spawn_slurmd(self, node: str) -> None:
        self._spawn(f"slurmd-{node}", [_which("slurmd"), "-D", "-N", node, "-f", str(self.conf)])

    def _run(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run([_which(argv[0]), *argv[1:]], env=self.env(), capture_output=True, text=True,
                              timeout=timeout)

    def _nodes_idle(self) -> bool:
        r = self._run("sinfo", "-h", "-N", "-o", "%N %t")
        states = dict(line.split() for line in r.stdout.splitlines() if line.strip())
        return r.returncode == 0 and all(states.get(n) == "idle" for n in self.nodes)

    def _wait(self, cond, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited with {p.returncode} while waiting for {what}:\n"
                                       + self.logs())
            if cond():
                return
            time.sleep(0.25)
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}:\n" + self.logs())

    def logs(self, tail: int = 30) -> str:
        out = []
        for f in sorted(self.log_dir.glob("*")) + sorted((self.root / "munge" / "log").glob("*")):
            lines = f.read_text(errors="replace").splitlines()[-tail:]
            out.append(f"--- {f.name}\n" + "\n".join(lines))
        return "\n".join(out)

    def cancel_all(self, timeout: float = 30.0) -> list[str]:
        """Cancel every job still queued or running (what a test that failed or timed out left) and wait up to
        ``timeout`` for the queue to empty; returns the ids that were there."""
        ids = self._run("squeue", "-h", "-o", "%i").stdout.split()
        if ids:
            self._run("scancel", "--full", f"--partition={PARTITION}")
            end = time.monotonic() + timeout
            while time.monotonic() < end and self._run("squeue", "-h", "-o", "%i").stdout.strip():
                time.sleep(0.5)
        return ids

    def heal(self, timeout: float = 90.0) -> list[str]:
        """Start again every slurmd that died (Debian's slurmd 22.05 has aborted here on a heap check,
        "malloc(): unaligned tcache chunk detected", while it launched two job steps at once): one node down
        would leave every later two-node job pending until its test's timeout. Cancels what the test that saw
        the crash left queued and waits for the nodes to be idle. Returns the restarted daemons' names."""
        dead = [n for n in self.nodes if self.procs[f"slurmd-{n}"].poll() is not None]
        if not dead:
            return []
        self.cancel_all()
        for n in dead:
            self._spawn_slurmd(n)
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self._nodes_idle():
            self._run("scontrol", "update", f"nodename={','.join(dead)}", "state=resume")  # DOWN on its loss
            time.sleep(1)
        self._wait(self._nodes_idle, 1, "nodes idle after restarting " + ", ".join(f"slurmd-{n}" for n in dead))
        return [f"slurmd-{n}" for n in dead]

    # -------------------------------------------------------------------------------- tear-down
    def stop(self, timeout: float = 30.0) -> None:
        """Cancel what is left, then stop slurmd, slurmctld and munged (in that order) and wait for them."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.cancel_all(timeout)
        order = [f"slurmd-{n}" for n in self.nodes] + ["slurmctld", "munged"]
        for name in order:
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        self.procs.clear()
