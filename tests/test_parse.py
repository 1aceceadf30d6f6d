"""The parser reads every dialect's real line shapes (tests/data/dialects.toml) correctly."""

from __future__ import annotations

import math
import os
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.drivers.replay import replay, scan_log
from logwatch.parse import SCHEMA, parse_lines
from logwatch.parse.framing import _framed
from logwatch.parse.timestamps import _timestamps, dated_timestamp, yearless_timestamp
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.sources.framing import lines_to_series
from tests.support.properties import examples

DIALECTS = tomllib.loads((Path(__file__).parent / "data" / "dialects.toml").read_text("utf-8"))
CORPUS = DIALECTS["line"]
NEGATIVE = DIALECTS["negative"]
RULES = load_rules([builtin_rules_dir()])
FIELDS = ("loss", "grad_norm", "lr", "step", "rank")


def parse_one(text: str) -> dict[str, Any]:
    """Frame one raw line exactly as a file would be framed, then parse it."""
    series = lines_to_series(text.encode() + b"\n")
    return parse_lines(series, source="t.log", first_line=1, default_year=2026).row(0, named=True)


def same(expected: Any, got: Any) -> bool:
    if isinstance(expected, str):
        return (
            got is not None and str(got) == {"nan": "nan", "inf": "inf", "-inf": "-inf"}[expected]
        )
    if isinstance(expected, float) and got is not None:
        return math.isclose(expected, got, rel_tol=1e-9)
    return bool(expected == got)


@pytest.mark.parametrize(
    "case", CORPUS, ids=[f"{c['dialect']}-{i}" for i, c in enumerate(CORPUS, 1)]
)
def test_dialect_line(case: dict[str, Any]) -> None:
    """Each metric the line carries is extracted with its value; absent ones stay null."""
    row = parse_one(case["text"])
    for name in FIELDS:
        expected = case.get(name)
        got = row[name]
        if expected is None:
            assert got is None, f"{name}: expected none, got {got!r} in {case['text']!r}"
        else:
            assert same(expected, got), (
                f"{name}: expected {expected!r}, got {got!r} in {case['text']!r}"
            )
    if "ts" in case:
        assert str(row["ts"]) == case["ts"], case["text"]


@pytest.mark.parametrize(
    "case", NEGATIVE, ids=[f"negative-{i}" for i in range(1, len(NEGATIVE) + 1)]
)
def test_negative_line_raises_no_alert(case: dict[str, Any], tmp_path: Path) -> None:
    """Healthy lines, `nan` in paths and configs, a NaN metric beside a finite loss and
    nvidia-smi's ECC header fire no built-in rule; validation-only NaNs fire nan-eval-loss only."""
    log = tmp_path / "train.log"
    log.write_text(case["text"] + "\n", encoding="utf-8")
    expected = [("nan-eval-loss", 1)] if case.get("held_out") else []
    assert [(e.rule, e.line) for e in replay([str(log)], RULES).events] == expected


def test_frame_has_exactly_the_schema() -> None:
    """The frame's columns and types are the documented schema, in order."""
    frame = parse_lines(pl.Series(["step 1 | loss 2.0"]), source="s", first_line=7)
    assert frame.schema == pl.Schema(SCHEMA)
    assert frame.row(0, named=True)["line"] == 7


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-28 14:09:05,117 INFO x", "2026-11-28 14:09:05.117000"),
        ("2026-11-28T14:09:05.117Z x", "2026-11-28 14:09:05.117000"),
        ("2026-11-28T14:09:05+02:00 x", "2026-11-28 14:09:05"),
        ("[titan] 2025-03-11 12:34:56,789 - root - INFO", "2025-03-11 12:34:56.789000"),
        ("[06/09 11:05:25] d2.utils.events INFO: eta", "2026-06-09 11:05:25"),
        ("2024/01/01 10:00:00 - mmengine - INFO", "2024-01-01 10:00:00"),
        ("Nov 28 14:09:05 host kernel: NVRM: Xid", "2026-11-28 14:09:05"),
        ("[NeMo I 2024-01-01 10:00:00 exp_manager:1] x", "2024-01-01 10:00:00"),
        ("no timestamp here, step 5", None),
        ("2026-13-45 99:99:99,000 broken", None),
    ],
)
def test_timestamps(text: str, expected: str | None) -> None:
    """Common timestamp forms are read as the wall clock written; junk gives null."""
    got = parse_one(text)["ts"]
    assert (None if got is None else str(got)) == expected


def test_dflash_queue_and_snapshot() -> None:
    """q_hs / q_hsb (spaces allowed) and snapshot telemetry keys are typed columns."""
    queue = parse_one("2026-11-28 14:12:10,006 INFO [hsq] q_hsb=[0, 0, 0, 0, 0, 31] at q_hs=31")
    assert queue["q_hsb"] == [0, 0, 0, 0, 0, 31] and queue["q_hs"] == 31
    assert queue["q_hsb_nonzero"] == 1
    snap = parse_one(
        "2026-11-28 14:10:00,002 INFO [wandb] snapshot step=150 prof/target_fwd_ms=212.4 "
        "gpu/0/util=98 gpu/0/mem_gb=70.9 gpu/1/util=nan"
    )
    assert snap["snapshot"] and snap["step"] == 150 and snap["gpu_keys"] == 3
    telemetry = {item["key"]: item["value"] for item in snap["telemetry"]}
    assert telemetry["gpu/0/util"] == 98 and telemetry["prof/target_fwd_ms"] == 212.4
    assert math.isnan(telemetry["gpu/1/util"])
    bare = parse_one("2026-11-28 14:10:00,002 INFO [wandb] snapshot step=150 cuda/alloc_gb=61.2")
    assert bare["snapshot"] and bare["gpu_keys"] == 0


def test_run_header() -> None:
    """The DFlash run header marks a run start and carries the pid."""
    row = parse_one(
        "2026-11-28 14:02:03,118 INFO [train] run start: run_id=slammed4 pid=41626 gpus=8"
    )
    assert row["run_start"] and row["pid"] == 41626


def test_binary_garbage_parses_to_nothing() -> None:
    """A line of random bytes yields a row with no metrics, not an error."""
    junk = bytes(range(256)) * 4
    series = lines_to_series(junk.replace(b"\n", b"") + b"\n")
    row = parse_lines(series, source="s", first_line=1).row(0, named=True)
    assert row["loss"] is None and row["step"] is None


@pytest.mark.parametrize(
    "text",
    [
        "[INFO|trainer.py:2135] 2024-05-02 10:11:02,114 >>   Gradient Accumulation steps = 4",
        "[INFO|trainer.py:2136] 2024-05-02 10:11:02,114 >>   Total optimization steps = 2,436",
        "    will be used during training (effective maximum steps = 500000) -",
        "cmd = /usr/bin/python -u -m deepspeed.launcher.launch train_pipe.py -p 2 --steps=2000",
        "slurmstepd: error: *** STEP 123456.0 ON node-0040 CANCELLED AT 2024-03-11T09:45:40 ***",
        "Epoch 0:  10%|#  | 100/1000 [00:10<01:30, 9.8it/s, loss=2.29, v_num=0]",
    ],
)
def test_configuration_and_counters_are_not_steps(text: str) -> None:
    """Step counts in configuration, CLI flags, slurm job steps and tqdm counters are not progress."""
    assert parse_one(text)["step"] is None


@pytest.mark.parametrize(
    ("text", "loss", "grad_norm"),
    [
        ("loss: tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)", "nan", None),
        ("grad_norm: tensor(nan, device='cuda:0')", None, "nan"),
        ("{'loss': tensor(nan)}", "nan", None),
        ("Loss is nan, stopping training", "nan", None),
        ("global_grad_norm=nan lr=1e-4", None, "nan"),
        ("learning/raw_grad_norm=nan", None, "nan"),
        ("grad_norm_before_clip: nan", None, "nan"),
        ("gradient norm: inf", None, "inf"),
        ("loss_value: nan", "nan", None),
        ("latest_loss=nan", "nan", None),
        ("{'loss': nan, 'eval_loss': 2.3}", "nan", None),
        ("step 1000 | loss nan | eval_loss 2.3", "nan", None),
        ("val loss 3.1, loss nan", "nan", None),
    ],
)
def test_nan_shapes_from_the_review_are_seen(
    text: str, loss: str | None, grad_norm: str | None
) -> None:
    """Printed tensors, `Loss is nan`, prefixed grad-norm keys and mixed lines keep their NaN."""
    row = parse_one(text)
    for name, expected in (("loss", loss), ("grad_norm", grad_norm)):
        if expected is None:
            assert row[name] is None, f"{name} in {text!r}: {row[name]!r}"
        else:
            assert same(expected, row[name]), f"{name} in {text!r}: {row[name]!r}"


@pytest.mark.parametrize(
    "text",
    [
        "Best loss: inf",
        "best val loss inf",
        "  min_loss: inf",
        "loss_weight: inf",
        "loss_threshold=inf",
        "eval/loss: nan",
        "val/loss=nan",
        "test loss: nan",
        "val loss nan",
        "max_grad_norm: inf",
        "clip_grad_norm=inf",
    ],
)
def test_config_best_and_eval_values_are_not_training_metrics(text: str) -> None:
    """Best-so-far, thresholds, weights, eval values and clipping limits set neither column."""
    row = parse_one(text)
    assert row["loss"] is None and row["grad_norm"] is None, (text, row["loss"], row["grad_norm"])


def test_megatron_nan_iterations_count() -> None:
    """Megatron's `number of nan iterations` is the only trace of a NaN it averaged away."""
    row = parse_one(
        " iteration 200/ 1000 | lm loss: 2.345678E+00 | grad norm: 0.512 | "
        "number of skipped iterations:   3 | number of nan iterations:   3 |"
    )
    assert row["nan_iterations"] == 3 and row["loss"] == pytest.approx(2.345678)


YEARLESS_LOG = (
    "Nov 30 06:31:02 node7 kernel: NVRM: loading\n"  # before any dated line: the file's year
    "2024-11-30 06:31:05,000 INFO [train] step 1 | loss 2.0\n"
    "Nov 30 06:31:40 node7 kernel: NVRM: Xid (PCI:0000:05:00): 31\n"
    "E1130 06:31:41.118 12345 ProcessGroupNCCL.cpp:12] watchdog\n"
    "[11/30 06:31:42] d2.utils.events INFO: iter: 19  total_loss: 2.1\n"
)


@pytest.mark.parametrize("block_bytes", [1 << 20, 64, 1])
def test_lines_without_a_year_take_the_year_of_the_dated_line_before(
    tmp_path: Path, block_bytes: int
) -> None:
    """syslog, glog and detectron2 times take the year of the last dated line before them in
    the file, however it is split into blocks; before any dated line, the file's mtime year."""
    log = tmp_path / "train.log"
    log.write_text(YEARLESS_LOG, encoding="utf-8")
    written = datetime(2023, 6, 1).timestamp()
    os.utime(log, (written, written))
    frame = pl.concat(scan_log(log, block_bytes=block_bytes))
    assert [str(ts) for ts in frame.get_column("ts")] == [
        "2023-11-30 06:31:02",
        "2024-11-30 06:31:05",
        "2024-11-30 06:31:40",
        "2024-11-30 06:31:41.118000",
        "2024-11-30 06:31:42",
    ]


CLOCK_PARTS = [
    "2026-11-28 14:09:05,117 INFO x",
    "2026-11-28T14:09:05.117Z x",
    "[Mon Nov 30 06:31:40 2026] NVRM: Xid",
    "[06/09 11:05:25] d2.utils.events INFO: eta",
    "Nov 28 14:09:05 host kernel: x",
    "E1130 06:31:02.118 12345 x.cpp:1] y",
    "[rank1]: E626 06:31:02.118 1 x",
    "2026-13-45 99:99:99,000 broken",
    " iteration 10/ 200 | consumed samples: 5120 | elapsed time per iteration (ms): 3591.8 |",
    "12:34:56",
    "\u0661\u0662:\u0663\u0664:\u0665\u0666 2026-11-28",  # Arabic-Indic digits: `\d` reads them too
    "x" * 90 + " 14:09:05",
    "x" * 80 + " 2026-11-28 14:09:05",
    "{'loss': 2.0, 'epoch': 0.5}",
    "",
]


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.sampled_from(CLOCK_PARTS), min_size=1, max_size=30), st.integers(2000, 2030))
def test_timestamps_are_looked_for_only_on_lines_with_a_clock(lines: list[str], year: int) -> None:
    """Every timestamp form holds `HH:MM:SS` in the line's head, so a line without one is not
    read by the timestamp patterns (`timestamps._CLOCK`): the times are those of every pattern
    run on every line without a dense timestamp, the yearless ones in the carried year."""
    frame = _framed(pl.Series(lines, dtype=pl.String), "t", 1, shaped=False)
    got = _timestamps(frame, year)[0].get_column("ts")
    dated = frame.with_columns(pl.col("ts").fill_null(dated_timestamp()))
    carried = pl.col("ts").dt.year().forward_fill().fill_null(year).alias("_year")
    want = dated.with_columns(carried).select(pl.col("ts").fill_null(yearless_timestamp()))
    assert got.to_list() == want.to_series().to_list()
