"""GPU rule types and frames: held conditions against a brute-force reference in any chunking,
log telemetry in the NVML frame shape, the as-of join, and rule-pack errors."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from logwatch.errors import RulesError
from logwatch.gpu.frames import GPU_SCHEMA, join_log_gpu, samples_to_frame, telemetry_to_gpu_frame
from logwatch.gpu.model import GpuSample
from logwatch.parse import parse_lines
from logwatch.rules.gpu import HoldRule, RiseRule
from logwatch.rules.loader import load_rules

T0 = datetime(2026, 11, 28, 14, 0, 0)


def _frame(seed: int, rows: int = 120) -> pl.DataFrame:
    rng = random.Random(seed)
    data = [
        {
            "ts": T0 + timedelta(seconds=5 * i + rng.random()),
            "gpu": g,
            "util_gpu": rng.choice([2.0, 2.0, 3.0, 50.0]),
        }
        for i in range(rows)
        for g in range(3)
    ]
    return pl.DataFrame(data).with_columns(
        pl.lit(True).alias("run_uses"), pl.lit(False).alias("log_stalled")
    )


def _brute(frame: pl.DataFrame, hold_s: float) -> list[tuple[int, str, str]]:
    out, since, fired = [], {}, {}
    for i, row in enumerate(frame.iter_rows(named=True)):
        gpu = str(row["gpu"])
        if row["util_gpu"] < 10:
            since.setdefault(gpu, row["ts"])
            if not fired.get(gpu) and (row["ts"] - since[gpu]).total_seconds() >= hold_s:
                fired[gpu] = True
                out.append((i, "firing", gpu))
        else:
            since.pop(gpu, None)
            if fired.pop(gpu, False):
                out.append((i, "resolved", gpu))
    return out


def _chunked(rule: HoldRule, frame: pl.DataFrame, size: int) -> list[tuple[int, str, str]]:
    state, out = rule.initial_state(), []
    for offset in range(0, frame.height, size):
        part = frame.slice(offset, size).with_row_index("_row", offset=offset)
        transitions, state = rule.evaluate_gpu(part, state)
        out += [(t.row, t.status, t.labels.get("gpu", "")) for t in transitions]
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("size", [1, 4, 7, 1000])
def test_hold_matches_reference_in_any_chunking(seed: int, size: int) -> None:
    """Fire after the condition held `hold` seconds, resolve at the first miss, whatever the batches."""
    frame = _frame(seed)
    rule = HoldRule(condition=pl.col("util_gpu") < 10, hold_s=15.0)
    expected = _brute(frame, 15.0)
    assert expected  # the data does hold long enough somewhere
    assert _chunked(rule, frame, size) == expected


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("size", [1, 5, 1000])
def test_rise_fires_once_per_gpu_in_any_chunking(seed: int, size: int) -> None:
    """A counter fires at its GPU's first rise and never again (later batches, where every GPU
    has fired, skip the search but keep the last counts), whatever the batches."""
    rng = random.Random(seed)
    counts = {g: rng.randint(0, 2) for g in range(3)}
    rows, expected, fired = [], [], set()
    for i in range(60):
        for g in range(3):
            before = counts[g]
            counts[g] += rng.choice([0, 0, 0, 0, 1])
            if i and counts[g] > before and g not in fired:
                fired.add(g)
                expected.append((len(rows), "firing", str(g)))
            rows.append({"ts": T0 + timedelta(seconds=i), "gpu": g, "ecc_uncorrected": counts[g]})
    frame = pl.DataFrame(rows, schema_overrides={"ecc_uncorrected": pl.Int64})
    rule, state, got = RiseRule("ecc_uncorrected"), RiseRule("ecc_uncorrected").initial_state(), []
    for offset in range(0, frame.height, size):
        part = frame.slice(offset, size).with_row_index("_row", offset=offset)
        transitions, state = rule.evaluate_gpu(part, state)
        got += [(t.row, t.status, t.labels["gpu"]) for t in transitions]
    assert got == expected and len(fired) == 3
    assert state == {"last": {str(g): counts[g] for g in range(3)}, "fired": [e[2] for e in got]}


def test_run_scope_needs_every_run_gpu_at_once() -> None:
    """Scope run: one alert only when all the run's GPUs hold the condition together."""
    rows = [
        {
            "ts": T0 + timedelta(seconds=10 * i),
            "gpu": g,
            "util_gpu": 1.0 if (g == 0 or i >= 6) else 80.0,
            "run_uses": g != 2,
            "log_stalled": True,
        }
        for i in range(20)
        for g in range(3)
    ]
    rule = HoldRule(condition=pl.col("util_gpu") < 5, hold_s=60.0, scope="run")
    transitions, _ = rule.evaluate_gpu(pl.DataFrame(rows), rule.initial_state())
    assert [(t.status, dict(t.labels)) for t in transitions] == [("firing", {})]
    assert pl.DataFrame(rows).row(transitions[0].row, named=True)["ts"] == T0 + timedelta(
        seconds=120
    )


def test_log_telemetry_has_the_nvml_frame_shape() -> None:
    """Snapshot keys become the same columns as NVML samples (GiB to bytes, one row per GPU)."""
    line = "2026-11-28 09:00:23,769 INFO [wandb] snapshot step=50 cuda/alloc_gb=61.2 gpu/0/util=95 gpu/0/mem_gb=68.5 gpu/0/power_w=625 gpu/0/temp_c=61 gpu/1/util=3 gpu/1/temp_c=65"
    log = parse_lines(pl.Series([line]), source="s", first_line=1)
    from_log = telemetry_to_gpu_frame(log)
    from_nvml = samples_to_frame([GpuSample(ts=T0, index=0, uuid="u", name="n", util_gpu=1.0)])
    assert from_log.schema == from_nvml.schema == pl.Schema(GPU_SCHEMA)
    assert from_log.select("gpu", "util_gpu", "mem_used_bytes", "power_w", "temp_c").rows() == [
        (0, 95.0, int(68.5 * (1 << 30)), 625.0, 61.0),
        (1, 3.0, None, None, 65.0),
    ]


def test_join_gives_each_log_line_the_latest_gpu_sample() -> None:
    """As-of join: a line sees the last sample at or before its time, within the tolerance."""
    lines = [
        "2026-11-28 14:00:04,000 step 10 loss 3.0",
        "2026-11-28 14:00:11,000 step 20 loss 2.9",
        "no timestamp here",
        "2026-11-28 14:05:00,000 step 30 loss 2.8",
    ]
    log = parse_lines(pl.Series(lines), source="s", first_line=1, default_year=2026)
    gpu = samples_to_frame(
        GpuSample(ts=T0 + timedelta(seconds=s), index=0, uuid="u", name="n", util_gpu=float(s))
        for s in (0, 5, 10)
    )
    joined = join_log_gpu(log, gpu, tolerance_s=30)
    assert joined.get_column("line").to_list() == [1, 2, 3, 4]
    assert joined.get_column("util_gpu_0").to_list() == [0.0, 10.0, None, None]


def test_bad_gpu_condition_is_a_rules_error_with_file_line(tmp_path: Path) -> None:
    """A condition naming a column GPU frames lack fails at load time, with file:line and the columns."""
    pack = tmp_path / "gpu.toml"
    pack.write_text(
        '[[rule]]\nid = "x"\ntype = "gpu-hold"\nseverity = "warning"\nsummary = "s"\n'
        'condition = "utilisation < 5"\nhold = "2m"\n'
    )
    with pytest.raises(
        RulesError,
        match=r"gpu.toml:1: rule 'x': condition 'utilisation < 5' is not a valid SQL expression over GPU columns \(ts, gpu, ",
    ):
        load_rules([pack])
    pack.write_text(
        pack.read_text()
        .replace('"utilisation < 5"', '"util_gpu < 5"')
        .replace('"2m"', '"2 minutes"')
    )
    with pytest.raises(RulesError, match="invalid duration '2 minutes'"):
        load_rules([pack])


@pytest.mark.parametrize("scope", ["gpu", "run"])
def test_a_quiet_batch_clears_its_keys_and_a_fired_key_still_resolves(scope: str) -> None:
    """A batch where nothing holds leaves each of its keys (each GPU, or the run's one key)
    unheld and unfired; after a batch that fires, the next quiet one resolves it."""

    def batch(start_s: int, util: float) -> pl.DataFrame:
        rows = [
            {"ts": T0 + timedelta(seconds=start_s + 10 * i), "gpu": g, "util_gpu": util}
            for i in range(3)
            for g in range(2)
        ]
        frame = pl.DataFrame(rows).with_columns(
            pl.lit(True).alias("run_uses"), pl.lit(False).alias("log_stalled")
        )
        return frame.with_row_index("_row", offset=start_s)

    rule = HoldRule(condition=pl.col("util_gpu") < 5, hold_s=10.0, scope=scope)
    keys = ["run"] if scope == "run" else ["0", "1"]
    quiet, state = rule.evaluate_gpu(batch(0, 80.0), rule.initial_state())
    assert quiet == []
    assert state == {"keys": {k: {"since": None, "fired": False} for k in keys}}
    fired, state = rule.evaluate_gpu(batch(100, 1.0), state)
    assert sorted((t.status, t.labels.get("gpu", "run")) for t in fired) == [
        ("firing", k) for k in keys
    ]
    resolved, state = rule.evaluate_gpu(batch(200, 80.0), state)
    rows = [201] if scope == "run" else [200, 201]  # a run's time: its last GPU row
    assert sorted((t.row, t.status) for t in resolved) == [(row, "resolved") for row in rows]
    assert state == {"keys": {k: {"since": None, "fired": False} for k in keys}}
