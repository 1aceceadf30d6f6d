"""GPU rules on a log's snapshot keys read narrow (`telemetry_rows`, no pivot): the same values,
transitions and states as the wide frame pivoted from the parsed `telemetry` column, and as a
brute-force reference, on random snapshot batches cut into random blocks."""

from __future__ import annotations

import itertools
import math
from datetime import datetime, timedelta
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logwatch.gpu.frames import narrow_to_gpu_frame, telemetry_to_gpu_frame
from logwatch.gpu.log_rows import telemetry_rows
from logwatch.parse import parse_lines
from logwatch.parse.telemetry import PAIRS_COLUMN, gpu_key_count, telemetry_pairs
from logwatch.rules.gpu import HoldRule, LogGpuRows, log_gpu_rows, with_log_context
from logwatch.rules.loader import builtin_rules_dir, load_pack
from tests.support.properties import examples

T0 = datetime(2026, 11, 1, 0, 0, 0)
METRICS = ["util", "mem_gb", "mem_total_gb", "power_w", "power_limit_w", "temp_c"]
BUILTIN = {
    spec.id: spec.rule
    for spec in load_pack(builtin_rules_dir() / "gpu.toml")
    if isinstance(spec.rule, HoldRule) and not spec.rule.nvml_only
}
EXTRA = {
    # scope "run": one alert over every GPU at a time
    "run-cool": HoldRule(condition=pl.col("temp_c") < 70, hold_s=20.0, scope="run"),
    # true where the metric is missing: needs every GPU row, not only those with util
    "util-missing": HoldRule(condition=pl.col("util_gpu").is_null(), hold_s=10.0),
    # reads the GPU index: no narrowing either
    "gpu1-hot": HoldRule(condition=(pl.col("temp_c") > 80) | (pl.col("gpu") == 1), hold_s=0.0),
}
RULES: dict[str, HoldRule] = {**BUILTIN, **EXTRA}


def _value(metric: str) -> st.SearchStrategy[str]:
    """Values around each built-in threshold, in the spellings the parser reads, and some no
    GPU column holds (NaN or inf GiB, GiB past Int64 once in bytes) or none has (`-1`)."""
    numbers = {
        "util": st.sampled_from(["3", "9", "10", "50", "97", "nan", "1e1", "1e30"]),
        "mem_gb": st.sampled_from(["70.0", "79.5", "80", "2", "nan", "-inf", "1e30", "-1"]),
        "mem_total_gb": st.sampled_from(["80", "81.5", "inf", "99999999999", ""]),
        "temp_c": st.sampled_from(["60", "84.9", "85", "90", "inf", "-inf"]),
    }
    return numbers.get(metric, st.sampled_from(["300", "700.5", ".5"]))


@st.composite
def _pair(draw: st.DrawFn, gpus: int) -> str:
    """One `key=value` of a snapshot line: mostly GPU keys, some other or look-alike keys."""
    kind = draw(st.integers(0, 9))
    if kind <= 6:
        metric = draw(st.sampled_from(METRICS))
        index = draw(st.integers(0, gpus - 1))
        spelled = draw(st.sampled_from([str(index), f"0{index}"]))
        return f"gpu/{spelled}/{metric}={draw(_value(metric))}"
    return draw(
        st.sampled_from(
            [
                "prof/target_fwd_ms=212.4",
                "cuda/alloc_gb=61.2",
                "gpu/0/fan=40",
                "gpu/0/mem-gb=3",
                "xgpu/0/util=2",
                "a/gpu/1/util=2",
                "/gpu/1/util=4",
                "gpu/1/util/x=5",
                "gpu/x/util=5",
                "gpu/2=7",
                "gpu/0/util=5x",
                "gpu/99999999999999999999/util=1",
                "gpu/9223372036854775808/mem_gb=80",
                "gpu/000000000000000000001/temp_c=90",
            ]
        )
    )


@st.composite
def _log(draw: st.DrawFn) -> list[str]:
    """Step and snapshot lines, some without a time, some at the same time."""
    gpus = draw(st.integers(1, 4))
    lines, now = [], T0
    for i in range(draw(st.integers(1, 40))):
        now += timedelta(seconds=draw(st.sampled_from([0, 5, 30, 61, 150])))
        stamp = now.strftime("%Y-%m-%d %H:%M:%S,000 INFO ")
        stamp = "" if draw(st.integers(0, 9)) == 0 else stamp
        if draw(st.integers(0, 3)) == 0:
            lines.append(f"{stamp}step {i} loss 1.0")
            continue
        pairs = draw(st.lists(_pair(gpus), max_size=14))
        lines.append(f"{stamp}[wandb] snapshot step={i} " + " ".join(pairs))
    return lines


def _blocks(lines: list[str], cuts: list[int]) -> list[tuple[int, pl.DataFrame]]:
    """The lines cut at `cuts`, each block parsed alone: (its first line, its frame)."""
    edges = sorted({0, len(lines), *(c % (len(lines) + 1) for c in cuts)})
    return [
        (start + 1, _parse(lines[start:end], start + 1))
        for start, end in itertools.pairwise(edges)
        if end > start
    ]


def _parse(lines: list[str], first_line: int) -> pl.DataFrame:
    return parse_lines(pl.Series(lines, dtype=pl.String), source="s.log", first_line=first_line)


def _wide(frame: pl.DataFrame) -> pl.DataFrame:
    """The wide path: the parsed `telemetry` column pivoted to a GPU frame."""
    return with_log_context(telemetry_to_gpu_frame(frame, row_column="_row"))


Event = tuple[int, str, str, str]


Views = list[tuple[int, LogGpuRows, pl.DataFrame]]


def _views(blocks: list[tuple[int, pl.DataFrame]]) -> Views:
    """Each block's narrow rows and wide frame, built once for every rule (they do not depend
    on the rule; the rules only read them)."""
    return [(first, log_gpu_rows(frame), _wide(frame)) for first, frame in blocks]


def _run(rule: HoldRule, views: Views, *, narrow: bool) -> Any:
    state, out = rule.initial_state(), []
    for first, rows, wide in views:
        if narrow:
            transitions, state = rule.evaluate_log(rows, state)
        else:
            transitions, state = rule.evaluate_gpu(wide, state)
        out += [_event(first, t.row, t.status, t.labels, t.value) for t in transitions]
    return out, state


def _event(first: int, row: int, status: str, labels: dict[str, str], value: Any) -> Event:
    shown = "none" if value is None else ("nan" if math.isnan(value) else repr(value))
    return (first + row, status, labels.get("gpu", "run"), shown)


def _brute(rule: HoldRule, views: Views) -> list[Event]:
    """Per GPU: fire once the condition has held `hold_s`, resolve at its first false sample."""
    since: dict[str, datetime] = {}
    fired: set[str] = set()
    out: list[Event] = []
    for first, _, wide in views:
        rows = wide.select(
            "ts", pl.col("gpu").cast(pl.String), "_row", rule.condition.alias("c"), "temp_c"
        )
        rows = rows.filter(pl.col("ts").is_not_null() & pl.col("c").is_not_null())
        found = []
        ordered = sorted(enumerate(rows.iter_rows()), key=lambda r: (r[1][1], r[1][0], r[0]))
        for seq, (ts, gpu, row, holds, _) in ordered:
            if holds:
                start = since.setdefault(gpu, ts)
                if gpu not in fired and (ts - start).total_seconds() >= rule.hold_s:
                    fired.add(gpu)
                    found.append((seq, first + row, "firing", gpu))
            else:
                since.pop(gpu, None)
                if gpu in fired:
                    fired.discard(gpu)
                    found.append((seq, first + row, "resolved", gpu))
        out += [(line, status, gpu, "") for _, line, status, gpu in sorted(found)]
    return out


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_log(), st.lists(st.integers(0, 60), max_size=4))
def test_narrow_rows_give_the_wide_paths_transitions(lines: list[str], cuts: list[int]) -> None:
    """Every GPU rule gives the same transitions and state from the narrow rows as from the
    pivoted telemetry column, in any cut into blocks; gpu-scoped ones as the brute force too."""
    views = _views(_blocks(lines, cuts))
    for name, rule in RULES.items():
        narrow, wide = _run(rule, views, narrow=True), _run(rule, views, narrow=False)
        assert narrow == wide, name
        if rule.scope == "gpu":
            assert [e[:3] for e in narrow[0]] == [e[:3] for e in _brute(rule, views)], name


@settings(max_examples=examples(60), deadline=None)
@given(_log())
def test_narrow_rows_hold_the_telemetry_columns_values(lines: list[str]) -> None:
    """The narrow rows, pivoted, are the wide GPU frame; `gpu_key_count` over the text (or
    over pairs extracted before) is the parser's `gpu_keys`, also without `telemetry`."""
    frame = _parse(lines, 1)
    rows = telemetry_rows(frame)
    assert narrow_to_gpu_frame(rows, row_column="_row").equals(
        telemetry_to_gpu_frame(frame, row_column="_row")
    )
    snapshots = frame.filter(pl.col("snapshot"))
    assert snapshots.select(gpu_key_count()).to_series().equals(snapshots["gpu_keys"])
    with_pairs = frame.with_columns(telemetry_pairs().alias(PAIRS_COLUMN))
    assert telemetry_rows(with_pairs).equals(rows)
    assert (
        with_pairs.select(gpu_key_count(pl.col(PAIRS_COLUMN)))
        .to_series()
        .equals(frame.select(gpu_key_count()).to_series())
    )
    text = pl.Series("text", lines, dtype=pl.String)
    narrow = parse_lines(text, source="s", first_line=1, default_year=2026, columns={"gpu_keys"})
    assert narrow.get_column("telemetry").null_count() == narrow.height  # not parsed
    assert narrow["gpu_keys"].equals(frame["gpu_keys"])


def test_rules_read_only_their_own_metrics() -> None:
    """gpu-idle and gpu-hot read one metric each, gpu-memory-high two; a condition true on a
    missing metric or reading the GPU index reads every GPU row."""
    assert {name: rule.log_metrics for name, rule in RULES.items()} == {
        "gpu-idle": frozenset({"util"}),
        "gpu-memory-high": frozenset({"mem_gb", "mem_total_gb"}),
        "gpu-hot": frozenset({"temp_c"}),
        "run-cool": frozenset({"temp_c"}),
        "util-missing": None,
        "gpu1-hot": None,
    }
    frame = _parse(["2026-11-01 00:00:00,000 snapshot gpu/0/util=3 gpu/1/temp_c=90"], 1)
    rows = log_gpu_rows(frame)
    idle = rows.frame(RULES["gpu-idle"].log_metrics)
    assert idle.select("gpu", "util_gpu", "temp_c").rows() == [(0, 3.0, None)]
    assert rows.frame().select("gpu", "util_gpu", "temp_c").rows() == [
        (0, 3.0, None),
        (1, None, 90.0),
    ]


@pytest.mark.parametrize(
    ("pair", "kind", "row"),
    [
        ("gpu/0/mem_gb=nan", "value", (0, None, None)),
        ("gpu/0/mem_gb=-nan", "value", (0, None, None)),
        ("gpu/0/mem_total_gb=inf", "value", (0, None, None)),
        ("gpu/0/mem_gb=-inf", "value", (0, None, None)),
        ("gpu/0/mem_gb=1e30", "value", (0, None, None)),
        ("gpu/00/mem_total_gb=99999999999", "value", (0, None, None)),
        ("gpu/0/mem_total_gb=8589934592", "value", (0, None, None)),  # 2**63 bytes
        ("gpu/99999999999999999999/util=1", "index", None),
        ("gpu/9223372036854775808/mem_gb=1", "index", None),
        ("gpu/\u0663/util=5", "index", None),  # a digit, but no ASCII one
    ],
)
def test_a_value_no_gpu_column_holds_is_missing_on_both_paths(
    pair: str, kind: str, row: tuple[int, None, None] | None
) -> None:
    """A value the wide frame cannot hold (NaN or inf GiB as bytes, GiB past Int64) is read as
    missing, a key whose index no Int64 holds is dropped, on both paths alike; the line's
    other keys stay, and the first such pair is named with its kind (for the engine to say)."""
    frame = _parse([f"2026-11-01 00:00:00,000 snapshot {pair} gpu/1/util=3"], 1)
    read = log_gpu_rows(frame)
    wide = telemetry_to_gpu_frame(frame, row_column="_row")
    assert narrow_to_gpu_frame(read.narrow, row_column="_row").equals(wide)
    gpus = wide.select("gpu", "util_gpu", "mem_used_bytes", "mem_total_bytes").rows()
    assert gpus == [(1, 3.0, None, None)] if row is None else [row, (1, 3.0, None, None)]
    assert [(d.kind, d.row, d.pair) for d in read.dropped] == [(kind, 0, pair)]


@pytest.mark.parametrize(
    ("pair", "read"),
    [
        ("gpu/0/mem_gb=-1", (0, None, -(1 << 30), None)),  # held: no GPU has it, but no loss
        ("gpu/0/mem_gb=0", (0, None, 0, None)),
        # just under what an Int64 of bytes holds (2**33 GiB is past it)
        ("gpu/0/mem_total_gb=8589934591.5", (0, None, None, int(8589934591.5 * (1 << 30)))),
        ("gpu/000000000000000000000/util=7", (0, 7.0, None, None)),  # leading zeros: GPU 0
        ("gpu/0/util=1e30", (0, 1e30, None, None)),  # a float column holds it
        ("gpu/0/util=nan", (0, math.nan, None, None)),
        ("gpu/0/mem_gb=", None),  # no number: no pair
    ],
)
def test_values_gpu_columns_hold_are_read_and_not_said(
    pair: str, read: tuple[int, float | None, int | None, int | None] | None
) -> None:
    """Values the columns hold stay as read (a negative size, the largest GiB an Int64 of
    bytes holds, an index spelled with leading zeros, NaN utilization) and nothing is said;
    an empty value is no pair at all."""
    frame = _parse([f"2026-11-01 00:00:00,000 snapshot {pair} gpu/1/util=3"], 1)
    rows = log_gpu_rows(frame)
    wide = telemetry_to_gpu_frame(frame, row_column="_row")
    assert narrow_to_gpu_frame(rows.narrow, row_column="_row").equals(wide)
    gpus = wide.select("gpu", "util_gpu", "mem_used_bytes", "mem_total_bytes").rows()
    other = (1, 3.0, None, None)
    assert repr(gpus) == repr([other] if read is None else [read, other])
    assert rows.dropped == ()


def test_a_batch_where_nothing_holds_keeps_the_state_exact() -> None:
    """The early exit (no condition true, nothing pending) leaves each GPU's state as the full
    computation does: not held, not fired; a GPU held before still resolves."""
    rule = RULES["gpu-idle"]
    held = _parse(
        [
            "2026-11-01 00:00:00,000 snapshot gpu/0/util=3 gpu/1/util=95",
            "2026-11-01 00:06:00,000 snapshot gpu/0/util=3 gpu/1/util=95",
        ],
        1,
    )
    busy = _parse(["2026-11-01 00:07:00,000 snapshot gpu/0/util=90 gpu/1/util=95"], 3)
    transitions, state = rule.evaluate_log(log_gpu_rows(held), rule.initial_state())
    assert [(t.row, t.status, t.labels) for t in transitions] == [(1, "firing", {"gpu": "0"})]
    transitions, state = rule.evaluate_log(log_gpu_rows(busy), state)
    assert [(t.row, t.status, t.labels) for t in transitions] == [(0, "resolved", {"gpu": "0"})]
    assert state == {
        "keys": {"0": {"since": None, "fired": False}, "1": {"since": None, "fired": False}}
    }
    transitions, after = rule.evaluate_log(LogGpuRows(telemetry_rows(busy)), state)
    assert (transitions, after) == ([], state)
