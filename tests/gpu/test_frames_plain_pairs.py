"""`telemetry_rows` cuts the GPU keys of plain snapshot lines by position: on generated lines,
plain or not, it gives exactly the rows (and the pairs left out) of the general path, which
reads the pairs the parser reads."""

from __future__ import annotations

import re

import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from logwatch.gpu import frames, log_rows
from logwatch.gpu.frames import narrow_to_gpu_frame
from logwatch.gpu.frames import telemetry_to_gpu_frame as wide_gpu_frame
from logwatch.gpu.log_rows import (
    PLAIN_PAIRS_LINE,
    DroppedPair,
    TelemetryRows,
    read_telemetry_rows,
    telemetry_rows,
)
from logwatch.gpu.template import TEMPLATES_PER_BATCH, template_rows
from logwatch.parse import parse_lines
from logwatch.parse.shapes import SHAPES
from logwatch.parse.telemetry import gpu_key_count
from logwatch.rules.gpu import HoldRule, log_gpu_metrics, log_gpu_rows
from logwatch.rules.loader import builtin_rules_dir, load_pack
from tests.support.properties import examples

METRICS = ["util", "mem_gb", "mem_total_gb", "power_w", "power_limit_w", "temp_c"]
PLAIN_VALUES = ["0", "90", "70.7", "007", "-0", "-3.25", "1.50", "99999999999", "85"]
ODD_VALUES = ["nan", "NaN", "-inf", "1e1", "6.7E+00", ".5", "+4", "5x", "1.", "1e30", "INF", ""]
OTHER_KEYS = [
    "prof/target_fwd_ms=212.4",
    "cuda/alloc_gb=61.2",
    "worker/3/seqs=1288",
    "gpu/0/fan=40",
    "gpu/0/mem-gb=3",
    "xgpu/0/util=2",
    "a/gpu/1/util=2",
    "gpu/1/util/x=5",
    "gpu/x/util=5",
    "gpu/0_1/util=5",
    "gpu/2=7",
    "GPU/0/util=3",
    "gpu/1/Temp_c=99",
    "gpu/9999999999999999999/util=1",
    "gpu/99999999999999999999/fan=1",
    "gpu/0000000000000000001/util=1",
    "gpu/99999999999999999999/mem_gb=1",
    "gpu/\u0663/util=5",
]

(SNAPSHOT,) = [shape for shape in SHAPES if shape.name == "dflash-snapshot"]


@st.composite
def _gpu_pair(draw: st.DrawFn, gpus: list[int], odd: bool) -> str:
    """A `gpu/<i>/<metric>=<value>` pair; with `odd`, maybe a value no plain line has."""
    index = draw(st.sampled_from(gpus))
    spelled = draw(st.sampled_from([str(index), f"0{index}"]))
    values = PLAIN_VALUES + (ODD_VALUES if odd else [])
    return f"gpu/{spelled}/{draw(st.sampled_from(METRICS))}={draw(st.sampled_from(values))}"


@st.composite
def _snapshot(draw: st.DrawFn, step: int) -> str:
    """A snapshot line: GPUs (some missing), their metrics in order or shuffled, some keys
    missing, said twice or not GPU keys; a prefix that may hold a `/` or no time."""
    gpus = draw(st.lists(st.integers(0, 11), min_size=1, max_size=8, unique=True))
    odd = draw(st.integers(0, 4)) == 0
    pairs = [
        f"gpu/{gpu}/{metric}={draw(st.sampled_from(PLAIN_VALUES))}"
        for gpu in gpus
        for metric in METRICS
        if draw(st.integers(0, 5)) > 0
    ]
    extra = draw(st.lists(st.one_of(_gpu_pair(gpus, odd), st.sampled_from(OTHER_KEYS)), max_size=4))
    for pair in extra:
        pairs.insert(draw(st.integers(0, len(pairs))), pair)
    prefix = draw(
        st.sampled_from(
            [
                "2026-11-01 00:00:{s:02d},000 INFO [wandb] snapshot step={n}",
                "2026-11-01 00:00:{s:02d},000 INFO [wandb/x] snapshot step={n}",
                "[wandb] snapshot step={n}",
                "2026-11-01 00:00:{s:02d},000 snapshot\tstep={n}",
            ]
        )
    )
    separator = draw(st.sampled_from([" ", " ", " ", "  ", "\t"]))
    return prefix.format(s=step % 60, n=step) + "".join(separator + pair for pair in pairs)


@st.composite
def _lines(draw: st.DrawFn) -> list[str]:
    """Snapshot lines among step lines."""
    lines = []
    for step in range(draw(st.integers(1, 12))):
        if draw(st.integers(0, 4)) == 0:
            lines.append(f"2026-11-01 00:00:{step:02d},000 INFO [train] step {step} loss 1.0")
        else:
            lines.append(draw(_snapshot(step)))
    return lines


def _parse(lines: list[str]) -> pl.DataFrame:
    return parse_lines(pl.Series(lines, dtype=pl.String), source="s.log", first_line=1)


def _general(frame: pl.DataFrame, metrics: set[str] | None = None) -> TelemetryRows:
    """The general path on every snapshot line (what `telemetry_rows` did before the cut)."""
    snapshots = (
        frame.select("ts", "text", "snapshot")
        .with_row_index("_log_row")
        .filter(pl.col("snapshot").fill_null(False))
    )
    kept = None if metrics is None else frozenset(metrics) & set(METRICS)
    return log_rows._held(frame, *log_rows._general_rows(snapshots, kept))


def _same(fast: TelemetryRows, general: TelemetryRows) -> None:
    """The same rows (values, order, dtypes) and the same pairs left out."""
    assert fast.rows.schema == general.rows.schema
    assert fast.rows.equals(general.rows)
    assert fast.dropped == general.dropped


@settings(max_examples=examples(150), deadline=None)
@given(_lines())
def test_plain_lines_cut_by_position_give_the_general_paths_rows(lines: list[str]) -> None:
    """Rows (values, order, dtypes, last of a key said twice) and the pairs left out (a value
    no GPU column holds, an index past Int64) are the general path's."""
    frame = _parse(lines)
    _same(read_telemetry_rows(frame), _general(frame))


def test_the_generated_lines_take_both_paths() -> None:
    """The strategy above writes plain lines and lines the plain pattern refuses."""
    plain = [
        "2026-11-01 00:00:00,000 INFO [wandb] snapshot step=1 gpu/0/util=90 prof/x_ms=2.5",
        "[wandb] snapshot step=2 gpu/1/temp_c=85 gpu/0/util=3 gpu/1/temp_c=86",
        "2026-11-01 00:00:00,000 INFO [wandb] snapshot step=5  gpu/0/util=1",
    ]
    general = [
        "2026-11-01 00:00:00,000 INFO [wandb/x] snapshot step=3 gpu/0/util=90",
        "2026-11-01 00:00:00,000 INFO [wandb] snapshot step=4 gpu/0/util=nan",
        "2026-11-01 00:00:00,000 INFO [wandb] snapshot step=5\tgpu/0/util=1",
        "2026-11-01 00:00:00,000 INFO [wandb] snapshot step=6 GPU/0/util=1",
        "2026-11-01 00:00:00,000 INFO [wandb] snapshot step=6 gpu/0/util=1e1",
    ]
    assert all(re.search(PLAIN_PAIRS_LINE, line) for line in plain)
    assert not any(re.search(PLAIN_PAIRS_LINE, line) for line in general)
    assert pl.DataFrame({"text": plain[:1]}).select(SNAPSHOT.accepts()).item()  # some are shaped


def test_plain_and_general_lines_in_one_batch_keep_file_order() -> None:
    """A batch of both kinds gives each line's rows in file order, a key's last value, as the
    wide GPU frame of the parsed `telemetry` column."""
    frame = _parse(
        [
            "2026-11-01 00:00:00,000 INFO [wandb] snapshot step=1 gpu/1/util=5 gpu/0/util=7",
            "2026-11-01 00:00:01,000 INFO [wandb] snapshot step=2 gpu/0/util=nan gpu/1/util=2",
            "2026-11-01 00:00:02,000 INFO [wandb] snapshot step=3 gpu/0/util=1 gpu/00/util=4",
        ]
    )
    rows = telemetry_rows(frame)
    assert rows.select("_log_row", "gpu", "value").rows(named=False)[:2] == [
        (0, 0, 7.0),
        (0, 1, 5.0),
    ]
    assert rows.filter(pl.col("_log_row") == 2).select("gpu", "value").rows() == [(0, 4.0)]
    assert rows.filter(pl.col("_log_row") == 1).height == 2
    assert narrow_to_gpu_frame(rows, row_column="_row").equals(
        wide_gpu_frame(frame, row_column="_row")
    )


@pytest.mark.parametrize(
    ("pair", "dropped"),
    [
        ("gpu/99999999999999999999/util=1", "gpu/99999999999999999999/util=1"),
        ("gpu/9223372036854775808/temp_c=90", "gpu/9223372036854775808/temp_c=90"),
        ("gpu/99999999999999999999/fan=1", None),  # no metric a GPU rule reads: nothing lost
    ],
)
def test_an_index_past_int64_on_a_plain_line_is_dropped_as_on_any_line(
    pair: str, dropped: str | None
) -> None:
    """A plain line's GPU index no Int64 holds drops that key alone, as the general path
    does, and is said (when its metric is one a GPU frame reads); the line's other keys stay."""
    frame = _parse([f"2026-11-01 00:00:00,000 INFO [wandb] snapshot step=1 {pair} gpu/1/util=3"])
    assert re.search(PLAIN_PAIRS_LINE, frame.get_column("text")[0])
    read = read_telemetry_rows(frame)
    _same(read, _general(frame))
    assert read.rows.select("gpu", "value").rows() == [(1, 3.0)]
    assert read.dropped == (() if dropped is None else (DroppedPair("index", 0, dropped),))


@settings(max_examples=examples(80), deadline=None)
@given(_lines(), st.sets(st.sampled_from([*METRICS, "fan"])))
def test_rows_of_some_metrics_are_those_of_all_filtered(
    lines: list[str], metrics: set[str]
) -> None:
    """Asked for some metrics, the rows are all rows of those metrics, and the pairs left out
    are those of those metrics (NaN GiB said only when memory is asked for)."""
    frame = _parse(lines)
    some = read_telemetry_rows(frame, metrics)
    every = telemetry_rows(frame)
    assert some.rows.equals(every.filter(pl.col("metric").is_in(sorted(metrics))))
    _same(some, _general(frame, metrics))


def test_the_builtin_rules_read_four_metrics_and_rows_read_for_them_refuse_others() -> None:
    """The built-in GPU rules read util, memory and temperature on a log, not power; rows read
    for those metrics serve those rules and refuse a frame of other metrics."""
    rules = [spec.rule for spec in load_pack(builtin_rules_dir() / "gpu.toml")]
    metrics = log_gpu_metrics(rules)
    assert metrics == {"util", "mem_gb", "mem_total_gb", "temp_c"}
    assert log_gpu_metrics([*rules, HoldRule(pl.col("gpu") == 1, hold_s=0.0)]) is None
    frame = _parse(
        ["2026-11-01 00:00:00,000 INFO [wandb] snapshot step=1 gpu/0/util=3 gpu/0/power_w=9"]
    )
    rows = log_gpu_rows(frame, metrics)
    assert rows.narrow.get_column("metric").cast(pl.String).to_list() == ["util"]
    assert rows.frame(frozenset({"util"})).select("gpu", "util_gpu").rows() == [(0, 3.0)]
    with pytest.raises(ValueError, match="power_w"):
        rows.frame(frozenset({"power_w"}))


def test_a_large_batch_of_two_metrics_comes_out_in_line_and_gpu_order() -> None:
    """The GPU frame of many rows of two metrics (a pivot large enough for polars' threads)
    is in (line, gpu) order without a sort, some lines without a time."""
    lines = [
        ("" if n % 7 == 0 else f"2026-11-01 00:{n // 60 % 60:02d}:{n % 60:02d},000 INFO ")
        + f"[wandb] snapshot step={n} "
        + " ".join(f"gpu/{g}/util={n % 97} gpu/{g}/temp_c={g}" for g in range(8) if (n + g) % 3)
        for n in range(20_000)
    ]
    rows = telemetry_rows(_parse(lines))
    frame = narrow_to_gpu_frame(rows, row_column="_row", metrics={"util", "temp_c"})
    assert frame.height == sum(1 for n in range(20_000) for g in range(8) if (n + g) % 3)
    assert frame.equals(frame.sort("_row", "gpu", maintain_order=True))


@settings(max_examples=examples(150), deadline=None)
@given(_lines())
def test_a_plain_lines_gpu_keys_are_its_gpu_substrings(lines: list[str]) -> None:
    """On plain lines, the snapshot shape's count of ` gpu/` gives the general path's `gpu_keys`
    (its pairs counted)."""
    frame = pl.DataFrame({"text": lines}).filter(pl.col("text").str.contains(PLAIN_PAIRS_LINE))
    literal = SNAPSHOT.counts["gpu_keys"]
    counted = frame.select(pl.col("text").str.count_matches(literal, literal=True)).to_series()
    assert counted.equals(frame.select(gpu_key_count()).to_series(), check_names=False)


@settings(max_examples=examples(150), deadline=None)
@given(_lines())
def test_every_dflash_snapshot_shape_line_is_a_plain_line(lines: list[str]) -> None:
    """A line the `dflash-snapshot` shape accepts is plain: the cut by position and the
    substring count hold on it (this fails if the shape takes more forms)."""
    (shape,) = [shape for shape in SHAPES if shape.name == "dflash-snapshot"]
    frame = pl.DataFrame({"text": lines}).filter(shape.accepts())
    assert frame.select(pl.col("text").str.contains(PLAIN_PAIRS_LINE).all()).item()


TEMPLATE_EXTRA_KEYS = ["prof/x_ms", "cuda/alloc_gb", "gpu/0/fan", "gpu/01/util", "gpu/x/util"]
LONG_INDEX_KEYS = ["gpu/0000000000000000001/util", "gpu/9999999999999999999/temp_c"]
SEQUENCE_VALUES = [value for value in PLAIN_VALUES if value != "99999999999"]
"""Values every GPU column holds: a batch of them leaves a value out only where a line is
changed."""
CHANGES = ["none"] * 20 + ["missing", "extra", "replaced", "other gpu", "swap", "twice"]
CHANGES += ["odd value", "long index"]


@st.composite
def _key_sequence(draw: st.DrawFn) -> list[str]:
    """A run's snapshot keys: some metrics of some GPUs, in order or shuffled, maybe among
    keys that are not GPU metrics (or that another index spelling makes the same key)."""
    gpus = draw(st.lists(st.integers(0, 11), min_size=1, max_size=4, unique=True))
    keys = [f"gpu/{g}/{m}" for g in gpus for m in METRICS if draw(st.integers(0, 3)) > 0]
    if draw(st.integers(0, 2)) == 0:
        keys = draw(st.permutations(keys))
    for key in draw(st.lists(st.sampled_from(TEMPLATE_EXTRA_KEYS), max_size=2)):
        keys.insert(draw(st.integers(1, max(1, len(keys)))), key)
    if draw(st.integers(0, 29)) == 0:
        keys.insert(draw(st.integers(0, len(keys))), draw(st.sampled_from(LONG_INDEX_KEYS)))
    return keys or ["gpu/0/util"]


@st.composite
def _sequence_line(draw: st.DrawFn, keys: list[str], step: int) -> str:
    """A snapshot line of `keys`, or of `keys` changed: a key missing, one more, one replaced
    (by another key, by the same metric of another GPU), two swapped, one said twice, a value no plain line has (or no GiB column holds), an index of 19
    digits."""
    keys = list(keys)
    change = draw(st.sampled_from(CHANGES))
    at = draw(st.integers(0, len(keys) - 1))
    if change == "missing":
        del keys[at]
    elif change == "extra":
        keys.insert(at, draw(st.sampled_from([*TEMPLATE_EXTRA_KEYS, "gpu/5/util", "gpu/0/util"])))
    elif change == "replaced":  # a key that is no GPU metric's, if there is one
        at = next((n for n, key in enumerate(keys) if not key.startswith("gpu/")), at)
        keys[at] = draw(st.sampled_from([*TEMPLATE_EXTRA_KEYS, "gpu/5/util", "gpu/0/util"]))
    elif change == "other gpu" and keys[at].startswith("gpu/"):
        _, index, metric = keys[at].split("/", 2)
        keys[at] = f"gpu/{(int(index) + 1) % 10 if index.isdigit() else 0}/{metric}"
    elif change == "swap":
        other = draw(st.integers(0, len(keys) - 1))
        keys[at], keys[other] = keys[other], keys[at]
    elif change == "twice":
        keys.insert(draw(st.integers(0, len(keys))), keys[at])
    elif change == "long index":
        keys.insert(at, draw(st.sampled_from(LONG_INDEX_KEYS)))
    values = [draw(st.sampled_from(SEQUENCE_VALUES)) for _ in keys]
    if change == "odd value" and values:
        values[at % len(values)] = draw(st.sampled_from([*ODD_VALUES, "99999999999"]))
    prefix = draw(
        st.sampled_from(
            [
                "2026-11-01 00:00:{s:02d},000 INFO [wandb] snapshot step={n} prof/a_ms=1.5",
                "2026-11-01 00:00:{s:02d},000 INFO [wandb] snapshot step={n}",
                "[wandb] snapshot step={n}",
            ]
        )
    )
    pairs = "".join(f" {key}={value}" for key, value in zip(keys, values, strict=True))
    return prefix.format(s=step % 60, n=step) + pairs


@st.composite
def _sequence_lines(draw: st.DrawFn) -> list[str]:
    """Snapshot lines of one to four key sequences (more than a batch's templates), mixed,
    among step lines."""
    sequences = draw(st.lists(_key_sequence(), min_size=1, max_size=4))
    lines = []
    for step in range(draw(st.integers(1, 16))):
        if draw(st.integers(0, 5)) == 0:
            lines.append(f"2026-11-01 00:00:{step:02d},000 INFO [train] step {step} loss 1.0")
        else:
            lines.append(draw(_sequence_line(draw(st.sampled_from(sequences)), step)))
    return lines


def _after_one(*changed: str) -> list[str]:
    """A line of some GPU keys and one other key, then lines of its keys changed as given."""
    keys = "gpu/0/util={} cuda/alloc_gb={} gpu/1/temp_c={}"
    return [f"[wandb] snapshot step=1 {keys.format(1, 2, 3)}"] + [
        f"[wandb] snapshot step={n} {pairs}" for n, pairs in enumerate(changed, start=2)
    ]


@settings(max_examples=examples(300), deadline=None)
@given(_sequence_lines(), st.one_of(st.none(), st.sets(st.sampled_from([*METRICS, "fan"]))))
@example(_after_one("gpu/0/util=1 gpu/5/util=2 gpu/1/temp_c=3"), None)  # a GPU key for another
@example(_after_one("gpu/1/temp_c=5", "gpu/0/util=1 cuda/alloc_gb=2 gpu/1/temp_c=3"), None)
@example(_after_one("gpu/1/util=1 cuda/alloc_gb=2 gpu/1/temp_c=3"), None)  # another GPU's
@example(_after_one("gpu/0/util=1 cuda/alloc_gb=2 gpu/1/temp_c=3 gpu/0/util=4"), None)
@example(_after_one("gpu/0/util=1 cuda/alloc_gb=2 gpu/1/temp_c=3 gpu/0/util=4"), {"temp_c"})
def test_lines_of_repeated_key_sequences_give_the_general_paths_rows(
    lines: list[str], metrics: set[str] | None
) -> None:
    """Lines that repeat a few key sequences, some changed (a key missing, added, replaced,
    moved or said twice, an odd value, a long index), give the general path's rows and pairs
    left out, for all metrics or some."""
    frame = _parse(lines)
    _same(read_telemetry_rows(frame, metrics), _general(frame, metrics))


def test_lines_of_a_batchs_first_key_sequences_are_cut_by_their_templates() -> None:
    """Lines repeating one of the batch's first key sequences take its template, in line
    order; a line with a key missing, an extra key or its keys in another order takes none
    but its own (the third template here), and the lines after the third sequence are left."""
    one = "gpu/0/util={} gpu/0/mem_gb={} gpu/1/util={} gpu/1/mem_gb={}"
    lines = [
        *(f"[wandb] snapshot step=1 prof/a=1 {one.format(n, 2, 3, 4)}" for n in range(3)),
        *(
            f"[wandb] snapshot step=2 gpu/1/temp_c={n} gpu/0/temp_c=6 gpu/0/temp_c=7"
            for n in range(3)
        ),
        "[wandb] snapshot step=3 gpu/0/util=1 gpu/0/mem_gb=2 gpu/1/util=3",
        f"[wandb] snapshot step=4 {one.format(1, 2, 3, 4)} gpu/2/util=1",
        "[wandb] snapshot step=5 gpu/0/mem_gb=1 gpu/0/util=2 gpu/1/util=3 gpu/1/mem_gb=4",
    ]
    assert TEMPLATES_PER_BATCH == 3
    snapshots = _parse(lines).select("ts", "text").with_row_index("_log_row")
    followed = template_rows(snapshots, None, log_rows._read_keys)
    assert followed is not None
    pieces, rest = followed
    line_rows = [piece.get_column("_log_row").unique(maintain_order=True) for piece in pieces]
    assert [rows.to_list() for rows in line_rows] == [[0, 1, 2], [3, 4, 5], [6]]
    assert rest.get_column("_log_row").to_list() == [7, 8]
    assert pieces[0].filter(pl.col("_log_row") == 1).select("gpu", "metric", "value").rows() == [
        (0, "util", 1.0),
        (0, "mem_gb", 2.0 * frames.GIB),
        (1, "util", 3.0),
        (1, "mem_gb", 4.0 * frames.GIB),
    ]
    assert pieces[1].filter(pl.col("_log_row") == 4).select("gpu", "value").rows() == [
        (0, 7.0),
        (1, 1.0),
    ]
