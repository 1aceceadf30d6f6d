"""A log's own GPU telemetry (`gpu/<i>/<metric>=v` snapshot keys) as narrow rows, a row per GPU,
metric and line, read the same way on the wide and narrow paths: a value no GPU column holds is
missing, an impossible index is dropped, and the first of each is said (`DroppedPair`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import polars as pl

from logwatch.gpu.frames import _LOG_METRICS, GIB, GPU_SCHEMA, METRIC
from logwatch.gpu.template import template_rows
from logwatch.parse.telemetry import PAIRS_COLUMN, telemetry_pairs

_INTEGER_METRICS = frozenset(
    key for key, (column, _) in _LOG_METRICS.items() if GPU_SCHEMA[column].is_integer()
)
"""The snapshot metrics read into integer columns (bytes): a value may be past what they hold."""

_DROPPED = {
    "value": "snapshot value {pair} is not a number a GPU column can hold; read as missing"
    " (later such values not repeated)",
    "index": "snapshot key {pair} has a GPU index no GPU has; dropped"
    " (later such keys not repeated)",
}


@dataclass(frozen=True, slots=True)
class DroppedPair:
    """A snapshot `gpu/<i>/<metric>=<number>` pair the GPU rows could not take: a value its
    column cannot hold (`mem_gb=nan`, `mem_gb=1e30`: no Int64 of bytes), read as missing, or
    an index no Int64 holds (`gpu/99999999999999999999/util=1`), dropped. `row`: its line's
    row in the batch."""

    kind: str  # "value" or "index"
    row: int
    pair: str

    @property
    def message(self) -> str:
        """What a user is told, once per source and kind (without the file and line)."""
        return _DROPPED[self.kind].format(pair=self.pair)


@dataclass(frozen=True, slots=True)
class TelemetryRows:
    """`read_telemetry_rows`' answer: the narrow rows, and the first pair of each kind that
    they leave out (in line order; none when they leave none)."""

    rows: pl.DataFrame
    dropped: tuple[DroppedPair, ...] = ()


def telemetry_rows(
    frame: pl.DataFrame,
    metrics: Collection[str] | None = None,
    *,
    plain_pairs: pl.Series | None = None,
) -> pl.DataFrame:
    """The batch's GPU snapshot keys, narrow (`read_telemetry_rows`, without what it left out)."""
    return read_telemetry_rows(frame, metrics, plain_pairs=plain_pairs).rows


def read_telemetry_rows(
    frame: pl.DataFrame,
    metrics: Collection[str] | None = None,
    *,
    plain_pairs: pl.Series | None = None,
) -> TelemetryRows:
    """The batch's GPU snapshot keys, narrow: one row per (`_log_row`, gpu, metric) with `ts`
    and the `value` in its GPU-frame unit, ordered by (`_log_row`, gpu, metric).

    Reads only `text` (or `PAIRS_COLUMN`), `snapshot` and `ts`; gives the values
    `telemetry_to_gpu_frame` gives (a key said twice on a line: its last value), without a
    pivot. `metric` is a `METRIC` enum. With `metrics` (snapshot keys, `log_gpu_metrics`),
    only the rows of those. A value its column cannot hold is read as missing (null) and a
    key whose index no Int64 holds is dropped, as the wide path reads them: the first of
    each, if any, is in `dropped`. Lines of plain pairs (`PLAIN_PAIRS_LINE`) are cut by
    position (`_plain_rows`); the others read the pairs as the parser does (`_general_rows`).
    `plain_pairs`: per row of `frame`, true where its line is known to be a plain-pairs line
    (`ParsedBlock.plain_pairs`): only the other lines are matched.
    """
    kept = None if metrics is None else frozenset(metrics) & set(_LOG_METRICS)
    read = [name for name in ("text", PAIRS_COLUMN) if name in frame.columns]
    snapshots = (
        frame.select("ts", *read, "snapshot")
        .with_row_index("_log_row")
        .filter(pl.col("snapshot").fill_null(False))
    )
    snapshots = snapshots.with_columns(_plain(snapshots, read, frame.height, plain_pairs))
    fast = _plain_rows(snapshots.filter(pl.col("_plain")), kept)
    rest = snapshots.filter(~pl.col("_plain"))
    lost = None
    if fast is None:  # a key the general path must read: every line takes it
        rows, lost = _general_rows(snapshots, kept)
    elif rest.is_empty():
        rows = fast
    else:
        general, lost = _general_rows(rest, kept)
        rows = pl.concat([fast, general]).sort("_log_row", maintain_order=True)
    return _held(frame, rows, lost, check=kept is None or bool(kept & _INTEGER_METRICS))


def _held(
    frame: pl.DataFrame, narrow: pl.DataFrame, lost: DroppedPair | None, *, check: bool = True
) -> TelemetryRows:
    """`narrow` (of `frame`'s lines) with each value its column cannot hold (an integer
    column's NaN, inf, or a number past Int64 once in bytes) read as missing, as the wide
    path's cast reads it, and what was left out: `lost` (a dropped key) and the first such
    value. `check`: whether `narrow` may hold integer metrics."""
    dropped = [] if lost is None else [lost]
    if check:
        value = pl.col("value")
        integer = pl.col("metric").is_in(list(_INTEGER_METRICS))
        unheld = integer & value.is_not_null() & value.cast(pl.Int64, strict=False).is_null()
        found = narrow.select(unheld.arg_true().first()).item()
        if found is not None:
            narrow = narrow.with_columns(pl.when(unheld).then(None).otherwise(value).alias("value"))
            dropped.append(_unheld_pair(frame, narrow, found))
    return TelemetryRows(narrow, tuple(sorted(dropped, key=lambda pair: pair.row)))


def _plain(
    snapshots: pl.DataFrame, read: list[str], rows: int, known: pl.Series | None
) -> pl.Series:
    """The `_plain` column: whether each snapshot line (`_log_row` of a frame of `rows` rows)
    is a plain-pairs line, matched only on the lines `known` (per row of that frame) does not
    say are."""
    if "text" not in read:
        return pl.repeat(False, snapshots.height, dtype=pl.Boolean, eager=True).alias("_plain")
    plain = pl.col("text").str.contains(PLAIN_PAIRS_LINE).fill_null(False)
    if known is None:
        return snapshots.select(plain.alias("_plain")).to_series()
    if known.len() != rows:
        raise ValueError(f"plain_pairs has {known.len()} rows for a frame of {rows}")
    said = known.gather(snapshots.get_column("_log_row"))
    if said.all():
        return said.alias("_plain")
    unsaid = (~said).arg_true()
    checked = snapshots.get_column("text").gather(unsaid).to_frame().select(plain).to_series()
    return said.scatter(unsaid, checked).alias("_plain")


PLAIN_PAIRS_LINE = r"^[^/]*(?: [a-z0-9_]+(?:/[a-z0-9_]+)+=-?[0-9]+(?:\.[0-9]+)?)*$"
"""A line whose only `/` are in plain ` key=value` pairs at its end (lowercase keys, decimal
values: the `dflash-snapshot` shape's pairs). On such a line the parser's pairs
(`parse.telemetry.TELEMETRY_PAIR`, leftmost first) are exactly those pairs: a pair needs a `/`,
none is before them, and none can span their blanks. So its blanks cut exactly those pairs."""


def _plain_rows(lines: pl.DataFrame, kept: frozenset[str] | None) -> pl.DataFrame | None:
    """`_general_rows` of `PLAIN_PAIRS_LINE` lines (only the `kept` metrics, None: all), cut
    by position: the lines that repeat one of the batch's key sequences by its template
    (`template_rows`), the others by `_split_rows`. None when a key's index is too long to be
    sure to fit an Int64."""
    followed = template_rows(lines, kept, _read_keys)
    if followed is None:
        return None
    pieces, rest = followed
    if rest.height or not pieces:
        split = _split_rows(rest, kept)
        if split is None:
            return None
        pieces.append(split)
    return (
        pieces[0] if len(pieces) == 1 else pl.concat(pieces).sort("_log_row", maintain_order=True)
    )


def _split_rows(lines: pl.DataFrame, kept: frozenset[str] | None) -> pl.DataFrame | None:
    """`_plain_rows` of any plain lines: each split at its blanks, each `gpu/` pair at its
    first `=`; the (few) distinct keys are read once."""
    p = pl.col("_p")
    pairs = (
        lines.select("_log_row", "ts", pl.col("text").str.split(" ").alias("_p"))
        .explode("_p")
        .filter(p.str.starts_with("gpu/"))
        .select("_log_row", "ts", p.str.splitn("=", 2).alias("_kv"))
        .unnest("_kv")
        .rename({"field_0": "_key", "field_1": "_value"})
    )
    keys = _read_keys(pairs.get_column("_key").unique(), kept)
    if keys is None:
        return None
    value = pl.col("_value").cast(pl.Float64, strict=False)
    scaled = pl.when(pl.col("_scale") != 1.0).then(value * pl.col("_scale")).otherwise(value)
    rows = pairs.join(keys, on="_key", how="inner", maintain_order="left").select(
        "_log_row", "ts", "gpu", "metric", scaled.alias("value")
    )
    keyed = pl.col("_log_row"), pl.col("gpu"), pl.col("metric").to_physical()
    ascending = pl.any_horizontal(_after(keyed)).all()  # no key twice, in order already
    if rows.height < 2 or rows.select(ascending).item():
        return rows
    return _last_of_each_key(rows.sort("_log_row", "gpu", "metric", maintain_order=True))


def _read_keys(keys: pl.Series, kept: frozenset[str] | None) -> pl.DataFrame | None:
    """The distinct `gpu/<index>/<metric>` keys of `kept` metrics (None: all known), as
    (`_key`, gpu, metric, `_scale`); None when a key has an all-digit index of 19 or more
    digits (it may not fit an Int64: the general path decides)."""
    cut = keys.to_frame("_key").with_columns(pl.col("_key").str.splitn("/", 3).alias("_parts"))
    index = pl.col("_parts").struct.field("field_1")
    metric = pl.col("_parts").struct.field("field_2")
    digits = index.str.contains(r"^[0-9]+$")
    if cut.select((digits & (index.str.len_bytes() >= 19)).any()).item():
        return None
    scales = pl.DataFrame(
        {"metric": list(_LOG_METRICS), "_scale": [scale for _, scale in _LOG_METRICS.values()]},
        schema={"metric": pl.String, "_scale": pl.Float64},
    )
    return (
        cut.filter(digits & metric.is_in(list(_LOG_METRICS if kept is None else kept)))
        .select("_key", index.cast(pl.Int64).alias("gpu"), metric.alias("metric"))
        .join(scales, on="metric")
        .with_columns(pl.col("metric").cast(METRIC))
    )


def _after(keyed: tuple[pl.Expr, ...]) -> list[pl.Expr]:
    """Per row, whether the next row's key (lexicographic over `keyed`) is greater: one
    condition per leading column that differs; the last row counts as ordered."""
    out, equal_before = [], pl.lit(True)
    for column in keyed:
        nxt = column.shift(-1)
        out.append((equal_before & (nxt > column)).fill_null(True))
        equal_before = equal_before & (nxt == column)
    return out


def _general_rows(
    snapshots: pl.DataFrame, kept: frozenset[str] | None
) -> tuple[pl.DataFrame, DroppedPair | None]:
    """The GPU rows of snapshot lines (`_log_row`, ts, `text` or `PAIRS_COLUMN`) of `kept`
    metrics (None: all), read from the pairs the parser reads (`telemetry_pairs`), and the
    first of their keys whose all-digit index no Int64 holds (those are dropped)."""
    cut = _cut(_gpu_pairs(snapshots))
    known = pl.col("metric").is_in(list(_LOG_METRICS if kept is None else kept))
    digits = pl.col("_index").str.contains(r"^\d+$")
    index = pl.when(digits).then(pl.col("_index")).cast(pl.Int64, strict=False)
    indexed = cut.filter(known.fill_null(False)).with_columns(index.alias("gpu"))
    lost = indexed.filter(pl.col("gpu").is_null() & digits).head(1)
    mem = pl.col("metric").is_in([k for k, (_, scale) in _LOG_METRICS.items() if scale != 1.0])
    value = pl.col("value").cast(pl.Float64, strict=False)
    narrow = (
        indexed.filter(pl.col("gpu").is_not_null())
        .select(
            "_log_row",
            "ts",
            "gpu",
            pl.col("metric").cast(METRIC),
            pl.when(mem).then(value * float(GIB)).otherwise(value).alias("value"),
        )
        .sort("_log_row", "gpu", "metric", maintain_order=True)
    )
    dropped = None
    if lost.height:
        dropped = DroppedPair("index", int(lost.item(0, "_log_row")), str(lost.item(0, "_p")))
    return _last_of_each_key(narrow), dropped


def _last_of_each_key(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows sorted by (`_log_row`, gpu, metric), each key's last kept."""
    keyed = pl.col("_log_row"), pl.col("gpu"), pl.col("metric")
    return rows.filter(pl.any_horizontal([c != c.shift(-1) for c in keyed]).fill_null(True))


def _unheld_pair(frame: pl.DataFrame, narrow: pl.DataFrame, at: int) -> DroppedPair:
    """The pair of the value `_held` reads as missing at row `at` of `narrow`: the last pair
    of its line with its index and metric, as the parser reads the line's pairs."""
    row, gpu = narrow.item(at, "_log_row"), narrow.item(at, "gpu")
    metric = str(narrow.item(at, "metric"))
    given = PAIRS_COLUMN in frame.columns
    said = pl.col(PAIRS_COLUMN) if given else telemetry_pairs()
    pairs: list[str] = frame.slice(row, 1).select(said).item().to_list()
    for pair in reversed(pairs):
        key = pair.partition("=")[0].split("/")
        index = key[1] if len(key) == 3 and key[0] == "gpu" and key[2] == metric else ""
        if index.isascii() and index.isdigit() and int(index) == gpu:
            return DroppedPair("value", row, pair)
    return DroppedPair("value", row, f"gpu/{gpu}/{metric}")


def _gpu_pairs(snapshots: pl.DataFrame) -> pl.DataFrame:
    """The snapshot lines' `gpu/...=<number>` pairs, one row each: (`_log_row`, ts, `_p`)."""
    given = PAIRS_COLUMN in snapshots.columns
    pairs = pl.col(PAIRS_COLUMN) if given else telemetry_pairs()
    return (
        snapshots.select("_log_row", "ts", pairs.alias("_p"))
        .explode("_p")
        .filter(pl.col("_p").str.starts_with("gpu/"))
    )


def _cut(pairs: pl.DataFrame) -> pl.DataFrame:
    """Each `gpu/<index>/<metric>=<number>` pair cut at its first `=` (a key holds none) and
    its key at the first two `/`: `_index`, `metric`, `value` as text."""
    kv = pairs.with_columns(pl.col("_p").str.splitn("=", 2).alias("_kv"))
    key = kv.select(pl.col("_kv").struct.field("field_0").str.splitn("/", 3)).to_series()
    return kv.select(
        "_log_row",
        "ts",
        "_p",
        key.struct.field("field_1").alias("_index"),
        key.struct.field("field_2").alias("metric"),
        pl.col("_kv").struct.field("field_1").alias("value"),
    )


def cut_rows(
    frame: pl.DataFrame, column: str, bounds: Sequence[tuple[int, int]]
) -> list[pl.DataFrame]:
    """The rows of `frame` (sorted by its row `column`) in each [begin, end) of `bounds`, with
    `column` counted from `begin`: slices of one subtraction, no query."""
    rows = frame.get_column(column)
    edges = pl.Series([edge for bound in bounds for edge in bound], dtype=rows.dtype)
    at = rows.search_sorted(edges, side="left").to_list()
    # each row's piece's begin (the largest at or before it; 0 before the first, a row in no
    # piece), subtracted once for all rows: a subtraction per piece cost more than its slice
    begins = pl.Series([0, *(begin for begin, _ in bounds)], dtype=rows.dtype)
    counted = frame.with_columns(rows - begins.gather(begins.search_sorted(rows, side="right") - 1))
    return [counted.slice(low, high - low) for low, high in zip(at[::2], at[1::2], strict=True)]
