"""A report's replay parses only the columns its collector and rules read (`COLUMNS`, replay's
`frame_columns`), not `telemetry`: the collector reads the snapshots' GPU pairs from their text,
as the parser reads `telemetry`."""

from __future__ import annotations

import polars as pl
import pytest

from logwatch.drivers.replay import ReplayOptions, replay
from logwatch.parse.block import parse_lines
from logwatch.report.collect import Collector
from logwatch.report.project import COLUMNS, gpu_rows, keyed
from logwatch.rules.loader import builtin_rules_dir, load_rules, pack_files
from tests.support.paths import SAMPLES

RULES = load_rules(pack_files(builtin_rules_dir()))
_TS = "2026-11-01 00:09:37,430 INFO "
LINES = [
    _TS + "[wandb] snapshot step=2 prof/x_ms=217.8 gpu/0/util=99 gpu/0/mem_gb=72.4 "
    "gpu/0/power_w=566 gpu/0/temp_c=59 gpu/1/util=95 gpu/1/mem_total_gb=80",
    _TS + "[wandb] snapshot step=3 gpu/0/util=nan gpu/0/util=7 gpu/1/power_w=-inf gpu/1/temp_c=.5",
    _TS + "step 4 loss 2.5",
    "snapshot gpu/0/util=1e3 xgpu/0/util=3 gpu/2/mem=12GB gpu/3/temp=4 junk gpu/ab/util=1",
    "[wandb] snapshot gpu/0/utilisation=5 gpu/0/util=+Infinity gpu/0/temp.c=3 a/b=c gpu/1/util=",
    "a plain line gpu/0/util=5",
]


def test_gpu_rows_from_the_text_are_those_of_the_parsed_telemetry() -> None:
    """Shaped and general-path snapshots, a key said twice, NaN/Inf, capacities, keys that are
    no GPU metric, a non-snapshot line: the same rows, values and order."""
    frame = parse_lines(pl.Series("text", LINES), source="x", first_line=1).with_columns(
        pl.col("step").alias("at_step")
    )
    snaps = frame.filter((pl.col("gpu_keys") > 0) & pl.col("snapshot").fill_null(False))
    assert snaps.height == 4  # the fixture means what it says
    ours = gpu_rows(snaps.select("line", "ts", "at_step", "text"))
    # as the collector read them before: from the parsed `telemetry` column
    parsed = snaps.select("line", "ts", "at_step", "telemetry").explode("telemetry")
    theirs = keyed(parsed.unnest("telemetry"))
    assert ours.height >= 10
    assert ours.equals(theirs, null_equal=True)


def test_the_hook_sees_its_columns_and_telemetry_is_not_parsed() -> None:
    """With `frame_columns`, the hook's frames hold what it reads and the rules' columns;
    `telemetry` (read by neither) is null."""
    seen: list[pl.DataFrame] = []
    path = str(SAMPLES / "dflash/train_gpu_trouble.log")
    replay([path], RULES, on_frame=seen.append, frame_columns=COLUMNS)
    frame = pl.concat(seen)
    assert frame.get_column("telemetry").null_count() == frame.height
    assert frame.get_column("grad_norm").is_not_null().any()
    assert frame.get_column("gpu_keys").fill_null(0).sum() > 0


@pytest.mark.parametrize(
    "sample", ["dflash/train_gpu_trouble.log", "dflash/train_restarted.log", "dflash/train_nan.log"]
)
def test_the_collector_keeps_the_same_rows_as_from_every_column(sample: str) -> None:
    """Every reducer of every run and view holds the same rows, parsed narrow or in full."""
    path = str(SAMPLES / sample)
    narrow, full = Collector(), Collector()
    replay([path], RULES, on_frame=narrow, frame_columns=COLUMNS)
    replay([path], RULES, on_frame=full)
    runs = [
        (a, b)
        for s in full.sources
        for a, b in zip(narrow.sources[s].runs.values(), full.sources[s].runs.values(), strict=True)
    ]
    assert runs
    for ours, theirs in runs:
        for kind in ("time", "line", "step"):
            mine, other = ours.view(kind), theirs.view(kind)  # type: ignore[arg-type]  # a Kind
            for name in ("points", "markers", "medians", "mix"):
                a, b = getattr(mine, name), getattr(other, name)
                assert a.counts == b.counts
                for key in b.counts:
                    assert a.all_rows(key).equals(b.all_rows(key), null_equal=True)


def test_a_collector_in_the_background_keeps_what_it_keeps_in_line() -> None:
    """Reduced on the worker thread, block by block: the same rows in every reducer, and the
    same places for the alerts, as reduced in the replay's own thread."""
    path = str(SAMPLES / "dflash/train_restarted.log")
    options = ReplayOptions(block_bytes=4096)
    ours, theirs = Collector(background=True), Collector()
    try:
        replay([path], RULES, options=options, on_frame=ours, on_found=ours.on_event)
    finally:
        ours.close()
    replay([path], RULES, options=options, on_frame=theirs, on_found=theirs.on_event)
    assert len(ours.sources[path].runs) > 1
    assert list(ours.places.values()) == list(theirs.places.values())
    for mine, other in zip(
        ours.sources[path].runs.values(), theirs.sources[path].runs.values(), strict=True
    ):
        for kind in ("time", "line", "step"):
            a, b = mine.view(kind).points, other.view(kind).points  # type: ignore[arg-type]  # a Kind
            assert a.counts == b.counts
            for key in b.counts:
                assert a.all_rows(key).equals(b.all_rows(key), null_equal=True)


def test_a_failure_on_the_worker_thread_is_raised_not_lost() -> None:
    """A block the reduction cannot read fails the report at `close`, as it would in line."""
    frame = parse_lines(pl.Series("text", LINES), source="x", first_line=1)
    broken = frame.with_columns(pl.col("lr").cast(pl.String))  # a series of text: no floats
    with pytest.raises(pl.exceptions.PolarsError):
        Collector().__call__(broken)
    collector = Collector(background=True)
    collector(broken)
    with pytest.raises(pl.exceptions.PolarsError):
        collector.close()
