"""Lines to typed polars frames: one explicit schema, vectorized extraction for every dialect.

Each metric is found by key, anywhere in the line, so prefixes (`[rank3]:`, timestamps, MPI
tags) never hide it and key order never matters. Patterns cover the DFlash log, Hugging Face
Trainer dicts, Megatron-LM / NeMo, torchtitan, nanoGPT, Lightning / tqdm bars, mmengine / mmcv /
xtuner, fairseq and DeepSpeed, OpenNMT (`xent`), darknet, detectron2 and ESPnet, plus a generic
`key=value` / `key: value` form for loss-like keys. Any non-finite training-loss key on a line makes
its `loss` non-finite; NaNs said in words (`Loss became infinite or NaN`) count as NaN.
The line shapes they accept come from real logs: see tests/data/dialects.toml and
samples/trainers/SOURCES.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache

import polars as pl

from logwatch.shapes import SHAPES, cut_tokens, line_shape
from logwatch.timestamps import ParsedBlock, dated_timestamp, yearless_timestamp

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
# and `clip_grad_norm` are the clipping threshold from a config, not a measurement. rlpyt-style
# tabular loggers (rlpyt, dreamer) add a network and a statistic of the iteration's norms:
# `grad_norm_model/Max  nan` (not `/Std`: a spread is not a norm).
GRAD_NORM_PATTERN = (
    r"(?-u:\b)((?:[A-Za-z]+[_/])*)(?i:grad[ _-]?norm|gradient[ _]norm|gnorm|total_norm)"
    r"(?:/total|_before_clip|_pre_clip|(?:_[a-z]+)?/(?:Average|Mean|Median|Min|Max))?"
    + _SEP
    + "("
    + NUMBER
    + ")"
    + _PADDING
    + _END
)
NOT_TRAINING = r"(?i)^(?:best|min|max|minimum|maximum|lowest|val|vali|valid|validation|eval|evaluation|test|dev|target|expected)$"
NOT_MEASURED = r"(?i)(?:^|[_/])(?:max|min|clip|clipping|threshold)[_/]"
LR_KEY = r"(?i:lr|learning[ _]rate)"
# `steps` only as DeepSpeed's `steps: 60`: `Total optimization steps = 2,436`, `maximum steps =
# 500000` and `--steps=2000` are configuration, not progress; slurm's `STEP 123456.0` is a job step.
STEP_KEY = r"(?:(?:global_step|num_updates|[Ss]tep|[Ii]teration|[Ii]ter)\s*[=:]?|[Ss]teps:)"
_STEP_VALUE = r"(\d+(?:\.\d+)?(?:[eE]\+?\d+)?)"
# OpenNMT ends its step with `;` (`Step 5650/50000;`), detectron2 with `!` (`iteration=2137!`).
STEP_PATTERN = _BEFORE + STEP_KEY + r"\s*" + _STEP_VALUE + r"(?:\s*/\s*\d+)?(?:[\s,|\]}):;!]|$)"
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
    r"(?i)(?-u:\b)[\w./-]*loss[\w./-]*['\"]?\s*[=:]\s*['\"]?(?:tensor\()?(?:"
    + NUMBER
    + r")"
    + _PADDING
    + _END
)
_NOT_A_LOSS = (
    r"(?i)(?:^|[_/.\- ])(?:val|vali|valid|validation|eval|test|dev|best|min|max|scale|weight"
    r"|threshold|coef|coeff|ratio|target)(?:$|[_/.\- ])"
    # camelCase held-out keys: `ValLoss`, `valLoss`, `testLoss`
    r"|(?:^|[_/.\- ])(?i:val|vali|valid|validation|eval|test|dev)(?-i:Loss)"
)

# One literal pass selects the lines every rare loss extractor below looks at: a non-finite
# spelling (`nan`, `NaN`, `-nan`, `inf`, `INF ` but not `INFO`), OpenNMT's `xent`, darknet's
# ` rate, `. Each extractor is exact on its own; this only keeps them off healthy lines.
RARE_LOSS_GATE = r"nan|NaN|NAN|inf|Inf|INF |INF,|INF\||INF$|xent| rate, "
# Every loss-keyed value on a line, for lines that say a non-finite word: sub-losses (`model_loss
# inf` after `image_loss 5.0`), table rows (`| model_loss/Average    nan`), keys in dashes or
# Markdown emphasis (`-----loss-----:  tensor(nan`, `**loss**: nan**`). The word before the key
# is captured (`val loss`, `best loss`).
ANY_LOSS = (
    r"(?:([A-Za-z]+) )?([\w./*-]*(?i:loss)[\w./*-]*)['\"]?\]?\s*(?:[=:]\s*|\s+)['\"\[]?(?:tensor\()?("
    + NUMBER
    + ")"
    + _PADDING
    + r"""(?:[\s,|\]})';"*/]|$)"""
)
# OpenNMT-py reports its training loss as `xent` (its ppl is exp(xent)).
XENT_PATTERN = r"(?-u:\b)(?:([A-Za-z]+) )?xent" + _SEP + "(" + NUMBER + ")" + _PADDING + _END
# darknet / YOLO, positional: ` 74: -nan, -nan avg loss, 0.000100 rate, ...` (batch: loss, running
# average, learning rate); pjreddie's older form prints `avg,` without `loss`.
DARKNET_PATTERN = (
    r"^\s*(\d+): (" + NUMBER + "), (" + NUMBER + r") avg(?: loss)?, (" + NUMBER + ") rate, "
)
# NaNs reported in words, no value printed: detectron2's anomaly check, a trainer zeroing a bad
# loss; torch anomaly mode names the backward function (a gradient, so grad_norm).
LOSS_NAN_WORDS = r"Loss became infinite or NaN at iteration|\[NaN/Inf detected\] Loss\b"
GRAD_NAN_WORDS = r"Function '[^']+' returned (?i:nan) values in its \d+\w* output"

# Lightning's `train_loss_epoch` averages the past epoch: after one NaN step it stays NaN for the
# whole next epoch, so on a line with the step's own loss it does not make that loss NaN.
_AGGREGATE = r"(?i)[_/]epoch$"

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
    "throughput": pl.Float64(),
    "epoch": pl.Float64(),
    "metrics": pl.List(pl.Struct({"key": pl.String(), "value": pl.Float64()})),
}
"""The frame every parser produces and every rule reads. Metric columns are null where the line
has no such value. `telemetry` holds a snapshot's `key=value` pairs (`gpu/0/util`...).
`throughput` is work per second as the trainer prints it (tokens/s, samples/s or it/s; tflops is
not throughput). `metrics` holds a step line's other numeric pairs (`acc 0.242`, `ppl=10397.87`),
when parsed with `metrics=True` (exports and reports), else null."""

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


def _keyed_metrics(*, loss: bool, grad: bool) -> list[pl.Expr]:
    """Loss and grad norm from their key patterns, minus the keys that name something else
    (`best loss`, `val loss`, `max_grad_norm`)."""
    exprs: list[pl.Expr] = []
    if loss:
        loss_word = pl.col("_loss_g").struct.field("1")
        loss_blocked = loss_word.str.contains(NOT_TRAINING).fill_null(False)
        exprs += [
            pl.when(loss_blocked)
            .then(None)
            .otherwise(pl.col("_loss_g").struct.field("2").cast(pl.Float64, strict=False))
            .alias("loss"),
            loss_blocked.alias("_loss_blocked"),
            pl.col("_loss_g").struct.field("2").is_not_null().alias("_loss_keyed"),
        ]
    if grad:
        grad_prefix = pl.col("_grad_g").struct.field("1")
        grad_blocked = grad_prefix.str.contains(NOT_MEASURED).fill_null(False)
        exprs.append(
            pl.when(grad_blocked)
            .then(None)
            .otherwise(pl.col("_grad_g").struct.field("2").cast(pl.Float64, strict=False))
            .alias("grad_norm")
        )
    return exprs


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


def _training_value(pattern: str) -> pl.Expr:
    """`pattern`'s value (group 2), unless the word before (group 1) says validation / best."""
    groups = pl.col("text").str.extract_groups(pattern)
    blocked = groups.struct.field("1").str.contains(NOT_TRAINING).fill_null(False)
    value = groups.struct.field("2").cast(pl.Float64, strict=False)
    return pl.when(blocked).then(None).otherwise(value)


def _nan_if(pattern: str) -> pl.Expr:
    """NaN where the line says `pattern` (a NaN reported in words), else null."""
    return pl.when(pl.col("text").str.contains(pattern)).then(pl.lit(float("nan")))


def _darknet_loss() -> pl.Expr:
    """darknet's batch loss, or its running average when only that one is non-finite."""
    groups = pl.col("text").str.extract_groups(DARKNET_PATTERN)
    batch = groups.struct.field("2").cast(pl.Float64, strict=False)
    average = groups.struct.field("3").cast(pl.Float64, strict=False)
    return pl.when(batch.is_finite() & ~average.is_finite()).then(average).otherwise(batch)


def _nonfinite_loss_value() -> pl.Expr:
    """The first non-finite value of a training-loss key on the line (sub-losses included;
    validation, best-so-far, epoch-average, scale and weight keys are not), else null."""
    match = pl.element().str.extract_groups(ANY_LOSS)
    value = match.struct.field("3").cast(pl.Float64, strict=False)
    keep = (
        ~match.struct.field("1").str.contains(NOT_TRAINING).fill_null(False)
        & ~match.struct.field("2").str.contains(_NOT_A_LOSS)
        & ~match.struct.field("2").str.contains(_AGGREGATE)
        & ~value.is_finite()
    )
    first = pl.col("text").str.extract_all(ANY_LOSS).list.eval(pl.element().filter(keep))
    return first.list.first().str.extract(ANY_LOSS, 3).cast(pl.Float64, strict=False)


def _any_nonfinite_loss(frame: pl.DataFrame, col: _Prefilters) -> pl.Series:
    """`loss` as the primary loss, made non-finite when another training-loss key on the line
    is (`image_loss 5.0 / model_loss inf`). NeMo's own `reduced_train_loss` stays primary over
    Lightning's running `loss=` (a NaN there lasts 20 steps after the real one recovered)."""
    if not col.some("_rare_loss_rows") or not col.some("_has_loss_word"):
        return frame.get_column("loss")
    # where the primary loss is already non-finite, nothing is replaced: not searched
    rows = frame.select(
        pl.col("_rare_loss_rows")
        & pl.col("_has_loss_word")
        & ~pl.col("_nemo_rows")
        & pl.col("loss").is_finite().fill_null(True)
    ).to_series()
    found = _sparse(frame, rows, _nonfinite_loss_value(), "loss")
    loss = frame.get_column("loss")
    if found.null_count() == found.len():
        return loss  # no other loss key is non-finite (native checks: no query)
    replace = found.is_not_null() & loss.is_finite().fill_null(True)
    return loss.zip_with(~replace, found).alias("loss")


def _darknet_rank(frame: pl.DataFrame, col: _Prefilters) -> pl.Series:
    """darknet's ` 74: ` is its batch number, not an `srun --label` rank prefix."""
    rank = frame.get_column("rank")
    rows = col("_rare_loss_rows")
    if rows is None:
        return rank
    darknet = _sparse(frame, rows, pl.col("text").str.contains(DARKNET_PATTERN), "_darknet")
    return rank.zip_with(~darknet.fill_null(False), pl.Series([None], dtype=rank.dtype))


# Detection trainers print the total loss on the step's line and each component on a line of
# its own after it (tf-faster-rcnn ` >>> rpn_loss_cls: 0.000065`, Caffe `Train net output #1:
# loss_cls = 0.177461`): a finite component key (`loss` joined to another word, not a total) on
# a line with no step or epoch is not the training loss. A non-finite one still is.
_COMPONENT_KEY = r"(?i)[a-z0-9][_./-]loss|loss[_./-][a-z0-9]"
_TOTAL_KEY = r"(?i)(?:^|[^a-z])(?:total|overall|full|sum|avg|avr|average|mean|running)[_./-]loss|loss[_./-](?:total|overall|sum|all)\b"
_PROGRESS = "|".join((STEP_PATTERN, BRACKET_STEP_PATTERN, r"(?i:epoch)"))


def _generic_loss() -> pl.Expr:
    pairs = pl.col("text").str.extract_all(GENERIC_LOSS)
    keep = pairs.list.eval(
        pl.element().filter(~pl.element().str.extract(r"^([^=:]*)", 1).str.contains(_NOT_A_LOSS))
    )
    first = keep.list.first()
    key = first.str.extract(r"^([^=:]*)", 1)
    value = first.str.extract(r"[=:]\s*['\"]?(?:tensor\()?(" + NUMBER + ")", 1).cast(
        pl.Float64, strict=False
    )
    component_alone = (
        key.str.contains(_COMPONENT_KEY)
        & ~key.str.contains(_TOTAL_KEY)
        & value.is_finite()
        & ~pl.col("text").str.contains(_PROGRESS)
    )
    return pl.when(component_alone.fill_null(False)).then(None).otherwise(value)


# Throughput, in the units trainers print it. A cheap literal test picks the lines first: `/s`
# (`9.80it/s`, `samples/sec: 233.5`, `tok/s 49791`), `s/it`, `PerSec`, `per_second`, torchtitan's
# `tps`, fairseq's `wps`, and the per-iteration durations. Then a keyed rate (`tps: 1,321`,
# `wps=18515`), else a rate with its unit after it (tqdm's `9.80it/s`), else a duration per
# iteration, inverted: tqdm's `4.12s/it` when slow, `speed: 0.1788s/iter` (Informer and the
# Time-Series-Library), TF-slim's `(1.174 sec/step)`, Megatron's `elapsed time per iteration
# (ms): 3512.7`, NiftyNet's `loss=0.35 (3.94s)` (a duration in brackets ending a loss line),
# mmengine / mmcv / detectron2's `time: 0.4093  data_time: 0.0012` (seconds an iteration took,
# before the data loading's share of it), nanoGPT's `iter 100: loss 2.31, time 123.45ms`.
# Each pattern starts or ends in a literal the regex engine searches for fast (one alternation
# of them all is 5x slower).
THROUGHPUT_HINT = r"/s|s/it|PerSec|_per_sec|tps|wps|s / it|sec/step|s\)|data_time|time \d"
_COUNT = r"(\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)"  # `1,321` (torchtitan) is 1321
_RATE_KEY = (
    r"(?-u:\b)(?:CurrSamplesPerSec|tokens?(?:/s(?:ec)?|_per_sec(?:ond)?)|toks?/s(?:ec)?|tps|wps"
    r"|samples(?:/s(?:ec)?|_per_sec(?:ond)?)|it/s)['\"]?\s*[=:]?\s*['\"]?" + _COUNT
)
_RATE_AFTER = _COUNT + r"\s*(?:it|iter|tok|toks|tokens|samples)/s(?-u:\b)"
_SECONDS_PER_IT = _COUNT + r"\s*s(?:ec)?\s*/\s*(?:it(?:er)?|step)(?-u:\b)"
_MS_PER_IT = r"elapsed time per iteration \(ms\):\s*" + _COUNT
# the bracketed duration must end the line and follow a loss: `(10.94)` after fairseq's loss is
# its running average, `Saved checkpoint (3.9s)` is no iteration
_SECONDS_AFTER_LOSS = r"(?i:loss)[^()]*\(" + _COUNT + r"\s*s\)\s*$"
# mmengine `time: 1.3447  data_time: 0.0181`, mmcv 1.x `time: 0.825, data_time: 0.053`,
# detectron2 `time: 0.4093  last_time: 0.4011  data_time: 0.0012`: the key `time` alone (not
# `last_time`, `eta`), then the data time, so a clock (`time: 12:03:01`) or an elapsed total is not
# read
_SECONDS_BEFORE_DATA = (
    r"(?:^|[\s,|])time:\s*" + _COUNT + r"[,\s]+(?:last_time:\s*[\d.]+[,\s]+)?data_time:"
)
_MS_AFTER_LOSS = r"(?i:loss)[^|]*\btime:?\s*" + _COUNT + r"\s*ms(?-u:\b)"  # nanoGPT
# what a validation or test pass prints of its own pace: fairseq, mmengine
_NOT_TRAINING_PACE = r"valid on '|(?:Epoch|Iter)\((?:val|test)\)"


def _throughput() -> pl.Expr:
    """Work per second: a keyed rate, else a rate with its unit after it, else 1 / the
    duration of an iteration."""

    def rate(pattern: str) -> pl.Expr:
        found = pl.col("text").str.extract(pattern, 1).str.replace_all(",", "", literal=True)
        return found.cast(pl.Float64, strict=False)

    durations = (
        rate(_SECONDS_PER_IT),
        rate(_MS_PER_IT) / 1000.0,
        rate(_SECONDS_AFTER_LOSS),
        rate(_SECONDS_BEFORE_DATA),
        rate(_MS_AFTER_LOSS) / 1000.0,
    )
    inverted = (pl.when(s > 0).then(1.0 / s) for s in durations)  # `0.0000s/iter` says nothing
    found = pl.coalesce(rate(_RATE_KEY), rate(_RATE_AFTER), *inverted)
    return pl.when(~pl.col("text").str.contains(_NOT_TRAINING_PACE)).then(found)


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


ALWAYS = frozenset({"source", "line", "text", "ts", "run_start"})
"""Columns every parse computes: what the engine needs to place an event (its line and time)
and to cut a batch where a run restarts. (An event's step is computed with its batch's events;
`Engine` asks for it.)"""

_DERIVED = {"q_hsb_nonzero": "q_hsb", "gpu_keys": "snapshot"}
_COUNTED = sorted({name for shape in SHAPES for name in shape.counts})
"""Derived columns some shape counts on its own lines."""
# What each value column's extractors read besides `text`: validation lines lose loss, step and
# grad norm; darknet's batch number is not a rank; `metrics` is read on step and loss lines.
_DEPENDS = {"metrics": ("step", "loss"), **{name: (base,) for name, base in _DERIVED.items()}}


def closure(columns: Iterable[str] | None, *, metrics: bool = False) -> frozenset[str]:
    """The columns a parse computes for `columns` (None: all of `SCHEMA`): those asked, what
    they are derived from, and `ALWAYS`; `metrics` only when asked for."""
    if columns is None:
        wanted = set(SCHEMA) - {"metrics"}
    else:
        unknown = set(columns) - set(SCHEMA)
        if unknown:
            raise ValueError(f"no such parsed column: {', '.join(sorted(unknown))}")
        wanted = set(columns)
    if metrics:
        wanted.add("metrics")
    return _with_bases(wanted | ALWAYS)


def _with_bases(names: Iterable[str]) -> frozenset[str]:
    """`names` and the columns they are derived from."""
    return frozenset(names) | {base for name in names for base in _DEPENDS.get(name, ())}


def parse_lines(
    text: pl.Series,
    *,
    source: str,
    first_line: int,
    default_year: int | None = None,
    metrics: bool = False,
    columns: Iterable[str] | None = None,
    shapes: bool = True,
) -> pl.DataFrame:
    """Parse a block of lines into a frame with the `SCHEMA` columns, vectorized.

    Lines of a known shape (`logwatch.shapes`) are cut by one anchored pattern; every other line
    takes the general path, where dense columns (metrics most lines carry) are extracted over
    all its lines and sparse ones (snapshots, rank prefixes, rare dialects, timestamp
    fallbacks) only over the rows a cheap literal test selects. A timestamp without a year
    takes the year of the last dated line before it in the block, else `default_year` (this
    year when None); `parse_block` says which lines took `default_year`, for drivers that carry
    the year from block to block. `metrics`: fill the `metrics` column (exports, reports; rules
    do not read it), else it is null. `columns`: compute only these (and `ALWAYS`); the others
    are null, until `complete` adds them. `shapes=False`: every line by the general path (the
    reference the shapes are tested against).
    """
    block = parse_block(
        text,
        source=source,
        first_line=first_line,
        default_year=default_year,
        metrics=metrics,
        columns=columns,
        shapes=shapes,
    )
    return block.frame


def parse_block(
    text: pl.Series,
    *,
    source: str,
    first_line: int,
    default_year: int | None = None,
    metrics: bool = False,
    columns: Iterable[str] | None = None,
    shapes: bool = True,
    segments: Sequence[tuple[int, int]] | None = None,
) -> ParsedBlock:
    """`parse_lines`, with where its timestamps without a year got their year. `segments`:
    the block is the lines of several files one after another, (lines, default year) each; a
    timestamp without a year takes the year of the last dated line before it in its own file,
    else that file's default year, and `segment_years` says each file's last dated year."""
    year = default_year if default_year is not None else datetime.now().year
    wanted = closure(columns, metrics=metrics)
    # A live batch (a few lines) pays polars' fixed cost per query, not per line: the query
    # that builds its frame finds each line's shape, and one more cuts and finishes a batch
    # of one shape.
    tiny = shapes and 0 < text.len() <= TINY_BATCH_ROWS and bool(wanted & _CUT_COLUMNS)
    frame = _framed(text, source, first_line, shaped=tiny)
    which = frame.drop_in_place("_shape") if tiny else None
    frame, head_rows, last_year, segment_years = _timestamps(frame, year, segments)
    finished = None if which is None else _one_shape(frame, which, wanted)
    shaped_rows = None
    if finished is None:
        # a live batch none of whose lines has a shape takes the general path alone
        shaped = shapes and (which is None or which.null_count() < which.len())
        if wanted & _VALUE_COLUMNS:  # else: only what `_framed` gives (and derived counts)
            texts = frame.select("text")
            found = _shapes_for(texts.get_column("text"), wanted, shapes=shaped, which=which)
            values = _values(texts, wanted, found)
            frame = frame.hstack(values.get_columns())
            if found is not None and not tiny:
                shaped_rows = found.alias("shape")
        if "metrics" in wanted:
            frame = frame.with_columns(_metrics(frame))
        finished = _finished(frame, wanted)
    return ParsedBlock(
        finished,
        default_year=year,
        head_rows=head_rows,
        last_year=last_year,
        segment_years=segment_years,
        shapes=shaped_rows,
    )


TINY_BATCH_ROWS = 16
"""The most lines `parse_block` takes as a live batch (see `_one_shape`)."""
_LINE_SHAPE = line_shape()
_DENSE_TS = (
    pl.col("text")
    .str.slice(0, 23)
    .str.to_datetime(_LOGGING_TS_FORMAT, time_unit="us", strict=False, cache=False)
    .alias("ts")
)
_RUN_START = pl.col("text").str.contains("run start:", literal=True).alias("run_start")


def _framed(text: pl.Series, source: str, first_line: int, *, shaped: bool) -> pl.DataFrame:
    """`source`, `line`, `text`, `ts` in logging's default form (null for other forms) and
    `run_start`, and each line's shape (`_shape`, `line_shape`) when `shaped`, in one query."""
    # Built as Series, not as `pl.repeat` / `pl.int_range` over `pl.len()`: in a query, each of
    # those costs several times a regex pass on a short batch.
    n = text.len()
    line = pl.Series("line", range(first_line, first_line + n), dtype=pl.Int64)
    origin = pl.Series("source", [source], dtype=pl.String).new_from_index(0, n)
    columns = [pl.col("source", "line", "text"), _DENSE_TS, _RUN_START]
    if shaped:
        columns.append(_LINE_SHAPE)
    return pl.DataFrame([origin, line, text.alias("text")]).select(columns)


def _one_shape(
    frame: pl.DataFrame, which: pl.Series, wanted: frozenset[str]
) -> pl.DataFrame | None:
    """The finished frame of a batch whose lines all have one shape (`which`: each line's, as
    `shape_of` gives it), as the general route gives it, in one query; None for any other
    batch."""
    number = which.min()
    if (
        not isinstance(number, int)
        or which.null_count()
        or which.max() != number
        or "metrics" in wanted
    ):
        return None
    return frame.select(_one_shape_columns(number, wanted))


@cache
def _one_shape_columns(number: int, wanted: frozenset[str]) -> list[pl.Expr]:
    """`_finished`'s columns for lines of one shape, each from the shape's own expression (one
    eager `select`: polars optimises it as it does any eager call, not as a lazy plan)."""
    counted = [name for name in SHAPES[number].counts if name in wanted]
    names = (*sorted(_VALUE_COLUMNS & wanted, key=list(SCHEMA).index), *counted)
    columns = {name: pl.col(name) for name in ("source", "line", "text", "ts", "run_start")}
    columns.update(zip(names, _shape_columns(number, names), strict=True))
    # `wanted` holds each derived column's base (`closure`).
    if "q_hsb_nonzero" in wanted:
        columns["q_hsb_nonzero"] = _nonzero_buckets(columns["q_hsb"])
    if "gpu_keys" in wanted and "gpu_keys" not in columns:  # not counted by the shape
        if "telemetry" in wanted:
            columns["gpu_keys"] = _gpu_keys_of(columns["telemetry"])
        elif SHAPES[number].constants.get("snapshot", False):
            columns["gpu_keys"] = _gpu_keys_of_text()
    return [
        columns.get(name, pl.lit(None, dtype=dtype)).cast(dtype).alias(name)
        for name, dtype in SCHEMA.items()
    ]


def complete(frame: pl.DataFrame, columns: Iterable[str]) -> pl.DataFrame:
    """A parsed frame (`SCHEMA`) with `columns` computed too, for a frame parsed without them
    (`parse_lines(columns=...)`): the engine asks for what a rule needs only when it needs it.
    The caller says which are missing: a computed column may be all null."""
    missing = frozenset(columns) - ALWAYS - {"metrics"}
    if not missing or frame.is_empty():
        return frame
    wanted = _with_bases(missing)
    texts = frame.select("text")
    which = _shapes_for(texts.get_column("text"), wanted, shapes=True, which=None)
    values = _values(texts, wanted - ALWAYS, which)
    return _finished(frame.with_columns(values.get_columns()), wanted)


def _finished(frame: pl.DataFrame, computed: frozenset[str]) -> pl.DataFrame:
    """The `SCHEMA` columns in order, typed; the derived ones of those `computed` computed; the
    skipped ones null."""
    derived = _derived(frame, computed)
    if derived:
        frame = frame.with_columns(derived)
    return frame.select(_final_columns(frozenset(frame.columns)))


@cache
def _final_columns(present: frozenset[str]) -> list[pl.Expr]:
    """The `SCHEMA` columns in order, typed, from a frame with the columns `present`."""
    return [
        (pl.col(name) if name in present else pl.lit(None, dtype=dtype)).cast(dtype).alias(name)
        for name, dtype in SCHEMA.items()
    ]


_CUT_COLUMNS = frozenset(
    name for shape in SHAPES for name in (*shape.cuts, *shape.general) if name != "step"
)
_VALUE_COLUMNS = frozenset(SCHEMA) - ALWAYS - {"metrics"} - set(_DERIVED)


def shapes_giving(columns: Iterable[str]) -> frozenset[int]:
    """The shapes (indices in `SHAPES`) on whose lines one of `columns` may have a value: a
    value column that a shape neither cuts, computes, counts nor fixes is null on its lines
    (`_shape_columns`; a flag is false there, a value: flags count as given)."""
    found = set()
    for number, shape in enumerate(SHAPES):
        given = {*shape.cuts, *shape.general, *shape.constants, *shape.counts}
        for name in columns:
            if name not in _VALUE_COLUMNS or name in given or SCHEMA[name] == pl.Boolean():
                found.add(number)
                break
    return frozenset(found)


def _shapes_for(
    text: pl.Series, wanted: frozenset[str], *, shapes: bool, which: pl.Series | None
) -> pl.Series | None:
    """Each line's shape for `_values` (None: every line takes the general path): `which` when
    known already (a live batch's, from `line_shape`), else found here (`shape_of`)."""
    # Recognising shapes costs about what the general path's step pass does: worth it only
    # when a column a shape cuts more cheaply than the general path is wanted.
    if not shapes or not wanted & _CUT_COLUMNS:
        return None
    return shape_of(text) if which is None else which


def _values(texts: pl.DataFrame, wanted: frozenset[str], which: pl.Series | None) -> pl.DataFrame:
    """The wanted value columns of these lines: lines of a shape (`which`, from `_shapes_for`)
    cut by their shape, the rest by the general path; one row per line, in order."""
    names = sorted(_VALUE_COLUMNS & wanted, key=list(SCHEMA).index)
    if which is None:
        return _general(texts, wanted).select(names)
    # derived columns a shape counts on its lines (the others' are derived after, `_derived`)
    counted = [name for name in _COUNTED if name in wanted]
    parts: list[pl.DataFrame] = []
    general_rows = which.is_null()
    index = pl.int_range(0, texts.height, eager=True, dtype=pl.UInt32).alias("_i")
    if general_rows.any():
        values = _general(texts.filter(general_rows), wanted).select(names)
        uncounted = [_nulls(values.height, name, SCHEMA[name]) for name in counted]
        columns = [*values.get_columns(), *uncounted]
        parts.append(pl.DataFrame([index.filter(general_rows)]).hstack(columns))
    for number in range(len(SHAPES)):
        picked = (which == number).fill_null(False)
        if picked.any():
            values = _shaped(number, texts.filter(picked), [*names, *counted])
            parts.append(pl.DataFrame([index.filter(picked)]).hstack(values.get_columns()))
    if len(parts) == 1:
        return parts[0].drop("_i")
    return pl.concat(parts, how="vertical").sort("_i").drop("_i")


def shape_of(text: pl.Series) -> pl.Series | None:
    """Which shape (its index in `SHAPES`) each line has, null for the general path; None when
    no line has one."""
    which: pl.Series | None = None
    for number, shape in enumerate(SHAPES):
        hit = text.str.contains(shape.literal, literal=True)
        if not hit.any():
            continue
        rows = hit.arg_true()
        fits = text.gather(rows).to_frame("text").select(shape.fits()).to_series()
        if not fits.any():
            continue
        if which is None:
            which = pl.repeat(None, text.len(), dtype=pl.Int8, eager=True)
        free = which.gather(rows).is_null()
        taken = rows.filter(fits & free)
        which = which.scatter(taken, pl.repeat(number, taken.len(), dtype=pl.Int8, eager=True))
    return which


def _shaped(number: int, rows: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """The value columns of lines of one shape (its index in `SHAPES`), cut by position: on
    enough lines, the cuts that know their token from the lines' tokens (`cut_tokens`)."""
    shape = SHAPES[number]
    tokens = [name for name in names if name in shape.cuts and shape.cuts[name].token]
    if shape.tokens and tokens and rows.height >= TOKEN_ROWS:
        found = cut_tokens(shape, rows.get_column("text"), tokens)
        rows = rows.hstack([found.get_column(name).cast(SCHEMA[name]) for name in tokens])
        others = tuple(name for name in names if name not in found.columns)
        return rows.with_columns(_shape_columns(number, others)).select(names)
    # `with_columns`: a constant column has the frame's height, as `select` would not give it.
    return rows.with_columns(_shape_columns(number, tuple(names))).select(names)


TOKEN_ROWS = 256
"""The fewest lines of one shape `_shaped` reads by their tokens (the CSV reader's start-up
costs more than cutting a few lines field by field)."""


@cache
def _shape_columns(number: int, names: tuple[str, ...]) -> list[pl.Expr]:
    """The expressions of `_shaped` (built once: a live batch pays only for running them)."""
    shape = SHAPES[number]
    columns: list[pl.Expr] = []
    for name in names:
        if name in shape.cuts:
            expr = shape.cuts[name].expr()
        elif name in shape.counts:
            expr = pl.col("text").str.count_matches(shape.counts[name], literal=True)
        elif name in shape.general:
            expr = _GENERAL_EXPRESSIONS[name]()
        elif name in shape.constants:
            expr = pl.lit(shape.constants[name])
        elif SCHEMA[name] == pl.Boolean():
            expr = pl.lit(False)
        else:
            expr = pl.lit(None, dtype=SCHEMA[name])
        columns.append(expr.cast(SCHEMA[name]).alias(name))
    return columns


def _timestamps(
    frame: pl.DataFrame, year: int, segments: Sequence[tuple[int, int]] | None = None
) -> tuple[pl.DataFrame, int, int | None, tuple[int | None, ...]]:
    """`ts` from every form (logging's default was read densely), the rows before the block's
    first full date, the year of its last one, and each segment's last one."""
    ts = frame.get_column("ts")
    if not ts.has_nulls():  # every line in logging's default form (most blocks, live ones too)
        last = None if ts.is_empty() else int(ts[-1].year)
        ends = _segment_ends(segments)
        return frame, 0, last, tuple(ts.dt.year().gather(ends).to_list()) if ends else ()
    nulls = ts.is_null()
    dated = _fill(frame, "ts", _sparse(frame, nulls, dated_timestamp(), "ts"))
    years = dated.dt.year()
    found = years.drop_nulls()
    head_rows = int(years.is_not_null().arg_max() or 0) if found.len() else frame.height
    last_year = int(found[-1]) if found.len() else None
    segment_years: tuple[int | None, ...] = ()
    if segments is None:
        carried = years.forward_fill().fill_null(year)
    else:  # carried within each file only, from its own default year
        sizes, defaults = [n for n, _ in segments], [d for _, d in segments]
        spans = pl.DataFrame({"_s": range(len(segments)), "_n": sizes, "_d": defaults})
        own = (
            spans.select(pl.col("_s", "_d").repeat_by("_n").explode())
            .with_columns(pl.lit(years).alias("_y"))
            .select(pl.col("_y").forward_fill().over("_s"), "_d")
        )
        carried = own.select(pl.col("_y").fill_null(pl.col("_d"))).to_series()
        segment_years = tuple(own.get_column("_y").gather(_segment_ends(segments)).to_list())
    frame = frame.with_columns(dated, carried.alias("_year"))
    rows = dated.is_null()
    yearless = _sparse(frame, rows, yearless_timestamp(), "ts", columns=("text", "_year"))
    return frame.with_columns(_fill(frame, "ts", yearless)), head_rows, last_year, segment_years


def _segment_ends(segments: Sequence[tuple[int, int]] | None) -> list[int]:
    """The row of each segment's last line."""
    ends, row = [], -1
    for size, _ in segments or ():  # one step per file, not per line
        row += size
        ends.append(row)
    return ends


def _general(frame: pl.DataFrame, wanted: frozenset[str]) -> pl.DataFrame:
    """The general per-key path over these lines, for the wanted value columns only."""
    frame = _dense(frame, wanted)
    rows = _Prefilters(frame)
    frame = _by_priority(_rare(frame, wanted, rows), wanted, rows)
    if "epoch" in wanted:
        has_epoch = frame.get_column("text").str.contains("poch", literal=True)
        frame = frame.with_columns(_sparse(frame, has_epoch, _value(EPOCH_PATTERN), "epoch"))
    return frame


def _dense(frame: pl.DataFrame, wanted: frozenset[str]) -> pl.DataFrame:
    """One pass per wanted key over every line, plus the literal prefilters of the rare
    extractors those keys use."""
    selected, keyed = _dense_expressions(wanted)
    lazy = frame.lazy().select(selected)
    if keyed:
        lazy = lazy.with_columns(keyed)
    return lazy.drop("_loss_g", "_grad_g", strict=False).collect()


@cache
def _dense_expressions(wanted: frozenset[str]) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """`_dense`'s expressions for these columns, built once (building costs more than running
    them on a live batch of a line or two)."""
    txt = pl.col("text")
    loss, grad, step = ("loss" in wanted), ("grad_norm" in wanted), ("step" in wanted)
    rare = loss or grad or step or "rank" in wanted
    exprs: dict[str, pl.Expr] = {"text": txt}

    def add(name: str, expr: pl.Expr, needed: bool = True) -> None:
        if needed:
            exprs[name] = expr.alias(name)

    add("step", _integer(STEP_PATTERN), step)
    add("_loss_g", txt.str.extract_groups(LOSS_PATTERN), loss)
    add("_grad_g", txt.str.extract_groups(GRAD_NORM_PATTERN), grad)
    add("lr", _number(LR_KEY), "lr" in wanted)
    add("q_hs", _integer(r"(?:^|[^\w])q_hs\s*[=:]\s*(\d+)"), "q_hs" in wanted)
    add("q_hsb", _q_hsb(), "q_hsb" in wanted)
    add(
        "snapshot",
        txt.str.contains("snapshot", literal=True) & txt.str.contains(r"\bsnapshot\b"),
        "snapshot" in wanted or "telemetry" in wanted,
    )
    add("run_start", txt.str.contains("run start:", literal=True))
    add("_rank_rows", txt.str.slice(0, 16).str.contains(r"^\s*(?:\[|\d+: )"), "rank" in wanted)
    add("_bracket_rows", txt.str.contains("][", literal=True), step)
    add("_train_rows", txt.str.contains("(train)", literal=True), step)
    add("_nemo_rows", txt.str.contains("reduced_train_loss", literal=True), loss)
    add("_megatron_rows", txt.str.contains("Unexpected result", literal=True), loss or grad)
    add("_tag_rows", txt.str.contains(r"(?i)oss\]|step\]"), loss or step)
    add("_maybe_validation", txt.str.contains(r"(?i)valid|epoch\(val"), loss or grad or step)
    add("_has_loss_word", txt.str.contains(r"(?i)loss"), loss)
    add(
        "_nan_iter_rows",
        txt.str.contains("nan iterations", literal=True),
        "nan_iterations" in wanted,
    )
    add("_rare_loss_rows", txt.str.contains(RARE_LOSS_GATE), rare)
    add("_throughput_rows", txt.str.contains(THROUGHPUT_HINT), "throughput" in wanted)
    return list(exprs.values()), list(_keyed_metrics(loss=loss, grad=grad))


class _Prefilters:
    """The prefilter columns `_dense` computed, each known to select some line or not, from one
    query: an extractor whose prefilter selects none costs no call (most, on a live batch)."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self._frame = frame
        names = [name for name in _PREFILTERS if name in frame.columns]
        found = frame.select(pl.col(names).fill_null(False).any()).row(0) if names else ()
        self._some = {name: bool(hit) for name, hit in zip(names, found, strict=True)}

    def __call__(self, name: str) -> pl.Series | None:
        """The prefilter column, or None when it selects no line."""
        return self._frame.get_column(name) if self._some[name] else None

    def some(self, *names: str) -> bool:
        """Whether any of these prefilters selects a line."""
        return any(self._some[name] for name in names)


_PREFILTERS = (
    "snapshot",
    "run_start",
    "_rank_rows",
    "_bracket_rows",
    "_train_rows",
    "_nemo_rows",
    "_megatron_rows",
    "_tag_rows",
    "_maybe_validation",
    "_has_loss_word",
    "_nan_iter_rows",
    "_rare_loss_rows",
    "_throughput_rows",
)


def _rare(frame: pl.DataFrame, wanted: frozenset[str], col: _Prefilters) -> pl.DataFrame:
    """Wanted columns only a few lines carry, extracted on the rows their prefilter selected."""
    columns: list[pl.Series] = []
    if "rank" in wanted:
        columns.append(_sparse(frame, col("_rank_rows"), _rank(), "rank"))
    if "telemetry" in wanted:
        columns.append(_sparse(frame, col("snapshot"), _telemetry(), "telemetry"))
    if "pid" in wanted:
        columns.append(_sparse(frame, col("run_start"), _integer(r"\bpid=(\d+)"), "pid"))
    if "_maybe_validation" in frame.columns:
        validation = pl.col("text").str.contains(VALIDATION)
        columns.append(_sparse(frame, col("_maybe_validation"), validation, "_validation"))
    if "nan_iterations" in wanted:
        nan_iterations = _integer(NAN_ITERATIONS)
        columns.append(_sparse(frame, col("_nan_iter_rows"), nan_iterations, "nan_iterations"))
    if "throughput" in wanted:
        columns.append(_sparse(frame, col("_throughput_rows"), _throughput(), "throughput"))
    return frame.with_columns(columns) if columns else frame


_GENERAL_EXPRESSIONS = {"telemetry": lambda: _telemetry()}
"""General-path expressions a shape reuses for a column it does not cut itself."""


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


def _metrics(frame: pl.DataFrame) -> pl.Series:
    """`metrics` on step and loss lines (only when asked: it is the one list-building pass, and
    rules do not read it)."""
    steps = frame.select(pl.col("step").is_not_null() | pl.col("loss").is_not_null()).to_series()
    return _sparse(frame, steps, _metric_pairs(), "metrics")


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


def _by_priority(frame: pl.DataFrame, wanted: frozenset[str], col: _Prefilters) -> pl.DataFrame:
    """Loss, grad norm and step (the wanted ones) from every dialect's extractor, in priority
    order; validation report lines carry none of them."""
    loss, grad, step = ("loss" in wanted), ("grad_norm" in wanted), ("step" in wanted)
    if loss:
        frame = frame.with_columns(
            _first_of(
                frame,
                "loss",
                [
                    (col("_nemo_rows"), _number("reduced_train_loss")),
                    (col("_megatron_rows"), _value(MEGATRON_NAN + "forward loss")),
                    (col("_rare_loss_rows"), _nan_if(LOSS_NAN_WORDS)),
                    (col("_rare_loss_rows"), _darknet_loss()),
                    (col("_tag_rows"), _number(r"\[loss\]")),
                    (frame.get_column("_loss_blocked"), _first_training_loss()),
                    (col("_rare_loss_rows"), _training_value(XENT_PATTERN)),
                ],
                dense_after=3,
            )
        )
    columns: list[pl.Series] = []
    if grad:
        grad_sources = [
            (col("_megatron_rows"), _value(MEGATRON_NAN + "grad norm")),
            (col("_rare_loss_rows"), _nan_if(GRAD_NAN_WORDS)),
        ]
        columns.append(_first_of(frame, "grad_norm", grad_sources, dense_after=2))
    if step:
        step_sources = [
            (_either(col, "_bracket_rows", "_train_rows"), _integer(BRACKET_STEP_PATTERN)),
            (col("_rare_loss_rows"), _integer(DARKNET_PATTERN)),
            (col("_tag_rows"), _integer(r"\[step\]\s*(\d+)")),
        ]
        columns.append(_first_of(frame, "step", step_sources, dense_after=0))
    if loss:
        columns.append(
            _fill(frame, "loss", _sparse(frame, _generic_rows(frame, col), _generic_loss(), "loss"))
        )
    if columns:
        frame = frame.with_columns(columns)
    columns = []
    if loss:
        columns.append(_any_nonfinite_loss(frame, col))
    if "rank" in wanted:
        columns.append(_darknet_rank(frame, col))
    if columns:
        frame = frame.with_columns(columns)
    if "_validation" not in frame.columns:
        return frame
    validation = frame.get_column("_validation")
    if validation.any():  # a native call (nulls are not true); fill_null is a query
        validation = validation.fill_null(False)
        frame = frame.with_columns(
            pl.when(validation).then(None).otherwise(pl.col(name)).alias(name)
            for name in ("loss", "step", "grad_norm")
            if name in wanted
        )
    return frame


def _generic_rows(frame: pl.DataFrame, col: _Prefilters) -> pl.Series | None:
    """Lines that say `loss` somewhere but matched no known loss key."""
    if not col.some("_has_loss_word"):
        return None
    return frame.select(
        pl.col("_has_loss_word") & pl.col("loss").is_null() & ~pl.col("_loss_keyed")
    ).to_series()


def _derived(frame: pl.DataFrame, computed: frozenset[str]) -> list[pl.Series]:
    """The counts the rules test, from the columns just `computed`: non-empty queue buckets;
    `gpu/` keys in a snapshot (what a shape counted on its lines, else from `telemetry` when it
    was parsed, else from the snapshot lines' text, on those lines only)."""
    counted = frame.get_column("gpu_keys") if "gpu_keys" in frame.columns else None
    dense: list[pl.Expr] = []
    if "q_hsb_nonzero" in computed:
        dense.append(_nonzero_buckets(pl.col("q_hsb")))
    if "gpu_keys" in computed and "telemetry" in computed:
        keys = _gpu_keys_of(pl.col("telemetry"))
        dense.append(
            keys
            if counted is None
            else pl.col("gpu_keys").fill_null(keys).alias(keys.meta.output_name())
        )
    out = frame.select(dense).get_columns() if dense else []  # one query for them all
    if "gpu_keys" in computed and "telemetry" not in computed:
        rows = frame.get_column("snapshot")
        if counted is not None:
            rows = rows & counted.is_null()
        keys_of_text = _sparse(frame, rows, _gpu_keys_of_text(), "gpu_keys")
        out.append(keys_of_text if counted is None else counted.fill_null(keys_of_text))
    return out


def _nonzero_buckets(q_hsb: pl.Expr) -> pl.Expr:
    """`q_hsb_nonzero`: how many of a queue report's buckets are not 0."""
    nonzero = q_hsb.list.eval((pl.element() != 0).cast(pl.UInt32)).list.sum()
    return nonzero.alias("q_hsb_nonzero")


def _gpu_keys_of(telemetry: pl.Expr) -> pl.Expr:
    """`gpu_keys` from a parsed `telemetry` column."""
    starts = pl.element().struct.field("key").str.starts_with("gpu/").cast(pl.UInt32)
    return telemetry.list.eval(starts).list.sum().alias("gpu_keys")


def _gpu_keys_of_text() -> pl.Expr:
    """`gpu_keys` from a snapshot line's text."""
    from logwatch.gpu.frames import gpu_key_count  # it reads this module's NUMBER

    return gpu_key_count().alias("gpu_keys")


def _either(col: _Prefilters, a: str, b: str) -> pl.Series | None:
    """The lines either prefilter selects (None: none)."""
    rows_a, rows_b = col(a), col(b)
    if rows_a is None or rows_b is None:
        return rows_a if rows_b is None else rows_b
    return rows_a | rows_b


def _first_of(
    frame: pl.DataFrame,
    name: str,
    sparse: list[tuple[pl.Series | None, pl.Expr]],
    *,
    dense_after: int,
) -> pl.Series:
    """Column `name` from several extractors in priority order: the first `dense_after` sparse
    ones outrank the dense column, the rest only fill its gaps."""
    # An extractor whose rows are none adds nothing: skipped, so a small batch (live tail) pays
    # only for the extractors its lines can use; those that select every line (a live batch's
    # one line) run in one query.
    dtype = SCHEMA[name]
    columns: list[pl.Series | None] = [None] * len(sparse)
    every: dict[int, pl.Expr] = {}
    for index, (rows, expr) in enumerate(sparse):
        if rows is None or not rows.any():  # native calls, no query
            continue
        if rows.sum() == frame.height:
            every[index] = expr.cast(dtype).alias(f"_{index}")
        else:
            columns[index] = _sparse(frame, rows, expr, name)
    if every:
        found = frame.select(every.values())
        for index, column in zip(every, found.get_columns(), strict=True):
            columns[index] = column.alias(name)
    dense = frame.get_column(name).cast(dtype)
    ordered = [
        column
        for column in (*columns[:dense_after], dense, *columns[dense_after:])
        if column is not None
    ]
    if len(ordered) == 1:
        return dense.alias(name)
    return frame.select(pl.coalesce(ordered).alias(name)).to_series()


def _sparse(
    frame: pl.DataFrame,
    rows: pl.Series | None,
    expr: pl.Expr,
    name: str,
    *,
    columns: tuple[str, ...] = ("text",),
) -> pl.Series:
    """`expr` (over `columns`) evaluated only where `rows` is true (null elsewhere), as a
    full-length column (`rows` None: none)."""
    dtype = SCHEMA.get(name, pl.Boolean())
    if rows is None:
        return _nulls(frame.height, name, dtype)
    count = int(rows.sum())  # native (nulls are not counted); a fill_null would be a query
    if count == 0:
        return _nulls(frame.height, name, dtype)
    if count == frame.height:
        return frame.select(expr.cast(dtype).alias(name)).to_series()
    picked = rows.fill_null(False)
    index = picked.arg_true()
    values = frame.select(columns).filter(picked).select(expr.cast(dtype).alias(name))
    if dtype.is_nested():
        return (
            pl.DataFrame({"_i": pl.int_range(0, frame.height, eager=True, dtype=pl.UInt32)})
            .join(
                values.with_columns(index.alias("_i")), on="_i", how="left", maintain_order="left"
            )
            .get_column(name)
        )
    return _nulls(frame.height, name, dtype).scatter(index, values.to_series())


def _nulls(height: int, name: str, dtype: pl.DataType) -> pl.Series:
    """A column of `height` nulls (a small one without a polars query)."""
    if height <= TINY_BATCH_ROWS:
        return pl.Series(name, [None] * height, dtype=dtype)
    return pl.repeat(None, height, dtype=dtype, eager=True).alias(name)


def _fill(frame: pl.DataFrame, name: str, fallback: pl.Series) -> pl.Series:
    """The column `name`, its nulls filled from a sparse fallback column."""
    if fallback.null_count() == fallback.len():  # nothing to fill from (a native check)
        return frame.get_column(name).cast(SCHEMA[name]).alias(name)
    return frame.get_column(name).cast(SCHEMA[name]).fill_null(fallback).alias(name)
