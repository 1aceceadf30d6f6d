"""The GPU side joined to a tail driver: NVML diagnosis on log alerts, GPU rules every round.

`GpuLink` is a `TailPlugin` (checkpointed as "gpu"): `observe` folds what the log says about each
run (start, pid, last step), `filter` enriches `nvml-disabled` / `gpu-metrics-missing` when NVML
works here (and says it once), `round` drains the sampler, runs the GPU rules with the log's stall
state and emits the sampler's own alerts, `start_events` are what starting NVML had to say.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import polars as pl

from logwatch.alerts import RESOLVED, AlertEvent, event_from_json
from logwatch.clock import Clock, SystemClock
from logwatch.gpu.enrich import NvmlDiagnosis, RunInfo, RunTracker
from logwatch.gpu.model import GpuReader, GpuSample, GpuSettings
from logwatch.gpu.monitor import GpuMonitor
from logwatch.gpu.procs import with_descendants
from logwatch.gpu.sampler import GpuStart, start_gpu
from logwatch.rules.loader import RuleSpec

if TYPE_CHECKING:
    from logwatch.drivers.plugins import DriverView


class GpuLink:
    """One per logwatch process: joins the GPU sampler and the GPU rules to the followed logs."""

    name = "gpu"

    def __init__(
        self, started: GpuStart, specs: Sequence[RuleSpec], clock: Clock | None = None
    ) -> None:
        self.started = started
        self.monitor = GpuMonitor(specs)
        self.diagnosis = NvmlDiagnosis(started.status)
        self.trackers: dict[str, RunTracker] = {}
        self.clock = clock or SystemClock()
        self._closed = False
        self.announced: dict[str, AlertEvent] = {}  # start notices already alerted, by fingerprint

    columns: frozenset[str] | None = frozenset({"source", "line", "run_start", "step", "ts", "pid"})

    def observe(self, frame: pl.DataFrame) -> None:
        """Fold parsed lines (one source's or many's) into each source's run facts."""
        if frame.is_empty():
            return
        one = frame.get_column("source").n_unique() == 1
        for part in [frame] if one else frame.partition_by("source", maintain_order=True):
            source = part.get_column("source")[0]
            tracker = self.trackers.setdefault(source, RunTracker())
            if part.get_column("run_start").any():
                self.diagnosis.restarted(source)
            tracker.update(part)

    def filter(self, event: AlertEvent) -> AlertEvent | None:
        """The NVML diagnosis for log alerts; everything else passes unchanged."""
        if event.status == RESOLVED:
            return event
        tracker = self.trackers.get(event.source)
        if tracker is None:
            return event
        return self.diagnosis.apply(event, tracker.info, self.clock.now())

    def round(self, driver: DriverView) -> list[AlertEvent]:
        """The GPU rules over the samples taken since the last round."""
        sampler = self.started.sampler
        if sampler is None:
            return []
        samples = sampler.drain()
        if samples.is_empty():
            return list(sampler.drain_events())
        logged = {t.info.pid for t in self.trackers.values() if t.info.pid is not None}
        events = self.monitor.process(
            samples,
            stalled_since=self._stalled_since(driver),
            run_pids=with_descendants(logged) or None,
            step=self._last_step(),
        )
        return [*events, *sampler.drain_events()]

    def start_events(self) -> list[AlertEvent]:
        """What starting NVML had to say (e.g. `logwatch-gpu-unavailable`), as a lifecycle over
        starts: a notice fires once per state directory while it stays true, and resolves when
        a later start no longer says it."""
        now = {event.fingerprint: event for event in self.started.events}
        fired = [event for fp, event in now.items() if fp not in self.announced]
        over = [
            replace(
                event, status=RESOLVED, ts=self.clock.now(), summary=f"{event.rule}: no longer true"
            )
            for fp, event in self.announced.items()
            if fp not in now
        ]
        self.announced = now
        return [*over, *fired]

    def latest(self) -> tuple[GpuSample, ...]:
        """The sampler's last good round (empty when NVML is off or unavailable here)."""
        sampler = self.started.sampler
        return sampler.latest() if sampler is not None else ()

    def run_pids(self) -> dict[str, int]:
        """The pid each followed log's `run start:` line announced, by source."""
        trackers = list(self.trackers.items())  # the driver's thread may add one meanwhile
        return {source: t.info.pid for source, t in trackers if t.info.pid is not None}

    def _stalled_since(self, driver: DriverView) -> datetime | None:
        """When the run's logs went quiet: the latest stall among followed logs, only when every
        log that was receiving lines is stalled (one live log means the run is not hung)."""
        stalls = list(driver.stall_states().values())
        if not stalls or any(since is None for since in stalls):
            return None
        return max(since for since in stalls if since is not None)

    def _last_step(self) -> int | None:
        infos = [t.info for t in self.trackers.values() if t.info.last_step is not None]
        if not infos:
            return None
        latest = max(infos, key=lambda info: (info.last_ts is not None, info.last_ts or 0))
        return latest.last_step

    def export_state(self) -> dict[str, Any]:
        """What a restarted tail needs: the GPU rules' state, each run's facts, what was said."""
        return {
            "monitor": self.monitor.export_state(),
            "runs": {source: _run_json(t.info) for source, t in self.trackers.items()},
            "said": sorted(self.diagnosis.said),
            "announced": [event.to_json() for event in self.announced.values()],
        }

    def import_state(self, data: Any) -> None:
        """Restore `export_state`'s data; ValueError when it is malformed."""
        try:
            runs = {str(source): _run_info(raw) for source, raw in dict(data["runs"]).items()}
            said = {str(source) for source in data["said"]}
            monitor = data["monitor"]
            announced = [event_from_json(raw) for raw in data.get("announced", [])]
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"malformed GPU state: {exc!r}") from None
        self.monitor.import_state(monitor)
        for source, info in runs.items():
            self.trackers.setdefault(source, RunTracker()).info = info
        self.diagnosis.said = said
        self.announced = {event.fingerprint: event for event in announced}

    def close(self) -> None:
        """Stop the sampler; idempotent (the driver closes its plugins, so may the caller)."""
        if self._closed:
            return
        self._closed = True
        if self.started.sampler is not None:
            self.started.sampler.close()


OFF_HINT = ", or pass `--gpu off`"
"""Added to the fix of a live run's NVML notice: a host without GPUs on purpose turns it off."""


def start_gpu_link(
    settings: GpuSettings,
    reader: GpuReader,
    specs: Sequence[RuleSpec],
    status: Callable[[str], None],
) -> GpuLink | None:
    """The GPU side of a live run per the settings (`tail`, `top`): NVML started through
    `reader`, its status said through `status`; None when the settings turn it off."""
    started = start_gpu(settings, reader, off_hint=OFF_HINT)
    if started.status is None:
        status("GPUs: off (--gpu off or [gpu] mode)")
    elif started.status.available:
        status(f"GPUs: {started.status.line()}")
    else:  # a host without GPUs on purpose: how to stop hearing it
        status(f"GPUs: {started.status.line()}{OFF_HINT}")
    if settings.mode == "off":
        return None
    return GpuLink(started, specs)


def _run_json(info: RunInfo) -> dict[str, Any]:
    return {
        "started": info.started.isoformat() if info.started else None,
        "pid": info.pid,
        "last_step": info.last_step,
        "last_ts": info.last_ts.isoformat() if info.last_ts else None,
    }


def _run_info(raw: Mapping[str, Any]) -> RunInfo:
    def when(value: Any) -> datetime | None:
        return datetime.fromisoformat(value) if value else None

    return RunInfo(
        started=when(raw["started"]),
        pid=None if raw["pid"] is None else int(raw["pid"]),
        last_step=None if raw["last_step"] is None else int(raw["last_step"]),
        last_ts=when(raw["last_ts"]),
    )
