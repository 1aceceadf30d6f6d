"""Lines to typed polars frames: one explicit schema, vectorized extraction for every dialect.

Each metric is found by key, anywhere in the line, so prefixes (`[rank3]:`, timestamps, MPI
tags) never hide it and key order never matters. Patterns cover the DFlash log, Hugging Face
Trainer dicts, Megatron-LM / NeMo, torchtitan, nanoGPT, Lightning / tqdm bars, mmengine / mmcv /
xtuner, fairseq and DeepSpeed, plus a generic `key=value` / `key: value` form for loss-like keys.
The line shapes they accept come from real logs: see tests/data/dialects.toml and
samples/trainers/SOURCES.md.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

# A number as trainers print it, non-finite spellings included: nan, NaN, NAN, -nan, inf,
# -inf, Infinity, 6.7E+00, .5 (polars reads all of these as Float64).
NUMBER = (
    r"[-+]?(?:(?i:nan)|(?i:inf)(?i:inity)?|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
)
# Lightning / NeMo print non-finite floats as `nan.0`, `inf.0`, `-inf.`: the padding is dropped.
_PADDING = r"(?:\.0*)?"
# What may follow a value: `nan-epoch=3` in a checkpoint file name is not a value.
_END = r"""(?:[\s,|\]})';"]|$)"""
# Between key and value: quotes (Python dicts), `]` (`[Loss] nan`), `=`, `:`, ` is ` (`Loss is
# nan, stopping training`) or blanks; then maybe a printed tensor: `loss: tensor(nan, device=..)`.
_SEP = r"""['"]?\]?\s*(?:[=:]\s*|\s+is\s+|\s+)['"\[]?(?:tensor\()?"""
# An ASCII word boundary: `nll_loss` or `loss_scale` never match `loss`, and a leading
# boundary keeps the regex engine's literal search fast (a character class there halves it).
_BEFORE = r"(?-u:\b)"

# The training loss: HF `loss`, Megatron `lm loss`, nanoGPT `train loss`, Lightning
# `train_loss` / `train_loss_step`, torchtitan / mmengine `loss:`, generic `total_loss`. The word
# before it is captured: `best loss`, `val loss`, `min_loss` are not the training loss.
LOSS_PATTERN = (
    r"(?-u:\b)(?:([A-Za-z]+)[ _/])?(?i:loss)(?:_step)?"
    + _SEP
    + "("
    + NUMBER
    + ")"
    + _PADDING
    + _END
)
# Gradient norms, prefixed too (`global_grad_norm`, `learning/raw_grad_norm`); `max_grad_norm`
# and `clip_grad_norm` are the clipping threshold from a config, not a measurement.
GRAD_NORM_PATTERN = (
    r"(?-u:\b)((?:[A-Za-z]+[_/])*)(?i:grad[ _-]?norm|gradient[ _]norm|gnorm|total_norm)"
    r"(?:/total|_before_clip|_pre_clip)?" + _SEP + "(" + NUMBER + ")" + _PADDING + _END
)
NOT_TRAINING = r"(?i)^(?:best|min|max|minimum|maximum|lowest|val|valid|validation|eval|evaluation|test|dev|target|expected)$"
NOT_MEASURED = r"(?i)(?:^|[_/])(?:max|min|clip|clipping|threshold)[_/]"
LR_KEY = r"(?i:lr|learning[ _]rate)"
# `steps` only as DeepSpeed's `steps: 60`: `Total optimization steps = 2,436`, `maximum steps =
# 500000` and `--steps=2000` are configuration, not progress; slurm's `STEP 123456.0` is a job step.
STEP_KEY = r"(?:(?:global_step|num_updates|[Ss]tep|[Ii]teration|[Ii]ter)\s*[=:]?|[Ss]teps:)"
_STEP_VALUE = r"(\d+(?:\.\d+)?(?:[eE]\+?\d+)?)"
STEP_PATTERN = _BEFORE + STEP_KEY + r"\s*" + _STEP_VALUE + r"(?:\s*/\s*\d+)?(?:[\s,|\]}):]|$)"
# mmengine `Iter(train) [ 510/2046]`, `Epoch(train) [1][ 50/1000]`; mmcv `Epoch [1][200/62598]`
BRACKET_STEP_PATTERN = (
    r"(?i:iter|epoch)(?:\(train\))?\s*(?:\[\s*\d+\s*\])?\s*\[\s*(\d+)\s*/\s*\d+\s*\]"
)
# Whole-line validation / evaluation reports carry no training loss or step (single keys such as
# `eval_loss` or `val loss` are told apart by the word before `loss`).
VALIDATION = r"(?i:validation loss at|valid on '|validate step|epoch\(val\)|\| valid \|)"
# Megatron drops NaN iterations from the averaged `lm loss`; only this count shows them.
NAN_ITERATIONS = r"number of nan iterations:\s*(\d+)"
# Megatron-Core's NaN checker raises instead of logging the value.
MEGATRON_NAN = r"Unexpected result ([-+]?(?i:nan|inf))\b[^\n]*found (?i:nan|inf) in local "
# Any loss-like key (`avr_loss=nan`, `loss_net: nan`), for lines no known dialect matched;
# scale / validation / best-so-far keys are not losses.
GENERIC_LOSS = (
    r"(?i)(?-u:\b)[\w./-]*loss[\w./-]*['\"]?\s*[=:]\s*['\"]?(?:" + NUMBER + r")" + _PADDING + _END
)
_NOT_A_LOSS = (
    r"(?i)(?:^|[_/.\- ])(?:val|valid|validation|eval|test|best|min|max|scale|weight|threshold"
    r"|coef|coeff|ratio|target)(?:$|[_/.\- ])"
)

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
    "nan_iterations": pl.Int64(),
    "epoch": pl.Float64(),
    "metrics": pl.List(pl.Struct({"key": pl.String(), "value": pl.Float64()})),
}
"""The frame every parser produces and every rule reads. Metric columns are null where the line
has no such value. `telemetry` holds a snapshot's `key=value` pairs (`gpu/0/util`...);
`metrics` a step line's other numeric pairs (`acc 0.242`, `ppl=10397.87`), when parsed with
`metrics=True` (exports and reports), else null."""

_TS_HEAD_CHARS = 96
_MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}
_LOGGING_TS_FORMAT = "%Y-%m-%d %H:%M:%S,%3f"  # Python logging's default, the most common by far


def _value(pattern: str) -> pl.Expr:
    """The first capture of `pattern` as Float64 (NaN and Inf kept)."""
    return pl.col("text").str.extract(pattern, 1).cast(pl.Float64, strict=False)


def _number(key: str) -> pl.Expr:
    """The first number that follows `key` and a separator, as Float64 (NaN/Inf kept)."""
    return _value(_BEFORE + "(?:" + key + ")" + _SEP + "(" + NUMBER + ")" + _PADDING + _END)


def _integer(pattern: str) -> pl.Expr:
    """The first capture of `pattern` as an integer (`3.2e+4` and `99.0` allowed)."""
    return _value(pattern).cast(pl.Int64, strict=False)


def _keyed_metrics() -> list[pl.Expr]:
    """Loss and grad norm from their key patterns, minus the keys that name something else
    (`best loss`, `val loss`, `max_grad_norm`)."""
    loss_word = pl.col("_loss_g").struct.field("1")
    loss_blocked = loss_word.str.contains(NOT_TRAINING).fill_null(False)
    grad_prefix = pl.col("_grad_g").struct.field("1")
    grad_blocked = grad_prefix.str.contains(NOT_MEASURED).fill_null(False)
    return [
        pl.when(loss_blocked)
        .then(None)
        .otherwise(pl.col("_loss_g").struct.field("2").cast(pl.Float64, strict=False))
        .alias("loss"),
        loss_blocked.alias("_loss_blocked"),
        pl.col("_loss_g").struct.field("2").is_not_null().alias("_loss_keyed"),
        pl.when(grad_blocked)
        .then(None)
        .otherwise(pl.col("_grad_g").struct.field("2").cast(pl.Float64, strict=False))
        .alias("grad_norm"),
    ]


def _first_training_loss() -> pl.Expr:
    """For lines whose first loss key is not the training loss (`val loss 3.1, loss nan`): the
    first one that is."""
    matches = pl.col("text").str.extract_all(LOSS_PATTERN)
    word = pl.element().str.extract(r"^([A-Za-z]+)[ _/]", 1)
    training = matches.list.eval(
        pl.element().filter(~word.str.contains(NOT_TRAINING).fill_null(False))
    )
    value = training.list.first().str.extract(LOSS_PATTERN, 2)
    return value.cast(pl.Float64, strict=False)


def _generic_loss() -> pl.Expr:
    pairs = pl.col("text").str.extract_all(GENERIC_LOSS)
    keep = pairs.list.eval(
        pl.element().filter(~pl.element().str.extract(r"^([^=:]*)", 1).str.contains(_NOT_A_LOSS))
    )
    return (
        keep.list.first()
        .str.extract(r"[=:]\s*['\"]?(" + NUMBER + ")", 1)
        .cast(pl.Float64, strict=False)
    )


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
            pl.element()
            .str.extract(r"=(" + NUMBER + ")", 1)
            .cast(pl.Float64, strict=False)
            .alias("value"),
        )
    )


def _rank() -> pl.Expr:
    groups = pl.col("text").str.extract_groups(
        r"^\s*(?:\[rank(\d+)\]:|\[default(\d+)\]:|\[\d+,mpirank:(\d+)[^\]]*\]<std(?:out|err)>:|\s*(\d+): )"
    )
    return pl.coalesce(*(groups.struct.field(str(i)) for i in range(1, 5))).cast(
        pl.Int64, strict=False
    )


def parse_lines(
    text: pl.Series,
    *,
    source: str,
    first_line: int,
    default_year: int | None = None,
    metrics: bool = False,
) -> pl.DataFrame:
    """Parse a block of lines into a frame with the `SCHEMA` columns, vectorized.

    Dense columns (metrics most lines of a training log carry) are extracted over the whole
    block; sparse ones (snapshots, rank prefixes, rare dialects, timestamp fallbacks) only over
    the rows a cheap literal test selects, then filled in.
    """
    year = default_year if default_year is not None else datetime.now().year
    n = text.len()
    frame = pl.DataFrame(
        {
            "source": pl.repeat(source, n, dtype=pl.String, eager=True),
            "line": pl.int_range(first_line, first_line + n, eager=True, dtype=pl.Int64),
            "text": text.alias("text"),
        }
    )
    frame = frame.hstack(_dense(frame).get_columns())
    frame = _rare(frame, year)
    frame = _by_priority(frame)
    frame = _epoch_and_metrics(frame, metrics=metrics)
    return _derived(frame).select([pl.col(name).cast(dtype) for name, dtype in SCHEMA.items()])


def _dense(frame: pl.DataFrame) -> pl.DataFrame:
    """One pass per key over every line, plus the literal prefilters of the rare extractors."""
    txt = pl.col("text")
    return (
        frame.lazy()
        .select(
            txt.str.slice(0, 23)
            .str.to_datetime(_LOGGING_TS_FORMAT, time_unit="us", strict=False)
            .alias("ts"),
            _integer(STEP_PATTERN).alias("step"),
            txt.str.extract_groups(LOSS_PATTERN).alias("_loss_g"),
            txt.str.extract_groups(GRAD_NORM_PATTERN).alias("_grad_g"),
            _number(LR_KEY).alias("lr"),
            _integer(r"(?:^|[^\w])q_hs\s*[=:]\s*(\d+)").alias("q_hs"),
            _q_hsb(),
            (txt.str.contains("snapshot", literal=True) & txt.str.contains(r"\bsnapshot\b")).alias(
                "snapshot"
            ),
            txt.str.contains("run start:", literal=True).alias("run_start"),
            txt.str.slice(0, 16).str.contains(r"^\s*(?:\[|\d+: )").alias("_rank_rows"),
            txt.str.contains("][", literal=True).alias("_bracket_rows"),
            txt.str.contains("(train)", literal=True).alias("_train_rows"),
            txt.str.contains("reduced_train_loss", literal=True).alias("_nemo_rows"),
            txt.str.contains("Unexpected result", literal=True).alias("_megatron_rows"),
            txt.str.contains(r"(?i)oss\]|step\]").alias("_tag_rows"),
            txt.str.contains(r"(?i)valid|epoch\(val").alias("_maybe_validation"),
            txt.str.contains(r"(?i)loss").alias("_has_loss_word"),
            txt.str.contains("nan iterations", literal=True).alias("_nan_iter_rows"),
        )
        .with_columns(_keyed_metrics())
        .drop("_loss_g", "_grad_g")
        .collect()
    )


def _rare(frame: pl.DataFrame, year: int) -> pl.DataFrame:
    """Columns only a few lines carry, extracted on the rows their prefilter selected."""
    col = frame.get_column
    return frame.with_columns(
        _fill(frame, "ts", _sparse(frame, col("ts").is_null(), _timestamp(year), "ts")),
        _sparse(frame, col("_rank_rows"), _rank(), "rank"),
        _sparse(frame, col("snapshot"), _telemetry(), "telemetry"),
        _sparse(frame, col("run_start"), _integer(r"\bpid=(\d+)"), "pid"),
        _sparse(
            frame, col("_maybe_validation"), pl.col("text").str.contains(VALIDATION), "_validation"
        ),
        _sparse(frame, col("_nan_iter_rows"), _integer(NAN_ITERATIONS), "nan_iterations"),
    )


# Epochs: `epoch=0/...` (DeepSpeed), `epoch 001:` (fairseq), `'epoch': 0.01` (HF), `Epoch 3:`
# (Lightning), `Epoch(train) [1][...]` (mmengine).
EPOCH_PATTERN = r"(?i)(?-u:\b)epoch(?:['\"]?\s*[=: ]\s*['\"]?|\(train\)\s*\[\s*)(\d+(?:\.\d+)?)"
# A step line's numeric pairs: `key=value`, `'key': value`, and DFlash / fairseq-valid `| key value`.
# Case-sensitive spellings of NaN/Inf: a (?i) number here triples the cost of this pass.
_METRIC_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|nan|NaN|NAN|inf|Inf|INF)"
_METRIC_PAIR = (
    r"(?:[A-Za-z_][\w./-]*['\"]?\s*[=:]\s*['\"]?|\|\s*[A-Za-z_][\w./-]*\s+)"
    + _METRIC_NUMBER
    + r"(?:[\s,|\]})';\"]|$)"
)
_NOT_OTHER = ["step", "global_step", "iter", "iteration", "loss", "lr", "grad_norm", "q_hs"]


def _epoch_and_metrics(frame: pl.DataFrame, *, metrics: bool) -> pl.DataFrame:
    """`epoch` on the lines that say `poch`; `metrics` on step lines (only when asked: it is
    the one list-building pass, and rules do not read it)."""
    has_epoch = frame.get_column("text").str.contains("poch", literal=True)
    columns = [_sparse(frame, has_epoch, _value(EPOCH_PATTERN), "epoch")]
    if metrics:
        steps = frame.select(
            pl.col("step").is_not_null() | pl.col("loss").is_not_null()
        ).to_series()
        columns.append(_sparse(frame, steps, _metric_pairs(), "metrics"))
    else:
        columns.append(
            pl.repeat(None, frame.height, dtype=SCHEMA["metrics"], eager=True).alias("metrics")
        )
    return frame.with_columns(columns)


def _metric_pairs() -> pl.Expr:
    """Each pair matched whole, then its key and value by two small anchored patterns."""
    value = r"(" + _METRIC_NUMBER + r")[\s,|\]})';\"]?$"
    found = (
        pl.col("text")
        .str.extract_all(_METRIC_PAIR)
        .list.eval(
            pl.struct(
                pl.element().str.extract(r"([A-Za-z_][\w./-]*)", 1).alias("key"),
                pl.element().str.extract(value, 1).cast(pl.Float64, strict=False).alias("value"),
            )
        )
    )
    return found.list.eval(pl.element().filter(~pl.element().struct.field("key").is_in(_NOT_OTHER)))


def _by_priority(frame: pl.DataFrame) -> pl.DataFrame:
    """Loss, grad norm and step from every dialect's extractor, in priority order; validation
    report lines carry none of them."""
    col = frame.get_column
    frame = frame.with_columns(
        _first_of(
            frame,
            "loss",
            [
                (col("_nemo_rows"), _number("reduced_train_loss")),
                (col("_megatron_rows"), _value(MEGATRON_NAN + "forward loss")),
                (col("_tag_rows"), _number(r"\[loss\]")),
                (col("_loss_blocked"), _first_training_loss()),
            ],
            dense_after=1,
        )
    )
    frame = frame.with_columns(
        _first_of(
            frame,
            "grad_norm",
            [(col("_megatron_rows"), _value(MEGATRON_NAN + "grad norm"))],
            dense_after=1,
        ),
        _first_of(
            frame,
            "step",
            [
                (col("_bracket_rows") | col("_train_rows"), _integer(BRACKET_STEP_PATTERN)),
                (col("_tag_rows"), _integer(r"\[step\]\s*(\d+)")),
            ],
            dense_after=0,
        ),
        _fill(frame, "loss", _sparse(frame, _generic_rows(frame), _generic_loss(), "loss")),
    )
    validation = frame.get_column("_validation").fill_null(False)
    if validation.any():
        frame = frame.with_columns(
            pl.when(validation).then(None).otherwise(pl.col(name)).alias(name)
            for name in ("loss", "step", "grad_norm")
        )
    return frame


def _generic_rows(frame: pl.DataFrame) -> pl.Series:
    """Lines that say `loss` somewhere but matched no known loss key."""
    return frame.select(
        pl.col("_has_loss_word") & pl.col("loss").is_null() & ~pl.col("_loss_keyed")
    ).to_series()


def _derived(frame: pl.DataFrame) -> pl.DataFrame:
    """Counts the rules test: non-empty queue buckets, `gpu/` keys in a snapshot."""
    return frame.with_columns(
        pl.col("q_hsb")
        .list.eval((pl.element() != 0).cast(pl.UInt32))
        .list.sum()
        .alias("q_hsb_nonzero"),
        pl.col("telemetry")
        .list.eval(pl.element().struct.field("key").str.starts_with("gpu/").cast(pl.UInt32))
        .list.sum()
        .alias("gpu_keys"),
    )


def _first_of(
    frame: pl.DataFrame, name: str, sparse: list[tuple[pl.Series, pl.Expr]], *, dense_after: int
) -> pl.Series:
    """Column `name` from several extractors in priority order: the first `dense_after` sparse
    ones outrank the dense column, the rest only fill its gaps."""
    columns = [_sparse(frame, rows, expr, name) for rows, expr in sparse]
    ordered = [
        *columns[:dense_after],
        frame.get_column(name).cast(SCHEMA[name]),
        *columns[dense_after:],
    ]
    return frame.select(pl.coalesce(ordered).alias(name)).to_series()


def _sparse(frame: pl.DataFrame, rows: pl.Series, expr: pl.Expr, name: str) -> pl.Series:
    """`expr` evaluated only where `rows` is true (null elsewhere), as a full-length column."""
    dtype = SCHEMA.get(name, pl.Boolean())
    picked = rows.fill_null(False)
    count = int(picked.sum())
    if count == 0:
        return pl.repeat(None, frame.height, dtype=dtype, eager=True).alias(name)
    if count == frame.height:
        return frame.select(expr.cast(dtype).alias(name)).to_series()
    index = picked.arg_true()
    values = frame.select(pl.col("text")).filter(picked).select(expr.cast(dtype).alias(name))
    if dtype.is_nested():
        return (
            pl.DataFrame({"_i": pl.int_range(0, frame.height, eager=True, dtype=pl.UInt32)})
            .join(
                values.with_columns(index.alias("_i")), on="_i", how="left", maintain_order="left"
            )
            .get_column(name)
        )
    empty = pl.repeat(None, frame.height, dtype=dtype, eager=True)
    return empty.scatter(index, values.to_series()).alias(name)


def _fill(frame: pl.DataFrame, name: str, fallback: pl.Series) -> pl.Series:
    """The column `name`, its nulls filled from a sparse fallback column."""
    return frame.get_column(name).cast(SCHEMA[name]).fill_null(fallback).alias(name)
