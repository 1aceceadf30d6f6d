"""The engine's GPU rules on a log: one GPU frame per batch, built lazily, ties in rule order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pytest

import logwatch.engine.gpu_rows
from logwatch.alerts import FIRING, Severity
from logwatch.engine import Engine
from logwatch.parse import parse_lines
from logwatch.rules.base import Transition
from logwatch.rules.gpu import GpuRule, HoldRule, LogGpuRows, RiseRule, is_gpu_rule, needs_nvml
from logwatch.rules.loader import RuleSpec
from logwatch.rules.nonfinite import NonFiniteRule

SNAPSHOT = "snapshot step=5 gpu/0/util=3 gpu/1/util=95"
LINES = ["step 1 loss 1.0", SNAPSHOT, "step 2 loss nan", SNAPSHOT]


@dataclass
class Recorder:
    """A GPU rule that fires at the first GPU row it sees and records every frame handed to it."""

    nvml_only: bool = False
    seen: list[pl.DataFrame] = field(default_factory=list)
    log_frames: int = 0

    def initial_state(self) -> dict[str, Any]:
        return {"fired": False}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        self.log_frames += 1
        return [], state

    def evaluate_gpu(
        self, gpu_frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        self.seen.append(gpu_frame)
        if state["fired"] or gpu_frame.is_empty():
            return [], state
        return [Transition(int(gpu_frame.get_column("_row")[0]), FIRING, 1.0)], {"fired": True}


def spec(rule_id: str, rule: Any) -> RuleSpec:
    """A rule spec around a compiled rule."""
    return RuleSpec(
        id=rule_id,
        type="test",
        severity=Severity.WARNING,
        summary=f"{rule_id} fired",
        resolved_summary=f"{rule_id} resolved",
        fix="",
        params={},
        rule=rule,
        origin="test",
    )


def batch(lines: list[str], first_line: int = 1) -> pl.DataFrame:
    """One parsed batch of s.log."""
    return parse_lines(pl.Series(lines, dtype=pl.String), source="s.log", first_line=first_line)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the engine's calls of log_gpu_rows (one entry per call: the batch height)."""
    calls: list[int] = []
    real = logwatch.engine.gpu_rows.log_gpu_rows

    def counting(frame: pl.DataFrame, metrics: frozenset[str] | None = None) -> LogGpuRows:
        calls.append(frame.height)
        return real(frame, metrics)

    monkeypatch.setattr(logwatch.engine.gpu_rows, "log_gpu_rows", counting)
    return calls


def test_gpu_rules_share_one_frame_per_batch_and_skip_nvml_only(builds: list[int]) -> None:
    """Two GPU rules get the same frame object, built once per batch; an NVML-only one nothing."""
    first, second, nvml = Recorder(), Recorder(), Recorder(nvml_only=True)
    engine = Engine(
        [
            spec("z-first", first),
            spec("nan", NonFiniteRule("loss")),
            spec("nv", nvml),
            spec("a-second", second),
        ]
    )
    got = engine.process(batch(LINES[:2])) + engine.process(batch(LINES[2:], 3))
    assert builds == [2, 2]
    assert [f is s for f, s in zip(first.seen, second.seen, strict=True)] == [True, True]
    assert (nvml.seen, nvml.log_frames, first.log_frames) == ([], 0, 0)
    # Ties at one line come in rule order (z-first before a-second), whatever the ids sort to.
    assert [(e.line, e.rule) for e in got] == [(2, "z-first"), (2, "a-second"), (3, "nan")]
    assert engine.export_state("s.log")["rule_states"]["nv"] == {"fired": False}


def test_no_gpu_frame_without_a_gpu_rule_that_reads_it(builds: list[int]) -> None:
    """Log rules alone, or NVML-only GPU rules, never make the engine build a GPU frame."""
    engine = Engine([spec("nan", NonFiniteRule("loss")), spec("nv", Recorder(nvml_only=True))])
    engine.process(batch(LINES))
    assert builds == []


def test_gpu_rules_are_recognised_by_the_protocol() -> None:
    """Hold and rise rules (and any class with the members) are GPU rules; log rules are not."""
    hold = HoldRule(condition=pl.col("util_gpu") < 5, hold_s=0.0)
    for rule in (hold, RiseRule("ecc_uncorrected"), Recorder()):
        assert isinstance(rule, GpuRule) and is_gpu_rule(rule)
    assert not is_gpu_rule(NonFiniteRule("loss"))
    assert [needs_nvml(r) for r in (hold, RiseRule("ecc_uncorrected"), NonFiniteRule("x"))] == [
        False,
        True,
        False,
    ]


def _replayed(
    tmp_path: Any, lines: list[str], workers: int, warnings: list[str] | None = None
) -> tuple[list[Any], list[str]]:
    """Events and rule errors of a replay with the built-in rules (its data warnings, each
    without the folder, go to `warnings`)."""
    from logwatch.drivers.replay import ReplayOptions, replay

    log = tmp_path / f"w{workers}.log"
    log.write_text("\n".join(lines) + "\n")
    errors: list[str] = []
    said = [] if warnings is None else warnings
    result = replay(
        [str(log)],
        logwatch.load_rules(),
        options=ReplayOptions(workers=workers, block_bytes=256),
        on_error=lambda rule, source, exc: errors.append(f"{rule}: {exc}"),
        on_warning=lambda warning: said.append(str(warning).removeprefix(f"{tmp_path}/")),
    )
    return [(e.rule, e.status, e.line) for e in result.events], errors


IDLE = "2026-11-28 14:{:02d}:00,000 INFO [wandb] snapshot step={} gpu/0/util=1 gpu/1/util=97"


def test_gpu_rows_read_ahead_on_the_parse_threads_give_the_same_events(tmp_path: Any) -> None:
    """replay reads the GPU rows of each block on its parse threads (`Engine.prepare`): the
    events are those of the engine reading them itself, in small blocks too."""
    lines = [IDLE.format(minute, minute) for minute in range(20)]
    ahead, errors = _replayed(tmp_path, lines, workers=2)
    itself, _ = _replayed(tmp_path, lines, workers=1)
    engine = Engine(logwatch.load_rules())
    direct = [(e.rule, e.status, e.line) for e in engine.process(batch(lines))]
    assert ("gpu-idle", FIRING, 6) in direct
    assert ahead == itself == direct
    assert errors == []


def test_prepare_scores_the_gpu_hold_rules_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Engine.prepare` (the parse threads, in replay) scores each GPU hold rule's rows of a
    batch: `process` then only runs the rules' state over them, with the same events."""
    lines = [IDLE.format(minute, minute) for minute in range(20)]
    frame = batch(lines)
    engine = Engine(logwatch.load_rules())
    prepared = engine.prepare(frame)
    assert prepared is not None

    def no_score(self: HoldRule, gpu_frame: pl.DataFrame) -> pl.DataFrame:
        raise AssertionError("scored again in process")

    monkeypatch.setattr(HoldRule, "score", no_score)
    ahead = [(e.rule, e.status, e.line) for e in engine.process(frame, prepared=prepared)]
    monkeypatch.undo()
    direct = [(e.rule, e.status, e.line) for e in Engine(logwatch.load_rules()).process(frame)]
    assert ("gpu-idle", FIRING, 6) in ahead
    assert ahead == direct


BROKEN = [
    "2026-11-28 14:00:00,000 INFO [wandb] snapshot step=1 gpu/0/util=50 gpu/0/mem_gb=nan"
    " gpu/0/mem_total_gb=80 gpu/0/temp_c=60",
    "2026-11-28 14:00:01,000 INFO [train] step 2/9 | loss nan",
    *(
        f"2026-11-28 14:{minute:02d}:00,000 INFO [wandb] snapshot step={minute} gpu/0/util=1"
        f" gpu/0/mem_gb=79.9 gpu/0/mem_total_gb={total} gpu/0/temp_c=90"
        f" gpu/99999999999999999999/util={minute}"
        for minute, total in zip(range(1, 9), ["80", "inf", *["80"] * 6], strict=True)
    ),
]
"""A NaN memory size on line 1 (inf on line 4), an index past Int64 from line 3 on, and
every GPU rule's condition holding from line 3 (util 1%, memory 99.9%, 90 C)."""


def test_a_value_no_gpu_column_holds_is_said_once_and_the_gpu_rules_go_on(tmp_path: Any) -> None:
    """A snapshot value a GPU column cannot hold (NaN GiB) is read as missing and a key whose
    index no GPU has is dropped, each said once with its file and line, read ahead on the
    parse threads or not: every GPU rule stays on and fires later, and no rule fails."""
    said_ahead: list[str] = []
    said_itself: list[str] = []
    events_ahead, ahead = _replayed(tmp_path, BROKEN, workers=2, warnings=said_ahead)
    events_itself, itself = _replayed(tmp_path, BROKEN, workers=1, warnings=said_itself)
    assert ahead == itself == []
    assert events_ahead == events_itself
    assert {(rule, line) for rule, status, line in events_ahead if status == FIRING} == {
        ("nan-loss", 2),
        ("gpu-memory-high", 5),
        ("gpu-hot", 5),
        ("gpu-idle", 8),
    }
    assert [said.removeprefix("w2") for said in said_ahead] == [
        ".log:1: snapshot value gpu/0/mem_gb=nan is not a number a GPU column can hold;"
        " read as missing (later such values not repeated)",
        ".log:3: snapshot key gpu/99999999999999999999/util=1 has a GPU index no GPU has;"
        " dropped (later such keys not repeated)",
    ]
    assert [said.removeprefix("w1") for said in said_itself] == [
        said.removeprefix("w2") for said in said_ahead
    ]


def test_a_log_batch_reads_only_the_snapshot_metrics_its_gpu_rules_use() -> None:
    """The built-in GPU rules read utilization, memory and temperature: a snapshot's power
    keys are not read into GPU rows at all (fewer rows for every GPU rule)."""
    line = (
        "2026-11-28 14:00:00,000 INFO [wandb] snapshot step=1 gpu/0/util=50 gpu/0/power_w=300"
        " gpu/0/temp_c=60 gpu/0/mem_gb=70.1"
    )
    engine = Engine(logwatch.load_rules())
    prepared = engine.prepare(batch([line] * 3))
    assert prepared is not None and prepared.gpu_rows is not None
    read = set(prepared.gpu_rows.narrow.get_column("metric").cast(pl.String))
    assert read == {"util", "temp_c", "mem_gb"}


def test_data_warnings_are_said_once_per_source_and_kind_in_any_batches() -> None:
    """Batch by batch (as tail feeds the engine), each source is told once of a value read as
    missing and once of a dropped key, at the first line that had one; a rehearsal says
    nothing and uses up nothing, and a renamed source keeps what was said to it."""
    said: list[str] = []
    engine = Engine(logwatch.load_rules(), on_warning=lambda warning: said.append(str(warning)))
    nan = "2026-11-28 14:00:00,000 INFO [wandb] snapshot step=1 gpu/0/mem_gb=nan gpu/0/util=50"
    inf = "2026-11-28 14:00:05,000 INFO [wandb] snapshot step=2 gpu/1/mem_total_gb=inf"
    index = "2026-11-28 14:00:09,000 INFO [wandb] snapshot step=3 gpu/99999999999999999999/util=1"
    engine.rehearse([batch([nan, index])])
    assert said == []
    for line, text in enumerate([nan, inf, index, nan, index], start=1):
        engine.process(batch([text], first_line=line))
    engine.process(parse_lines(pl.Series([inf]), source="t.log", first_line=7))
    engine.rename_source("s.log", "s.log.1")
    engine.process(parse_lines(pl.Series([nan]), source="s.log.1", first_line=9))
    value = "snapshot value {} is not a number a GPU column can hold; read as missing"
    assert [text.split(" (later")[0] for text in said] == [
        "s.log:1: " + value.format("gpu/0/mem_gb=nan"),
        "s.log:3: snapshot key gpu/99999999999999999999/util=1 has a GPU index no GPU has; dropped",
        "t.log:7: " + value.format("gpu/1/mem_total_gb=inf"),
    ]


def test_a_dropped_pair_is_not_said_when_no_gpu_rule_reads_its_metric() -> None:
    """Rules that read utilization only are not told of a NaN memory size: nothing they read
    was lost (the rows for them do not read memory at all)."""
    said: list[str] = []
    idle = [spec for spec in logwatch.load_rules() if spec.id == "gpu-idle"]
    engine = Engine(idle, on_warning=lambda warning: said.append(str(warning)))
    line = "2026-11-28 14:00:00,000 INFO [wandb] snapshot step=1 gpu/0/mem_gb=nan gpu/0/util=5"
    engine.process(batch([line]))
    assert said == []
