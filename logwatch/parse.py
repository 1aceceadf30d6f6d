"""Lines to typed polars frames: one explicit schema, vectorized extraction for every dialect.

Each metric is found by key, anywhere in the line, so prefixes (`[rank3]:`, timestamps, MPI
tags) never hide it and key order never matters. Patterns cover the DFlash log, Hugging Face
Trainer dicts, Megatron-LM / NeMo, torchtitan, nanoGPT, Lightning / tqdm bars, mmengine / xtuner,
fairseq and DeepSpeed, plus a generic `key=value` / `key: value` form for loss-like keys.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

# A number as trainers print it, non-finite spellings included: nan, NaN, NAN, -nan, nan.0,
# inf, -inf, Infinity, 6.7E+00, .5
NUMBER = r"[-+]?(?:(?i:nan)(?:\.0+)?|(?i:inf)(?i:inity)?|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
_SEP = r"""['"]?\]?\s*(?:[=:]\s*|\s+)['"]?"""
_BEFORE = r"""(?:^|[^\w/.-])"""

# Key families. The primary loss key may carry a prefix word (`lm loss`, `train_loss`,
# `reduced_train_loss`, `train/loss`, `[Loss]`) but never a suffix: `loss_scale`, `loss scale`
# and `nll_loss` after `loss=` stay out of the `loss` column.
LOSS_KEY = r"(?i:(?:(?:lm|train|training|total|reduced_train|avg|mean)[ _/])?\[?loss(?:_step)?)"
GRAD_NORM_KEY = r"(?i:grad[ _]?norm(?:/total)?|gnorm|total_norm)"
LR_KEY = r"(?i:lr|learning[ _]rate)"
STEP_KEY = r"(?i:global_step|step|iteration|iter)"

SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "line": pl.Int64(),
    "ts": pl.Datetime("us"),
    "text": pl.String(),
    "rank": pl.Int64(),
    "step": pl.Int64(),
    "loss": pl.Float64(),
    "grad_norm": pl.Float64(),
    "lr": pl.Float64(),
    "q_hs": pl.Int64(),
    "q_hsb": pl.List(pl.Int64()),
    "q_hsb_nonzero": pl.UInt32(),
    "snapshot": pl.Boolean(),
    "telemetry": pl.List(pl.Struct({"key": pl.String(), "value": pl.Float64()})),
    "gpu_keys": pl.UInt32(),
    "run_start": pl.Boolean(),
    "pid": pl.Int64(),
}
"""The frame every parser produces and every rule reads. Metric columns are null where the line
has no such value. `telemetry` holds a snapshot's `key=value` pairs (`gpu/0/util`...)."""

_TS_HEAD_CHARS = 96
_MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}


def _number(key: str) -> pl.Expr:
    """The first number that follows `key` and a separator, as Float64 (NaN/Inf kept)."""
    raw = pl.col("text").str.extract(_BEFORE + key + _SEP + "(" + NUMBER + r")(?:[^\w.]|$)", 1)
    return _to_float(raw)


def _to_float(raw: pl.Expr) -> pl.Expr:
    cleaned = raw.str.to_lowercase().str.replace(r"^([-+]?)nan\.0+$", "${1}nan")
    return cleaned.str.replace(r"^[-+]nan$", "nan").cast(pl.Float64, strict=False)


def _integer(pattern: str) -> pl.Expr:
    return pl.col("text").str.extract(pattern, 1).cast(pl.Int64, strict=False)


def _timestamp(default_year: int) -> pl.Expr:
    """The line's own timestamp near its start, in any common form; null when it has none."""
    head = pl.col("text").str.slice(0, _TS_HEAD_CHARS)
    iso = head.str.extract_groups(
        r"(\d{4})[-/](\d{2})[-/](\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
    )
    short = head.str.extract_groups(r"\[(\d{2})/(\d{2}) (\d{2}):(\d{2}):(\d{2})\]")
    syslog = head.str.extract_groups(
        r"^(?:<\d+>)?(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2})\b"
    )
    year = pl.lit(str(default_year))
    frac = iso.struct.field("7").fill_null("0").str.pad_end(6, "0").str.slice(0, 6)
    iso_text = pl.format(
        "{}-{}-{} {}:{}:{}.{}",
        *(iso.struct.field(str(i)) for i in range(1, 7)),
        frac,
    )
    short_text = pl.format(
        "{}-{}-{} {}:{}:{}.000000", year, *(short.struct.field(str(i)) for i in range(1, 6))
    )
    month = syslog.struct.field("1").replace_strict(
        {k: f"{v:02d}" for k, v in _MONTHS.items()}, default=None
    )
    syslog_text = pl.format(
        "{}-{}-{} {}:{}:{}.000000",
        year,
        month,
        syslog.struct.field("2").str.pad_start(2, "0"),
        *(syslog.struct.field(str(i)) for i in range(3, 6)),
    )
    return (
        pl.coalesce(iso_text, short_text, syslog_text)
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.6f", time_unit="us", strict=False)
        .alias("ts")
    )


def _q_hsb() -> pl.Expr:
    body = pl.col("text").str.extract(r"(?:^|[^\w])q_hsb\s*[=:]\s*\[([^\]]*)\]", 1)
    return (
        body.str.split(",")
        .list.eval(pl.element().str.strip_chars().cast(pl.Int64, strict=False))
        .alias("q_hsb")
    )


def _telemetry() -> pl.Expr:
    pairs = pl.col("text").str.extract_all(r"(?:[\w.-]+/)+[\w.-]+=" + NUMBER)
    return pairs.list.eval(
        pl.struct(
            pl.element().str.extract(r"^([^=]+)=", 1).alias("key"),
            _to_float(pl.element().str.extract(r"=(.*)$", 1)).alias("value"),
        )
    )


def _rank() -> pl.Expr:
    groups = pl.col("text").str.extract_groups(
        r"^\s*(?:\[rank(\d+)\]:|\[default(\d+)\]:|\[\d+,mpirank:(\d+)[^\]]*\]<std(?:out|err)>:|(\d+): )"
    )
    return pl.coalesce(*(groups.struct.field(str(i)) for i in range(1, 5))).cast(
        pl.Int64, strict=False
    )


def parse_lines(
    text: pl.Series, *, source: str, first_line: int, default_year: int | None = None
) -> pl.DataFrame:
    """Parse a block of lines into a frame with the `SCHEMA` columns, vectorized."""
    year = default_year if default_year is not None else datetime.now().year
    n = text.len()
    base = pl.DataFrame(
        {
            "source": pl.Series([source], dtype=pl.String).new_from_index(0, n)
            if n
            else pl.Series([], dtype=pl.String),
            "line": pl.int_range(first_line, first_line + n, eager=True, dtype=pl.Int64),
            "text": text.alias("text"),
        }
    )
    is_snapshot = pl.col("text").str.contains(r"\bsnapshot\b") & pl.col("text").str.contains(
        "/", literal=True
    )
    run_start = pl.col("text").str.contains("run start:", literal=True)
    frame = base.lazy().with_columns(
        _timestamp(year),
        _rank().alias("rank"),
        pl.coalesce(
            _integer(_BEFORE + STEP_KEY + r"\s*[=:]?\s*(\d+)(?:\.0+)?(?:\s*/\s*\d+)?(?:[^\w.]|$)"),
            _integer(r"(?i:iter|epoch)\(train\)\s*\[\s*\d*\]?\s*\[?\s*(\d+)\s*/"),
        ).alias("step"),
        pl.coalesce(_number(LOSS_KEY), _number(r"(?i:\[loss\])")).alias("loss"),
        _number(GRAD_NORM_KEY).alias("grad_norm"),
        _number(LR_KEY).alias("lr"),
        _integer(r"(?:^|[^\w])q_hs\s*[=:]\s*(\d+)").alias("q_hs"),
        _q_hsb(),
        is_snapshot.alias("snapshot"),
        pl.when(is_snapshot).then(_telemetry()).alias("telemetry"),
        run_start.alias("run_start"),
        pl.when(run_start).then(_integer(r"\bpid=(\d+)")).alias("pid"),
    )
    frame = frame.with_columns(
        pl.col("q_hsb")
        .list.eval((pl.element() != 0).cast(pl.UInt32))
        .list.sum()
        .alias("q_hsb_nonzero"),
        pl.col("telemetry")
        .list.eval(pl.element().struct.field("key").str.starts_with("gpu/").cast(pl.UInt32))
        .list.sum()
        .alias("gpu_keys"),
    )
    return frame.select([pl.col(name).cast(dtype) for name, dtype in SCHEMA.items()]).collect()


def empty_frame() -> pl.DataFrame:
    """A frame with the schema and no rows."""
    return pl.DataFrame(schema=SCHEMA)
