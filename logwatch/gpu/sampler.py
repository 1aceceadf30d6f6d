"""The GPU sampler: one per logwatch process, on its own thread; NVML bounded by a timeout.

`start_gpu` turns `[gpu]` settings into a running sampler, or into the loud statement of why
there is none (auto) or an error (required). Never a silent fallback.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from logwatch.alerts import FIRING, RESOLVED, AlertEvent, Severity, Status
from logwatch.clock import Clock, SystemClock
from logwatch.errors import GpuUnavailableError
from logwatch.gpu.frames import empty_gpu_frame, samples_to_frame
from logwatch.gpu.model import (
    GpuReader,
    GpuSample,
    GpuSettings,
    GpuSnapshot,
    NvmlReason,
    NvmlStatus,
    ReadProblem,
)

GPU_UNAVAILABLE = "logwatch-gpu-unavailable"
GPU_HUNG = "logwatch-gpu-hung"
GPU_ERROR = "logwatch-gpu-error"
SOURCE = "nvml"


@dataclass(slots=True)
class _Call:
    """One NVML call on its own daemon thread, so a hung driver cannot block logwatch."""

    thread: threading.Thread
    result: list[object] = field(default_factory=list)


def _call(target: object, name: str) -> _Call:
    box: list[object] = []

    def run() -> None:
        try:
            box.append(target() if callable(target) else None)
        except BaseException as exc:  # handed to the caller, which decides
            box.append(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    call = _Call(thread, box)
    thread.start()
    return call


class GpuSampler:
    """Reads every device each `interval_s`; keeps the last good round; reports problems once."""

    def __init__(
        self,
        reader: GpuReader,
        *,
        interval_s: float = 5.0,
        timeout_s: float | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.reader = reader
        self.interval_s = interval_s
        self.timeout_s = timeout_s if timeout_s is not None else max(1.0, min(interval_s, 10.0))
        self.clock = clock or SystemClock()
        self.status: NvmlStatus | None = None
        self._lock = threading.Lock()
        self._pending: list[GpuSample] = []
        self._latest: tuple[GpuSample, ...] = ()
        self._events: list[AlertEvent] = []
        self._inflight: _Call | None = None
        self._hung_since: datetime | None = None
        self._stop = threading.Event()
        self._loop: threading.Thread | None = None
        self.rounds = 0

    def init(self) -> NvmlStatus:
        """nvmlInit and the device list, bounded by the timeout (init can hang too)."""
        call = _call(self.reader.init, "logwatch-nvml-init")
        call.thread.join(self.timeout_s)
        if call.thread.is_alive():
            self._inflight = call
            status = NvmlStatus(NvmlReason.HUNG, detail=f"nvmlInit took over {self.timeout_s:g}s")
        else:
            result = call.result[0]
            if isinstance(result, BaseException):
                status = NvmlStatus(NvmlReason.OTHER, detail=f"{type(result).__name__}: {result}")
            else:
                status = result  # type: ignore[assignment]  # reader.init returns NvmlStatus
        self.status = status
        return status

    def start(self) -> None:
        """Sample on a background thread until `close`."""
        self._loop = threading.Thread(target=self._run, name="logwatch-gpu-sampler", daemon=True)
        self._loop.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.interval_s)

    def poll(self) -> bool:
        """One sampling round, bounded by the timeout; True when it produced samples."""
        if self.status is None or not self.status.available:
            return False
        if self._inflight is not None and self._inflight.thread.is_alive():
            return False  # the last round still hangs: keep the last good sample
        if self._inflight is not None:
            self._inflight = None  # a late round answered; its samples are stale, drop them
        ts = self.clock.now()
        call = _call(lambda: self._round(ts), "logwatch-nvml-poll")
        call.thread.join(self.timeout_s)
        if call.thread.is_alive():
            self._inflight = call
            self._hung(ts)
            return False
        result = call.result[0] if call.result else None
        if isinstance(result, BaseException):
            self._problem(
                ReadProblem(-1, "poll", f"{type(result).__name__}: {result}", "error"), ts
            )
            return False
        samples: tuple[GpuSample, ...] = result  # type: ignore[assignment]  # _round's value
        self._answered(ts)
        with self._lock:
            self._latest = samples
            self._pending.extend(samples)
            self.rounds += 1
        return True

    def _round(self, ts: datetime) -> tuple[GpuSample, ...]:
        samples = tuple(self.reader.read(d.index, ts) for d in self.reader.devices())
        for problem in self.reader.problems():
            self._problem(problem, ts)
        return samples

    def _hung(self, ts: datetime) -> None:
        if self._hung_since is None:
            self._hung_since = ts
            self._queue(
                sampler_event(
                    GPU_HUNG,
                    Severity.WARNING,
                    FIRING,
                    ts,
                    f"NVML did not answer within {self.timeout_s:g}s; GPU rules use the last good sample until it does",
                    fix="check the driver (nvidia-smi may hang too) and enable persistence mode (nvidia-smi -pm 1)",
                )
            )

    def _answered(self, ts: datetime) -> None:
        if self._hung_since is not None:
            self._hung_since = None
            self._queue(
                sampler_event(GPU_HUNG, Severity.WARNING, RESOLVED, ts, "NVML answers again")
            )

    def _problem(self, problem: ReadProblem, ts: datetime) -> None:
        if problem.kind != "error":
            return  # unsupported: the metric is null from now on; lost: the gpu-lost rule says it
        self._queue(
            sampler_event(
                GPU_ERROR,
                Severity.INFO,
                FIRING,
                ts,
                f"NVML error on GPU {problem.index} reading {problem.metric}: {problem.error}; "
                "the metric is null while it fails (reported once)",
                labels={"gpu": str(problem.index), "metric": problem.metric},
            )
        )

    def _queue(self, event: AlertEvent) -> None:
        with self._lock:
            self._events.append(event)

    def drain(self) -> pl.DataFrame:
        """Samples taken since the last drain, as a GPU frame."""
        with self._lock:
            pending, self._pending = self._pending, []
        return samples_to_frame(pending) if pending else empty_gpu_frame()

    def latest(self) -> tuple[GpuSample, ...]:
        """The last good round (kept while NVML hangs)."""
        with self._lock:
            return self._latest

    def drain_events(self) -> list[AlertEvent]:
        """The sampler's own alerts (NVML hung / answered, unexpected errors) since last call."""
        with self._lock:
            events, self._events = self._events, []
        return events

    @property
    def hung(self) -> bool:
        """Whether NVML is hanging now."""
        return self._hung_since is not None

    def close(self) -> None:
        """Stop sampling and shut NVML down (not while a call hangs in it)."""
        self._stop.set()
        if self._loop is not None:
            self._loop.join(self.timeout_s + 1.0)
            self._loop = None
        if self._inflight is None or not self._inflight.thread.is_alive():
            self.reader.close()


@dataclass(frozen=True, slots=True)
class GpuStart:
    """What starting the GPU side gave: the status to print on stderr, the sampler (None when
    off or unavailable), and alert events to emit (`logwatch-gpu-unavailable`)."""

    status: NvmlStatus | None
    sampler: GpuSampler | None
    events: tuple[AlertEvent, ...] = ()


def start_gpu(
    settings: GpuSettings,
    reader: GpuReader,
    *,
    clock: Clock | None = None,
    run: bool = True,
    off_hint: str = "",
) -> GpuStart:
    """Start sampling per the `[gpu]` settings; `required` raises when NVML does not work.
    `off_hint` ends the unavailable notice's fix (how to turn the GPU side off)."""
    if settings.mode == "off":
        return GpuStart(None, None)
    sampler = GpuSampler(reader, interval_s=settings.interval_s, clock=clock)
    status = sampler.init()
    if status.available:
        if run:
            sampler.start()
        return GpuStart(status, sampler)
    sampler.close()
    if settings.mode == "required":
        raise GpuUnavailableError(f'{status.line()} ([gpu] mode = "required")')
    return GpuStart(status, None, (unavailable_event(status, sampler.clock.now(), off_hint),))


def unavailable_event(status: NvmlStatus, ts: datetime, off_hint: str = "") -> AlertEvent:
    """The one info alert saying GPU rules are off here, why, and the fix (`off_hint` after)."""
    reason = status.reason.name.lower() if status.reason is not None else "ok"
    return sampler_event(
        GPU_UNAVAILABLE,
        Severity.INFO,
        FIRING,
        ts,
        f"{status.line().split('; fix:')[0]}: GPU rules are off for this logwatch",
        fix=status.fix + off_hint,
        labels={"reason": reason},
    )


def sampler_event(
    rule: str,
    severity: Severity,
    status: Status,
    ts: datetime,
    summary: str,
    *,
    fix: str = "",
    labels: dict[str, str] | None = None,
) -> AlertEvent:
    """An alert about the GPU side itself (NVML unavailable, hung, erroring): no log line."""
    return AlertEvent(
        rule=rule,
        severity=severity,
        status=status,
        source=SOURCE,
        line=0,
        ts=ts,
        step=None,
        value=None,
        summary=summary,
        fix=fix,
        labels=labels or {},
    )


def take_snapshot(reader: GpuReader, *, clock: Clock | None = None) -> GpuSnapshot:
    """`logwatch gpu`: init, one round, shut down."""
    sampler = GpuSampler(reader, clock=clock)
    status = sampler.init()
    try:
        if status.available and sampler.poll():
            return GpuSnapshot(status, sampler.latest())
        return GpuSnapshot(status)
    finally:
        sampler.close()
