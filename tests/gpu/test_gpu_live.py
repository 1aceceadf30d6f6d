"""Live GPU scenarios against FakeGpuReader: the sampler, the GPU rules with the log's signals,
and the NVML diagnosis of the train_slammed4.log story."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import polars as pl
import pytest

from logwatch.alerts import AlertEvent
from logwatch.engine import Engine
from logwatch.errors import GpuUnavailableError
from logwatch.gpu.enrich import NvmlDiagnosis, RunInfo, RunTracker, restart_cost
from logwatch.gpu.model import GpuSettings, NvmlReason, NvmlStatus
from logwatch.gpu.monitor import GpuMonitor
from logwatch.gpu.sampler import GpuSampler, start_gpu
from logwatch.parse import parse_lines
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.testing import FakeClock, FakeGpuReader
from tests.support.paths import SAMPLES

RULES = load_rules([builtin_rules_dir()])
T0 = datetime(2026, 11, 28, 14, 0, 0)


def _sampler(reader: FakeGpuReader, clock: FakeClock) -> GpuSampler:
    sampler = GpuSampler(reader, interval_s=5.0, timeout_s=2.0, clock=clock)
    assert sampler.init().available
    return sampler


def _run(
    reader: FakeGpuReader,
    minutes: float,
    *,
    stalled_after_s: float | None = None,
    run_pids: set[int] | None = None,
    changes: dict[int, dict[str, object]] | None = None,
) -> list[AlertEvent]:
    """Sample every 5 s of fake time for `minutes`, feeding the monitor in 30 s batches."""
    clock = FakeClock(T0)
    sampler, monitor = _sampler(reader, clock), GpuMonitor(RULES)
    stalled = None if stalled_after_s is None else T0 + timedelta(seconds=stalled_after_s)
    events: list[AlertEvent] = []
    for tick in range(int(minutes * 12)):
        for index, metrics in (changes or {}).get(tick, {}).items():  # type: ignore[attr-defined]
            reader.set(index, **metrics)
        sampler.poll()
        clock.advance(5)
        if tick % 6 == 5:
            events += monitor.process(sampler.drain(), stalled_since=stalled, run_pids=run_pids)
    sampler.close()
    return events


def _brief(events: list[AlertEvent]) -> list[tuple[str, str, dict[str, str]]]:
    return [(e.rule, e.status, dict(e.labels)) for e in events]


def test_hung_run_log_stalled_and_gpus_idle() -> None:
    """Log stalled and every GPU of the run idle for 2 minutes: one critical run-hung, no gpu-idle."""
    reader = FakeGpuReader(count=2)
    reader.set_all(util_gpu=1.0)
    events = _run(reader, 5, stalled_after_s=60)
    assert _brief(events) == [("run-hung", "firing", {})]
    [hung] = events
    assert hung.severity.label == "critical"
    assert hung.ts == T0 + timedelta(seconds=180)
    assert "py-spy dump" in hung.fix


def test_busy_but_quiet_run_is_not_hung() -> None:
    """Log stalled but the GPUs busy (a long eval, a checkpoint): no GPU alert at all."""
    reader = FakeGpuReader(count=2)
    assert _run(reader, 6, stalled_after_s=30) == []


def test_gpu_idle_only_for_gpus_the_run_uses() -> None:
    """With the run's pid known, only the idle GPU holding one of its processes alerts."""
    reader = FakeGpuReader(count=3)
    reader.set(0, util_gpu=2.0, pids=[999])
    reader.set(1, util_gpu=2.0, pids=[41626])
    reader.set(2, util_gpu=96.0, pids=[41626])
    events = _run(reader, 7, run_pids={41626})
    assert _brief(events) == [("gpu-idle", "firing", {"gpu": "1"})]
    assert events[0].ts == T0 + timedelta(minutes=5)


def test_gpu_idle_without_pid_watches_all_gpus_and_resolves() -> None:
    """Without a pid every GPU counts; the alert resolves when the GPU works again."""
    reader = FakeGpuReader(count=2)
    reader.set(1, util_gpu=4.0)
    events = _run(reader, 8, changes={84: {1: {"util_gpu": 90.0}}})
    assert _brief(events) == [
        ("gpu-idle", "firing", {"gpu": "1"}),
        ("gpu-idle", "resolved", {"gpu": "1"}),
    ]


def test_thermal_clock_events_make_gpu_hot_but_gpu_idle_reason_does_not() -> None:
    """HwThermalSlowdown for 2 minutes fires gpu-hot at normal temperature; GpuIdle alone never."""
    reader = FakeGpuReader(count=2)
    reader.set(0, clock_event_reasons=0x40)
    reader.set(1, clock_event_reasons=0x1)
    events = _run(reader, 3)
    assert _brief(events) == [("gpu-hot", "firing", {"gpu": "0"})]


def test_memory_high_and_ecc_rise() -> None:
    """Memory above 97% for 2 minutes warns; a rising uncorrected ECC count is critical, once."""
    reader = FakeGpuReader(count=2, mem_total_bytes=100 << 30)
    reader.set(0, mem_used_bytes=98 << 30)
    changes = {6: {1: {"ecc_uncorrected": 1}}, 12: {1: {"ecc_uncorrected": 3}}}
    events = _run(reader, 3, changes=changes)
    assert sorted(_brief(events), key=str) == sorted(
        [("gpu-ecc", "firing", {"gpu": "1"}), ("gpu-memory-high", "firing", {"gpu": "0"})],
        key=str,
    )
    ecc = next(e for e in events if e.rule == "gpu-ecc")
    assert ecc.severity.label == "critical" and ecc.value == 1.0


def test_live_gpu_lost_keeps_the_log_rules_id() -> None:
    """NVML GpuIsLost gives a critical gpu-lost (the log rule's id and fix) labelled via=nvml."""
    reader = FakeGpuReader(count=2)
    events = _run(reader, 1, changes={3: {1: {"lost": True}}})
    assert _brief(events) == [("gpu-lost", "firing", {"gpu": "1", "via": "nvml"})]
    log_rule = next(s for s in RULES if s.id == "gpu-lost")
    assert events[0].severity.label == "critical" and events[0].fix == log_rule.fix


def test_hung_nvml_is_reported_once_and_the_last_sample_kept() -> None:
    """A poll that does not answer in time: one warning, the last good sample stays, then resolve."""
    reader = FakeGpuReader(count=1)
    sampler = GpuSampler(reader, timeout_s=0.05, clock=FakeClock(T0))
    sampler.init()
    assert sampler.poll()
    good = sampler.latest()
    reader.hanging = True
    try:
        assert not sampler.poll() and not sampler.poll()
        assert sampler.hung and sampler.latest() == good
        hung_events = sampler.drain_events()
    finally:
        reader.hanging = False
        reader.release.set()
    while sampler._inflight is not None and sampler._inflight.thread.is_alive():
        sampler._inflight.thread.join(1.0)
    assert sampler.poll()
    assert [(e.rule, e.status) for e in hung_events] == [("logwatch-gpu-hung", "firing")]
    assert [(e.rule, e.status) for e in sampler.drain_events()] == [
        ("logwatch-gpu-hung", "resolved")
    ]
    sampler.close()


def test_sampler_thread_samples_and_stops() -> None:
    """start_gpu in auto mode with NVML working runs the sampler thread until close."""
    reader = FakeGpuReader(count=2)
    started = start_gpu(GpuSettings(mode="auto", interval_s=0.5), reader)
    assert started.sampler is not None and started.events == ()
    sampler = started.sampler
    while sampler.rounds < 1:
        sampler._stop.wait(0.01)
    sampler.close()
    frame = sampler.drain()
    assert frame.height >= 2 and set(frame.get_column("gpu")) == {0, 1}
    assert reader.closed


@pytest.mark.parametrize("reason", list(NvmlReason))
def test_nvml_unavailable_each_way_is_loud(reason: NvmlReason) -> None:
    """Every reason: auto gives the status and one info alert with the fix; required raises."""
    reader = FakeGpuReader(init_failure=(reason, "detail"))
    started = start_gpu(GpuSettings(mode="auto"), reader)
    assert started.sampler is None and started.status is not None
    assert started.status.line().startswith(f"NVML unavailable: {reason.value} (detail); fix: ")
    assert [(e.rule, e.severity.label, e.fix) for e in started.events] == [
        ("logwatch-gpu-unavailable", "info", started.status.fix)
    ]
    with pytest.raises(GpuUnavailableError, match=re.escape(reason.value)):
        start_gpu(GpuSettings(mode="required"), FakeGpuReader(init_failure=(reason, "detail")))


def test_gpu_off_starts_nothing() -> None:
    """mode off: no NVML call, no status, no alert."""
    reader = FakeGpuReader()
    started = start_gpu(GpuSettings(mode="off"), reader)
    assert (started.status, started.sampler, started.events) == (None, None, ())
    assert reader.reads == 0


def test_settings_parse_rejects_bad_values() -> None:
    """Config values are checked with the accepted choices in the message."""
    assert GpuSettings.parse("required", "10s") == GpuSettings("required", 10.0)
    with pytest.raises(ValueError, match="auto, required, off"):
        GpuSettings.parse("sometimes")
    with pytest.raises(ValueError, match=r"below 0\.5s"):
        GpuSettings.parse("auto", "100ms")


def _slammed4_story(status: NvmlStatus | None) -> list[AlertEvent]:
    """Tail-like: the log in small batches through the engine, events through the diagnosis."""
    lines = (SAMPLES / "dflash" / "train_slammed4.log").read_text().splitlines()
    engine, tracker, diagnosis = Engine(RULES), RunTracker(), NvmlDiagnosis(status)
    out: list[AlertEvent] = []
    for start in range(0, len(lines), 7):
        frame = parse_lines(
            pl.Series(lines[start : start + 7]), source="train_slammed4.log", first_line=start + 1
        )
        run = tracker.update(frame)
        for event in engine.process(frame):
            emitted = diagnosis.apply(event, run)
            if emitted is not None:
                out.append(emitted)
    return out


def test_slammed4_story_with_working_nvml_gives_one_enriched_alert() -> None:
    """NVML works here and the log says it is off: one nvml-disabled with the diagnosis and fix."""
    status = FakeGpuReader(count=8).init()
    [event] = _slammed4_story(status)
    assert (event.rule, event.line, event.severity.label) == ("nvml-disabled", 3, "warning")
    assert event.summary == (
        "the log says NVML is off, but NVML works here: 8x NVIDIA H200, driver 580.65.06; "
        "the training environment lacks nvidia-ml-py (line 3)"
    )
    assert event.fix.startswith(
        "Install it into the run's environment (uv pip install nvidia-ml-py) and restart the run; "
        "restarting now costs that progress unless it resumes from a checkpoint: the run has been going 1s"
    )


def test_slammed4_story_without_nvml_here_is_not_enriched() -> None:
    """Where NVML does not work either, the log rule's own text stands (still said once)."""
    status = NvmlStatus(NvmlReason.LIBRARY_NOT_FOUND)
    [event] = _slammed4_story(status)
    assert event.rule == "nvml-disabled" and "NVML works here" not in event.summary


def test_restart_cost_names_duration_and_last_step() -> None:
    """The cost of restarting: how long the run has gone and its last step."""
    run = RunInfo(started=T0, pid=41626, last_step=1400)
    assert restart_cost(run, T0 + timedelta(hours=2, minutes=13)) == (
        "restarting now costs that progress unless it resumes from a checkpoint: "
        "the run has been going 2h13m and is at step 1400"
    )


def test_run_tracker_reads_pid_and_restarts() -> None:
    """The tracker takes the pid from the run header and starts over at a new `run start:`."""
    text = [
        "2026-11-28 14:02:03,118 INFO [train] run start: run_id=a pid=41626 gpus=8",
        "2026-11-28 14:02:08,935 INFO [train] step 10/200000 | loss 4.0667",
        "2026-11-28 15:00:00,000 INFO [train] run start: run_id=b pid=50000 gpus=8",
    ]
    tracker = RunTracker()
    first = tracker.update(parse_lines(pl.Series(text[:2]), source="s", first_line=1))
    second = tracker.update(parse_lines(pl.Series(text[2:]), source="s", first_line=3))
    assert (first.pid, first.last_step, first.started) == (
        41626,
        10,
        datetime(2026, 11, 28, 14, 2, 3, 118000),
    )
    assert (second.pid, second.last_step) == (50000, None)
