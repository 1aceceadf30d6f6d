"""Say what the log cannot: when the log says GPU telemetry is off but NVML works on this host,
the `nvml-disabled` / `gpu-metrics-missing` alerts get the diagnosis, the fix, and the cost of
restarting now. Also the run facts that needs (start time, pid, last step), folded from frames.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime

import polars as pl

from logwatch.alerts import FIRING, AlertEvent
from logwatch.durations import format_duration
from logwatch.gpu.model import NvmlStatus

ENRICHED_RULES = ("nvml-disabled", "gpu-metrics-missing")
INSTALL_FIX = "uv pip install nvidia-ml-py"
_OTHER_CAUSE = re.compile(
    r"(?i)version mismatch|LibRmVersionMismatch|libnvidia-ml\.so|LibraryNotFound|Shared Library Not"
    r"|Unknown Error|NoPermission|Insufficient Permissions|DriverNotLoaded|Driver Not Loaded"
    r"|Can't initialize NVML"
)
"""What an `nvml-disabled` line says when the cause is not a missing nvidia-ml-py: the rule's own
case gave that cause's fix, and "install nvidia-ml-py" would be wrong (a driver mismatch needs a
reboot, a container without its driver needs the GPUs attached)."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What the log says about the run so far."""

    started: datetime | None = None
    pid: int | None = None
    last_step: int | None = None
    last_ts: datetime | None = None


class RunTracker:
    """Folds parsed log frames (one source) into `RunInfo`; a new `run start:` starts over."""

    def __init__(self) -> None:
        self.info = RunInfo()

    def update(self, frame: pl.DataFrame) -> RunInfo:
        """Fold one batch in; returns the run info after it."""
        starts = frame.filter(pl.col("run_start").fill_null(False))
        if not starts.is_empty():
            last_start = starts.row(-1, named=True)
            frame = frame.filter(pl.col("line") >= last_start["line"])
            self.info = RunInfo(started=last_start["ts"], pid=last_start["pid"])
        agg = frame.select(
            pl.col("ts").drop_nulls().first().alias("first_ts"),
            pl.col("ts").drop_nulls().last().alias("last_ts"),
            pl.col("step").drop_nulls().last().alias("last_step"),
        ).row(0, named=True)
        info = self.info
        self.info = RunInfo(
            started=info.started or agg["first_ts"],
            pid=info.pid,
            last_step=agg["last_step"] if agg["last_step"] is not None else info.last_step,
            last_ts=agg["last_ts"] or info.last_ts,
        )
        return self.info


def restart_cost(run: RunInfo, now: datetime | None) -> str:
    """`the run has been going 2h13m and is at step 1400`, from what is known."""
    parts = []
    end = now or run.last_ts
    if run.started is not None and end is not None and end >= run.started:
        parts.append(f"has been going {format_duration((end - run.started).total_seconds())}")
    if run.last_step is not None:
        parts.append(f"is at step {run.last_step}")
    if not parts:
        return "restarting now costs whatever the run has done so far"
    return f"restarting now costs that progress unless it resumes from a checkpoint: the run {' and '.join(parts)}"


def enrich(
    event: AlertEvent, gpu_status: NvmlStatus | None, run_info: RunInfo, now: datetime | None = None
) -> AlertEvent:
    """The event with the NVML diagnosis when it applies (a firing nvml-disabled /
    gpu-metrics-missing while NVML works here); any other event unchanged."""
    if event.rule not in ENRICHED_RULES or event.status != FIRING:
        return event
    if gpu_status is None or not gpu_status.available:
        return event
    if event.rule == "nvml-disabled" and _OTHER_CAUSE.search(event.text):
        return event
    what = (
        "the log says NVML is off"
        if event.rule == "nvml-disabled"
        else "the log's telemetry snapshots carry no gpu/ metrics"
    )
    summary = (
        f"{what}, but NVML works here: {gpu_status.hardware()}; the training environment "
        f"lacks nvidia-ml-py (line {event.line})"
    )
    fix = (
        f"Install it into the run's environment ({INSTALL_FIX}) and restart the run; "
        f"{restart_cost(run_info, now or event.ts)}. logwatch reads the GPUs itself meanwhile."
    )
    # The labels stay as they are: they are the alert's identity, which its resolve must match.
    return replace(event, summary=summary, fix=fix)


class NvmlDiagnosis:
    """Per source: enrich the NVML alerts, and say it once: `gpu-metrics-missing` after an
    `nvml-disabled` of the same run is the same news and is inhibited."""

    def __init__(self, gpu_status: NvmlStatus | None) -> None:
        self.gpu_status = gpu_status
        self.said: set[str] = set()

    def apply(
        self, event: AlertEvent, run_info: RunInfo, now: datetime | None = None
    ) -> AlertEvent | None:
        """The event to emit (enriched), or None when it repeats what was said."""
        if event.rule not in ENRICHED_RULES or event.status != FIRING:
            return event
        if event.rule == "gpu-metrics-missing" and event.source in self.said:
            return None
        if event.rule == "nvml-disabled":
            self.said.add(event.source)
        return enrich(event, self.gpu_status, run_info, now)

    def restarted(self, source: str) -> None:
        """A new run began in the source: its NVML news is new again."""
        self.said.discard(source)
