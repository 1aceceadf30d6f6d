"""The shapes of lines with no value (DFlash's data-loader chatter and grad-clipping warnings,
Megatron's timers) give exactly the general path's frame: generated lines and their near misses,
parsed both ways."""

from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from logwatch.parse import shape_of
from logwatch.parse.shapes import _MEGATRON_TIMERS, SHAPES
from tests.test_shapes import (
    LEVELS,
    ODD,
    ODD_LEVELS,
    SETTINGS,
    Fields,
    both_ways,
    megatron_lines,
    queue_lines,
    step_lines,
    timestamps,
)

COUNT = st.integers(0, 10**9 - 1).map(str)
ODD_COUNT = st.sampled_from(["1" * 10, "-1", "1.5", "", "3e4", "nan"])
TENTHS = st.floats(0, 1e6).map(lambda x: f"{x:.1f}")
ODD_TENTHS = st.sampled_from(["2", "2.35", "nan", "inf", "-1.0", "1e3", ".5"])
# Path parts as a loader names its shards, and words some general extractor reads anywhere.
PATH_PART = st.sampled_from(["data", "dflash", "shards", "shard-00005.arrow", "v1.2", "x_y"])
ODD_PATH_PART = st.sampled_from(
    ["loss", "step5", "snapshot", "epoch", "iter", "s/it", "lr", "q_hs=3", "rank0", "nan", "inf"]
)


@st.composite
def data_lines(draw: st.DrawFn) -> str:
    f = Fields(draw, ["ts", "level", "a", "b", "c", "tenths", "path", "end"])
    a, b, c = (f(name, COUNT, ODD_COUNT) for name in ("a", "b", "c"))
    tenths = f("tenths", TENTHS, ODD_TENTHS)
    parts = draw(st.lists(PATH_PART, max_size=4))
    if f.odd == "path":
        parts.insert(draw(st.integers(0, len(parts))), draw(ODD_PATH_PART))
    path = "/".join(parts)
    body = draw(
        st.sampled_from(
            [
                f"worker {a} prefetched {b} batches (queue {c})",
                f"shard {a}/{b} opened: /{path} ({c[:3]},{c[3:6] or '0'} rows)",
                f"collate: {a} seqs, max_len {b}, pad {tenths}%",
                f"worker {a} slow: {tenths}s to fetch batch (threshold {tenths}s)",
            ]
        )
    )
    end = f("end", st.just(""), st.sampled_from([" ", " loss 2.5", " step 3", " x"]))
    return f"{draw(timestamps(f.odd == 'ts'))} {f('level', LEVELS, ODD_LEVELS)} [data] {body}{end}"


@st.composite
def clipping_lines(draw: st.DrawFn) -> str:
    f = Fields(draw, ["ts", "level", "norm", "max", "end"])
    end = f("end", st.just(""), st.sampled_from([" ", " (grad_norm 3.0)", " loss nan"]))
    return (
        f"{draw(timestamps(f.odd == 'ts'))} {f('level', LEVELS, ODD_LEVELS)} [train] grad "
        f"clipping active: norm {f('norm', TENTHS, ODD_TENTHS)} > {f('max', TENTHS, ODD_TENTHS)}"
        f"{end}"
    )


TIMERS = _MEGATRON_TIMERS.split("|")
# Timers the shape leaves (the general path reads a step from the first), and other words.
ODD_TIMERS = st.sampled_from(["optimizer-inner-step", "lm loss", "iteration", "Optimizer", "x"])
MS = st.floats(0, 1e6, allow_nan=False).map(lambda x: f"{x:.2f}")


@st.composite
def timers_lines(draw: st.DrawFn) -> str:
    f = Fields(draw, ["name", "value", "sep", "end"])
    names = draw(st.lists(st.sampled_from(TIMERS), min_size=1, max_size=8))
    if f.odd == "name":
        names.insert(draw(st.integers(0, len(names))), draw(ODD_TIMERS))
    values = [draw(MS) for _ in names]
    if f.odd == "value":
        values[draw(st.integers(0, len(values) - 1))] = draw(st.one_of(ODD, MS.map(str.strip)))
    sep = f("sep", st.just(" | "), st.sampled_from([" |  ", "| ", " ||"]))
    end = f("end", st.just(""), st.sampled_from([" ", " |", " | loss: nan"]))
    pairs = sep.join(f"{name}: {value}" for name, value in zip(names, values, strict=True))
    return f"time (ms){sep}{pairs}{end}"


@SETTINGS
@given(st.lists(data_lines(), min_size=1, max_size=20))
def test_dflash_data_shape_gives_the_general_values(lines: list[str]) -> None:
    """A data-loader line the shape takes has every value null, as the general path says."""
    both_ways(lines)


@SETTINGS
@given(st.lists(clipping_lines(), min_size=1, max_size=20))
def test_dflash_clipping_shape_gives_the_general_values(lines: list[str]) -> None:
    """A grad-clipping warning the shape takes has no grad norm, as the general path says."""
    both_ways(lines)


@SETTINGS
@given(st.lists(timers_lines(), min_size=1, max_size=20))
def test_megatron_timers_shape_gives_the_general_values(lines: list[str]) -> None:
    """A timers line the shape takes has no value (`check-inf` is no infinity), as the general
    path says."""
    both_ways(lines)


@SETTINGS
@given(
    st.lists(
        st.one_of(
            data_lines(),
            clipping_lines(),
            timers_lines(),
            step_lines(),
            queue_lines(),
            megatron_lines(),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_quiet_lines_among_step_lines_give_the_general_values(lines: list[str]) -> None:
    """Mixed with lines of the value-cutting shapes, in any order, the frame is the general
    path's."""
    both_ways(lines)


def test_the_quiet_shapes_take_their_lines_and_leave_a_path_with_a_step() -> None:
    """Each form of the realistic DFlash file's chatter, and Megatron's timers, has its shape;
    a shard path or a timer holding `step` (the general path reads a step there) does not."""
    ts = "2026-11-01 00:09:39,020 "
    lines = [
        ts + "INFO [data] worker 3 prefetched 32 batches (queue 100)",
        ts + "INFO [data] shard 5/32 opened: /data/dflash/shard-00005.arrow (31,234 rows)",
        ts + "DEBUG [data] collate: 26 seqs, max_len 4096, pad 21.6%",
        ts + "WARNING [data] worker 7 slow: 2.3s to fetch batch (threshold 2.0s)",
        ts + "WARNING [train] grad clipping active: norm 12.4 > 1.0",
        ts + "INFO [data] shard 5/32 opened: /data/step5/shard-00005.arrow (31,234 rows)",
        "time (ms) | forward-backward: 3361.16 | optimizer-unscale-and-check-inf: 20.47",
        "time (ms) | forward-backward: 3361.16 | optimizer-inner-step: 20.47",
    ]
    which = shape_of(pl.Series(lines))
    assert which is not None
    names = [None if n is None else SHAPES[n].name for n in which.to_list()]
    assert names == [*["dflash-data"] * 4, "dflash-clipping", None, "megatron-timers", None]
    both_ways(lines)
