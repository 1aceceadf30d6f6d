"""Fakes for what a test machine lacks (a clock under control, a GPU, Slack itself).

Shipped with the package so that users' own tests can use them too.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from logwatch.alerts import Severity
from logwatch.drivers.statesafe import RealStateFS
from logwatch.rules.base import Transition
from logwatch.rules.loader import RuleSpec

if TYPE_CHECKING:
    from logwatch.drivers.tail import TailDriver
    from logwatch.sources.watch import OnEvent, Watcher


class FakeClock:
    """A clock that moves only when told to; `sleep` advances it instantly."""

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime(2026, 11, 28, 14, 0, 0)
        self._elapsed = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        with self._lock:
            return self._elapsed

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        with self._lock:
            self._elapsed += max(seconds, 0.0)


# --- GPU (issue 5) ------------------------------------------------------------------------------

# Imported here, not at the top: the GPU model is small and pulls in nothing heavy.
from logwatch.gpu.model import (  # noqa: E402
    DeviceInfo,
    GpuProcess,
    GpuSample,
    NvmlReason,
    NvmlStatus,
    ReadProblem,
)


class FakeGpuReader:
    """A GpuReader with GPUs under the test's control: set metrics, fail init, lose a GPU, hang.

    `set(index, util_gpu=3.0, ...)` changes what the next read returns; `hang` is an Event that,
    while cleared with `hanging = True`, blocks reads (an NVML that does not answer).
    """

    def __init__(
        self,
        count: int = 2,
        *,
        name: str = "NVIDIA H200",
        driver: str = "580.65.06",
        mem_total_bytes: int = 150_754_820_096,
        init_failure: tuple[NvmlReason, str] | None = None,
    ) -> None:
        self.driver = driver
        self.init_failure = init_failure
        self._devices = tuple(
            DeviceInfo(i, name, f"GPU-fake-{i:04d}", mem_total_bytes) for i in range(count)
        )
        self.metrics: dict[int, dict[str, object]] = {
            d.index: {
                "util_gpu": 95.0,
                "util_mem": 40.0,
                "mem_used_bytes": 70 << 30,
                "mem_total_bytes": mem_total_bytes,
                "power_w": 600.0,
                "power_limit_w": 700.0,
                "temp_c": 60.0,
                "clock_event_reasons": 0,
                "ecc_uncorrected": 0,
                "processes": (),
                "lost": False,
            }
            for d in self._devices
        }
        self.hanging = False
        self.release = threading.Event()
        self.reads = 0
        self.closed = False
        self.pending_problems: list[ReadProblem] = []

    def set(self, index: int, **metrics: object) -> None:
        """Change what `read(index)` returns from now on."""
        if "pids" in metrics:
            pids = metrics.pop("pids")
            metrics["processes"] = tuple(GpuProcess(int(p), 1 << 30) for p in pids)  # type: ignore[attr-defined]  # an iterable of pids
        self.metrics[index].update(metrics)

    def set_all(self, **metrics: object) -> None:
        """Change every GPU."""
        for index in self.metrics:
            self.set(index, **dict(metrics))

    def init(self) -> NvmlStatus:
        if self.init_failure is not None:
            reason, detail = self.init_failure
            return NvmlStatus(reason, detail=detail)
        return NvmlStatus(None, driver=self.driver, devices=self._devices)

    def devices(self) -> tuple[DeviceInfo, ...]:
        return self._devices

    def read(self, index: int, ts: datetime) -> GpuSample:
        if self.hanging:
            self.release.wait()
        self.reads += 1
        device = self._devices[index]
        values = dict(self.metrics[index])
        if values.get("lost"):
            return GpuSample(ts=ts, index=index, uuid=device.uuid, name=device.name, lost=True)
        return GpuSample(ts=ts, index=index, uuid=device.uuid, name=device.name, **values)  # type: ignore[arg-type]  # metric names match GpuSample fields

    def problems(self) -> list[ReadProblem]:
        pending, self.pending_problems = self.pending_problems, []
        return pending

    def close(self) -> None:
        self.closed = True


# --- tail: a rule that records what it sees, a driver in a thread, watchers that fail -----------


class RecordingRule:
    """A rule that fires nothing and records every (source, line, text) it is shown, so tests
    can check that each line reached the engine exactly once."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, str]] = []
        self._lock = threading.Lock()

    def initial_state(self) -> dict[str, Any]:
        return {}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        rows = frame.select("source", "line", "text").rows()
        with self._lock:
            self.seen.extend(rows)
        return [], state

    def texts(self) -> list[str]:
        """The texts seen so far, in order."""
        with self._lock:
            return [text for _, _, text in self.seen]


def recording_spec(rule: Any, rule_id: str = "record") -> RuleSpec:
    """Wrap a Python rule object as a RuleSpec (for tests and library use)."""
    return RuleSpec(
        id=rule_id,
        type="python",
        severity=Severity.INFO,
        summary=f"{rule_id} at line {{line}}",
        resolved_summary=f"{rule_id} resolved at line {{line}}",
        fix="",
        params={},
        rule=rule,
        origin="<python>",
    )


@contextmanager
def running(driver: TailDriver) -> Iterator[TailDriver]:
    """Open a tail driver, run it in a thread, and stop, join and close it on exit."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            driver.run()
        except BaseException as exc:
            errors.append(exc)

    with driver:
        thread = threading.Thread(target=target, name="tail-driver", daemon=True)
        thread.start()
        try:
            yield driver
        finally:
            driver.stop()
            thread.join(timeout=30)
    if errors:
        raise errors[0]


class UnavailableWatcher:
    """A watcher factory for a machine whose inotify is exhausted: creating one fails."""

    def __init__(self, err: int = errno.ENOSPC) -> None:
        self.err = err

    def __call__(self, on_event: OnEvent) -> Watcher:
        raise OSError(self.err, os.strerror(self.err))


class DeafWatcher:
    """A watcher factory whose watcher is the real one, except that write events never come
    (an overflowed inotify queue): created, moved and deleted files are still heard of."""

    def __call__(self, on_event: OnEvent) -> Watcher:
        from logwatch.sources.inotify import default_watcher

        def structural_only(
            structural: bool, created: str | None = None, changed: str | None = None
        ) -> None:
            on_event(structural, created)

        return default_watcher(structural_only)


# --- Slack (issue 4; the server lives in logwatch/testing_slack.py) ------------------------------

from logwatch.testing.slack import FakeSlack as FakeSlack  # noqa: E402 - re-exported here
from logwatch.testing.slack import Fault as Fault  # noqa: E402 - re-exported here


class FailingStateFS(RealStateFS):
    """The real state file system, except that every write fails with errno `fail` while it is
    set (ENOSPC, EROFS: what a test cannot make a real disk do)."""

    def __init__(self, fail: int | None = None) -> None:
        self.fail = fail

    def _check(self, what: object) -> None:
        if self.fail is not None:
            raise OSError(self.fail, os.strerror(self.fail), str(what))

    def replace(self, path: Path, data: bytes) -> None:
        """Fail, or replace `path` for real."""
        self._check(path)
        super().replace(path, data)

    def append(self, fd: int, data: bytes) -> None:
        """Fail, or append for real."""
        self._check(fd)
        super().append(fd, data)

    def truncate(self, fd: int) -> None:
        """Fail, or truncate for real."""
        self._check(fd)
        super().truncate(fd)
