"""Tail and replay share one engine: same alerts, history caught up, wall-clock rules, bad rules."""

from __future__ import annotations

import random
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from logwatch.drivers import tail_rounds
from logwatch.drivers.plugins import Plugin
from logwatch.drivers.replay import replay
from logwatch.drivers.runner import tail_driver
from logwatch.drivers.tail_options import TailOptions
from logwatch.engine import Engine
from logwatch.rules.base import Transition
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.sinks.base import ListSink
from logwatch.testing import recording_spec, running
from tests.support.paths import SAMPLES
from tests.support.placement import LATE_HOST, comparable
from tests.support.samples import sample_logs
from tests.support.tailkit import BUILTIN, Tail, numbered, replayed_as

DFLASH = SAMPLES / "dflash"
LIVE = load_rules([builtin_rules_dir() / "live.toml"])


@pytest.mark.parametrize("sample", sample_logs(), ids=lambda p: str(p.relative_to(SAMPLES)))
def test_chunked_writes_give_the_alerts_replay_gives(tmp_path: Path, sample: Path) -> None:
    """A log written in random-sized chunks while tailed yields exactly replay's alert events
    (every annotated sample: DFlash runs and each trainer's excerpt, progress bars included),
    once the file has been quiet for run-crashed's quiet_after."""
    data = sample.read_bytes()
    chunks, rng, at = [], random.Random(sample.name), 0
    while at < len(data):
        size = rng.randint(1, 700)
        chunks.append(data[at : at + size])
        at += size
    tail = Tail(tmp_path, rules=BUILTIN)
    log = tmp_path / "train.log"
    with running(tail.driver) as driver, open(log, "ab", buffering=0) as out:
        for chunk in chunks:
            out.write(chunk)
            if rng.random() < 0.3:
                driver.sync()
        driver.sync()
        tail.settle()
    expected = replayed_as(sample, log)
    assert expected or sample.name == "train_healthy.log"  # the one sample with no alerts
    late = sample.name in LATE_HOST
    assert comparable(tail.sink.events, late_host=late) == comparable(expected, late_host=late)
    assert [line for _, line, _ in tail.rec.seen] == list(range(1, data.count(b"\n") + 1))


def test_catch_up_emits_only_the_alerts_still_firing(tmp_path: Path) -> None:
    """Started on a finished run, tail reports the NVML warning of line 3 and the telemetry one
    still firing, once each, with their original lines; a new line then evaluates live."""
    shutil.copy(DFLASH / "train_slammed4.log", tmp_path / "train.log")
    tail = Tail(tmp_path, rules=BUILTIN)
    with running(tail.driver) as driver:
        driver.sync()
        assert tail.alerts() == [
            (3, "nvml-disabled", "firing"),
            (25, "gpu-metrics-missing", "firing"),
        ]
        assert "NVML" in tail.sink.events[0].text
        with open(tmp_path / "train.log", "ab") as out:
            out.write(b"2026-11-28 15:00:00,000 INFO [train] step 2000 | loss nan\n")
        driver.sync()
    assert tail.alerts()[2:] == [(92, "nan-loss", "firing")]


def test_catch_up_does_not_report_a_nan_that_recovered(tmp_path: Path) -> None:
    """Of train_nan's two NaN episodes only the unresolved second one is still news."""
    shutil.copy(DFLASH / "train_nan.log", tmp_path / "train.log")
    tail = Tail(tmp_path, rules=BUILTIN)
    with running(tail.driver) as driver:
        driver.sync()
    assert tail.alerts() == [(140, "nan-loss", "firing")]


def test_from_beginning_emits_the_whole_history(tmp_path: Path) -> None:
    """--from-beginning reports every alert event of the history, as replay does."""
    log, sample = tmp_path / "train.log", DFLASH / "train_nan.log"
    shutil.copy(sample, log)
    tail = Tail(tmp_path, rules=BUILTIN, start="beginning")
    with running(tail.driver) as driver:
        driver.sync()
        tail.settle()  # the RuntimeError the log ends on: run-crashed, once the file is quiet
    assert tail.alerts() == [(e.line, e.rule, e.status) for e in replayed_as(sample, log)]


def test_many_files_caught_up_together_alert_as_each_replayed(tmp_path: Path) -> None:
    """Every annotated sample present at start (their histories parsed in shared blocks) gets,
    file by file, exactly the alert events replay gives it alone."""
    logs: dict[Path, Path] = {}
    for n, sample in enumerate(sample_logs()):
        logs[tmp_path / f"{n:02}-{sample.name}"] = sample
        shutil.copy(sample, tmp_path / f"{n:02}-{sample.name}")
    tail = Tail(tmp_path, rules=BUILTIN, patterns=("*.log",), start="beginning")
    with running(tail.driver) as driver:
        driver.sync()
        tail.settle()  # logs that end on a traceback: run-crashed, once they are quiet
    got = [(e.source, e.line, e.rule, e.status) for e in tail.sink.events]
    want = [
        (e.source, e.line, e.rule, e.status)
        for log, sample in logs.items()
        for e in replayed_as(sample, log)
        if e.rule != "root-cause"  # the whole replay's verdict, not a rule's: tail has none
    ]
    assert len(logs) > 5 and len(want) > 10
    assert sorted(got) == sorted(want)


def test_from_end_skips_the_history_but_keeps_line_numbers(tmp_path: Path) -> None:
    """--from-end evaluates nothing already written; the next line gets its true number."""
    log = tmp_path / "train.log"
    log.write_bytes(numbered(1, 100) + b"seq=101 partial")
    tail = Tail(tmp_path, start="end")
    with running(tail.driver) as driver:
        driver.sync()
        assert tail.rec.seen == []
        with open(log, "ab") as out:
            out.write(b" end\n" + numbered(102, 102))
        driver.sync()
    assert [(line, text) for _, line, text in tail.rec.seen] == [
        (101, "seq=101 partial end"),
        (102, "seq=102"),
    ]


class _Boom:
    """A rule that raises on lines containing BOOM."""

    def initial_state(self) -> dict[str, Any]:
        return {}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        if frame.get_column("text").str.contains("BOOM").any():
            raise RuntimeError("kaboom")
        return [], state


def test_a_raising_rule_is_reported_once_and_the_rest_keeps_working(tmp_path: Path) -> None:
    """A rule that raises is switched off for that file with one message; the reader and the
    other rules go on (a NaN after it still alerts, every line is still seen)."""
    rules = [recording_spec(_Boom(), "boom"), *BUILTIN]
    tail = Tail(tmp_path, rules=rules)
    with running(tail.driver) as driver, open(tmp_path / "a.log", "ab", buffering=0) as out:
        out.write(b"seq=1 BOOM\n")
        driver.sync()
        out.write(numbered(2, 50) + b"seq=51 BOOM loss=nan\n")
        driver.sync()
    assert tail.said("rule 'boom' failed on") == 1
    assert tail.said("RuntimeError: kaboom") == 1
    assert tail.alerts() == [(51, "nan-loss", "firing")]
    assert tail.seqs() == list(range(1, 52))


def test_log_stalled_fires_after_silence_and_resolves_when_lines_resume(tmp_path: Path) -> None:
    """A file receiving lines that gets none for 10 minutes (wall clock) fires log-stalled once;
    the next line resolves it."""
    tail = Tail(tmp_path, rules=LIVE)
    with running(tail.driver) as driver, open(tmp_path / "a.log", "ab", buffering=0) as out:
        out.write(numbered(1, 10))
        driver.sync()
        tail.clock.advance(1.0)
        driver.sync()
        tail.clock.advance(9 * 60)
        driver.sync()
        assert tail.alerts() == []
        tail.clock.advance(61.0)
        driver.sync()
        tail.clock.advance(3600.0)
        driver.sync()
        assert tail.alerts() == [(10, "log-stalled", "firing")]
        since = driver.stalled_since(str(tmp_path / "a.log"))
        assert since is not None and tail.clock.now() - since >= timedelta(minutes=10)
        out.write(numbered(11, 11))
        driver.sync()
        assert tail.alerts()[1:] == [(11, "log-stalled", "resolved")]
        assert driver.stalled_since(str(tmp_path / "a.log")) is None
    assert "no new lines for 10m" in tail.sink.events[0].summary


def test_log_stalled_ignores_history_and_never_fires_in_replay(tmp_path: Path) -> None:
    """A finished log caught up at start is not 'receiving', and replay has no wall clock."""
    log = tmp_path / "train.log"
    log.write_bytes(numbered(1, 100))
    tail = Tail(tmp_path, rules=LIVE)
    with running(tail.driver) as driver:
        driver.sync()
        tail.clock.advance(3600.0)
        driver.sync()
    assert tail.alerts() == []
    assert replay([str(log)], LIVE).events == []


def test_plugin_rounds_send_their_events_to_the_sink(tmp_path: Path) -> None:
    """A plugin's round (the seam for the GPU sampler) runs in the driver's rounds and its alert
    events reach the same sink as the log's."""
    event = replayed_as(DFLASH / "train_nan.log", DFLASH / "train_nan.log")[0]
    calls: list[int] = []

    class Hook(Plugin):
        def round(self, driver: Any) -> list[Any]:
            calls.append(1)
            return [event] if len(calls) == 1 else []

    tail = Tail(tmp_path, plugins=[Hook()])
    with running(tail.driver) as driver:
        driver.sync()
    assert tail.sink.events == [event]
    assert len(calls) >= 1


class BrokenSink:
    """A sink whose every emit raises (a destination that is down or misconfigured)."""

    def emit(self, event: Any) -> None:
        raise OSError("destination unreachable")

    def tick(self, now: Any) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_failing_sink_is_reported_per_alert_and_others_still_get_them(tmp_path: Path) -> None:
    """Each alert a sink cannot take is said on stderr (which one, why); other sinks get all."""
    tail = Tail(tmp_path, rules=BUILTIN, extra_sinks=[BrokenSink()])
    with running(tail.driver) as driver:
        (tmp_path / "a.log").write_bytes(
            b"step 1 | loss nan\nstep 2 | loss 1.0\nstep 3 | loss inf\n"
        )
        driver.sync()
    assert tail.alerts() == [
        (1, "nan-loss", "firing"),
        (2, "nan-loss", "resolved"),
        (3, "nan-loss", "firing"),
    ]
    said = [m for m in tail.status if "did not take" in m]
    assert len(said) == 3
    assert said[0].startswith("sink BrokenSink did not take nan-loss firing (")
    assert said[0].endswith(":1): OSError: destination unreachable")
    assert said[2].endswith("(failure 3 of this kind)")


def test_a_gpu_value_no_column_holds_is_said_once_and_gpu_rules_stay_on(tmp_path: Path) -> None:
    """Tailed as `logwatch tail` wires it (`tail_driver`), snapshot lines with `mem_gb=nan`
    batch after batch give one status line with the file and the first such line; no GPU
    rule is switched off, so gpu-hot fires on line 3 (90 C for 2m)."""
    status: list[str] = []
    sink = ListSink()
    log = tmp_path / "train.log"
    driver = tail_driver(
        [str(tmp_path / "*.log")],
        BUILTIN,
        [sink],
        state_dir=tmp_path / "state",
        options=TailOptions(),
        status=status.append,
    )
    snapshot = "2026-11-28 14:{:02d}:00,000 INFO [wandb] snapshot step={} gpu/0/mem_gb={} gpu/0/temp_c=90\n"
    with running(driver), open(log, "a", buffering=1) as out:
        for minute, mem in enumerate(["nan", "inf", "nan", "-nan"]):
            out.write(snapshot.format(minute, minute, mem))
            driver.sync()
    assert [line for line in status if "snapshot" in line or "failed on" in line] == [
        f"{log}:1: snapshot value gpu/0/mem_gb=nan is not a number a GPU column can hold;"
        " read as missing (later such values not repeated)"
    ]
    assert [(e.line, e.rule, e.status) for e in sink.events] == [(3, "gpu-hot", "firing")]


def test_a_round_over_many_growing_files_parses_them_once_and_alerts_as_each_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sample written in chunks to its own file, all files growing before each round: a
    round parses every file's new lines together (one parse, not one per file), evaluates them
    together (one `Engine.process_many`), and each file still gets exactly the alert events
    replay gives it alone, in its order."""
    rng = random.Random(30)
    logs: dict[Path, list[bytes]] = {}
    samples: dict[Path, Path] = {}
    for n, sample in enumerate(sample_logs()):
        data, at, chunks = sample.read_bytes(), 0, []
        while at < len(data):
            size = rng.randint(1, 1500)
            chunks.append(data[at : at + size])
            at += size
        logs[tmp_path / f"{n:02}-{sample.name}"] = chunks
        samples[tmp_path / f"{n:02}-{sample.name}"] = sample
        (tmp_path / f"{n:02}-{sample.name}").write_bytes(b"")
    together: list[int] = []
    shared = tail_rounds.parsed_together

    def counted(pending: Any, columns: Any) -> Any:
        together.append(len({id(follower) for follower, _ in pending}))
        return shared(pending, columns)

    monkeypatch.setattr(tail_rounds, "parsed_together", counted)
    evaluated: list[int] = []
    many = Engine.process_many

    def spied(self: Engine, frames: Any, *args: Any) -> Any:
        evaluated.append(len(frames))
        return many(self, frames, *args)

    monkeypatch.setattr(Engine, "process_many", spied)
    tail = Tail(tmp_path, rules=BUILTIN)
    with running(tail.driver) as driver:
        driver.sync()
        while any(logs.values()):
            for log, chunks in logs.items():
                if chunks:
                    with open(log, "ab") as out:
                        out.write(chunks.pop(0))
            driver.sync()
        tail.settle()
    assert max(together) > 5  # rounds that read many files parsed them in one call
    assert max(evaluated) > 5  # ... and evaluated them in one call
    for log in logs:
        late = log.name.split("-", 1)[1] in LATE_HOST
        got = comparable([e for e in tail.sink.events if e.source == str(log)], late_host=late)
        want = comparable(replayed_as(samples[log], log), late_host=late)
        assert got == want, log.name
    assert sum(1 for e in tail.sink.events) > 20


def test_a_round_parses_many_files_backlogs_a_bounded_number_of_lines_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files that all grew a backlog before a round are parsed together only up to
    `SHARED_LINES` (and the file that crosses it): what a round holds unparsed stays bounded,
    and the alerts are the same as replay's for each file."""
    monkeypatch.setattr(tail_rounds, "SHARED_LINES", 100)
    held: list[int] = []
    shared = tail_rounds.parsed_together

    def counted(pending: Any, columns: Any) -> Any:
        held.append(sum(batch.text.len() for _, batch in pending))
        return shared(pending, columns)

    monkeypatch.setattr(tail_rounds, "parsed_together", counted)
    data = (DFLASH / "train_nan.log").read_bytes()  # 145 lines, two NaN episodes
    logs = [tmp_path / f"rank{i}.log" for i in range(6)]
    for log in logs:
        log.write_bytes(b"")
    tail = Tail(tmp_path, rules=BUILTIN)
    with running(tail.driver) as driver:
        driver.sync()
        half = data[: data.index(b"\n", len(data) // 3) + 1]  # about 50 lines each
        for log in logs:
            log.write_bytes(half)
        driver.sync()
        for log in logs:
            with open(log, "ab") as out:
                out.write(data[len(half) :])
        driver.sync()
        tail.settle()
    assert held and max(held) <= 100 + 100  # the limit, and the file that crossed it
    assert len(held) >= 4  # not one parse for all six files' lines
    for log in logs:
        got = comparable([e for e in tail.sink.events if e.source == str(log)])
        want = comparable(replay([str(log)], BUILTIN).events)  # `rankN.log`: ranks from the path
        assert got == want, log.name
