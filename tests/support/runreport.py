"""What a whole-suite run says while it runs, so that a run ended from outside (CI's time limit) still tells what it
was doing, registered by tests/conftest.py in the controlling process (or a plain run):

- the order's seed at the start and at the end (pytest-randomly prints it in the header, which ``-q`` hides);
- each failure when it happens, one line (the full report stays in the summary at the end);
- every ``CHECK_EVERY`` s, each test that has been running longer than ``SLOW_AFTER`` s, with how long and on which
  worker (a test that waits forever shows up here long before the per-test ``timeout`` in pyproject.toml ends it).
"""

from __future__ import annotations

import threading
import time

import pytest

SLOW_AFTER = 480.0  # the slowest test of the suite takes about 3 minutes on a quiet 2-core machine
CHECK_EVERY = 60.0
SAY_AGAIN = 300.0


class RunReport:
    def __init__(self, config) -> None:
        self.config = config
        self.running: dict[str, float] = {}  # node id -> when it started
        self.said: dict[str, float] = {}  # node id -> when its "still running" line was last written
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def _write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            if reporter._tw.width_of_current_line:  # after a row of dots
                reporter._tw.line()
            reporter.write_line(line)

    def _seed(self) -> None:
        seed = getattr(self.config.option, "randomly_seed", None)
        if self.config.pluginmanager.hasplugin("randomly") and isinstance(seed, int):
            self._write(f"random test order: seed {seed} (the same order again: --randomly-seed={seed})")

    @pytest.hookimpl(trylast=True)  # the last line of the run's output
    def pytest_terminal_summary(self) -> None:
        self._seed()

    def pytest_sessionstart(self, session) -> None:
        self._seed()
        self.thread = threading.Thread(target=self._watch, name="runreport", daemon=True)
        self.thread.start()

    def pytest_sessionfinish(self, session) -> None:
        self.stop.set()

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        with self.lock:
            self.running[nodeid] = time.monotonic()

    def pytest_runtest_logreport(self, report) -> None:
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = str(crash.message if crash is not None else report.longrepr or "").strip().splitlines()
            self._write(f"FAILED {report.nodeid} ({report.when}, {report.duration:.0f} s{_worker(report)}): "
                        f"{message[0][:300] if message else ''}")
        if report.when == "teardown":
            with self.lock:
                self.running.pop(report.nodeid, None)
                self.said.pop(report.nodeid, None)

    def _watch(self) -> None:
        while not self.stop.wait(CHECK_EVERY):
            now = time.monotonic()
            with self.lock:
                slow = [(nodeid, now - began) for nodeid, began in self.running.items()
                        if now - began > SLOW_AFTER and now - self.said.get(nodeid, 0.0) > SAY_AGAIN]
                for nodeid, _ in slow:
                    self.said[nodeid] = now
            for nodeid, took in slow:
                self._write(f"still running after {took:.0f} s: {nodeid}")


def _worker(report) -> str:
    node = getattr(report, "node", None)
    gateway = getattr(node, "gateway", None)
    return f", {gateway.id}" if gateway is not None else ""
