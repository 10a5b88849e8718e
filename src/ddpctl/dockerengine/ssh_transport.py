"""``ssh://`` Docker hosts through this machine's ``ssh`` client, without paramiko.

docker-py's own ssh support imports paramiko even when told to shell out to ``ssh`` (``use_ssh_client``), so
without paramiko installed no ``ssh://`` host can be reached at all ("Install paramiko package to enable
ssh:// support"); its shell-out also starts one ``ssh`` per request, lets ssh write to the terminal and
relies on an unconnected socket for urllib3's liveness checks. Here each HTTP connection of the client is
``ssh [-l USER] [-p PORT] -- HOST docker system dial-stdio`` (what the docker CLI runs) with its stdin and
stdout joined to one end of a socket pair; the other end is the connection's socket. So keep-alive,
timeouts, streaming (logs, wait) and connection reuse behave as with a unix socket, and nothing but
``ssh`` (config, agent, known_hosts as the user set them up) is needed.

Each ssh runs in a session of its own: Ctrl-C at the terminal reaches ddpctl (which then stops and removes
the job on every host through these connections), not the connections themselves; with no terminal to ask
on, ssh cannot prompt (``ddpctl`` checks ``ssh HOST docker version`` with BatchMode first, see
:func:`ddpctl.dockerengine.ssh.ssh_check`). Its stderr is discarded: that check reports why a host fails.
"""

from __future__ import annotations

import socket
import subprocess

from docker.transport import UnixHTTPAdapter
from docker.transport.unixconn import UnixHTTPConnection, UnixHTTPConnectionPool

PLACEHOLDER = "unix:///ddpctl-ssh-transport"  # the base URL docker-py is given; never opened


class SSHConnection(UnixHTTPConnection):
    def __init__(self, argv: list[str], timeout: float) -> None:
        super().__init__("http+docker://localhost", "", timeout=timeout)
        self.argv = argv
        self.proc: subprocess.Popen | None = None

    def connect(self) -> None:
        mine, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(self.argv, stdin=theirs, stdout=theirs, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        mine.settimeout(self.timeout)
        self.sock = mine

    def close(self) -> None:
        super().close()  # closes our end: ssh sees EOF and ends the remote dial-stdio
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


class SSHConnectionPool(UnixHTTPConnectionPool):
    def __init__(self, argv: list[str], timeout: float, maxsize: int) -> None:
        super().__init__("http+docker://localhost", "", timeout=timeout, maxsize=maxsize)
        self.argv = argv

    def _new_conn(self) -> SSHConnection:
        return SSHConnection(self.argv, self.timeout)


class SSHAdapter(UnixHTTPAdapter):
    """Mounted where docker-py mounts its unix-socket adapter; same pools, ssh connections."""

    __attrs__ = UnixHTTPAdapter.__attrs__ + ["argv"]

    def __init__(self, argv: list[str], timeout: float, max_pool_size: int) -> None:
        super().__init__(PLACEHOLDER.replace("unix://", "http+unix://"), timeout=timeout, max_pool_size=max_pool_size)
        self.argv = argv

    def get_connection(self, url, proxies=None):
        # One pool for the host: docker-py's unix adapter keeps a pool per request URL (free for a socket),
        # which here would cost an ssh handshake for every new path (each container's inspect, logs, wait).
        with self.pools.lock:
            pool = self.pools.get("ssh")
            if pool is None:
                pool = SSHConnectionPool(self.argv, self.timeout, maxsize=self.max_pool_size)
                self.pools["ssh"] = pool
        return pool
