"""The general path: every metric found by key, anywhere in a line, so prefixes (`[rank3]:`,
timestamps, MPI tags) never hide it and key order never matters. Dense keys run over every line;
rare dialects only on the rows a cheap literal prefilter selected, in priority order. Any
non-finite training-loss key on a line makes its `loss` non-finite; NaNs said in words (`Loss
became infinite or NaN`) count as NaN."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import polars as pl

from logwatch.parse.dialects.darknet import DARKNET_PATTERN
from logwatch.parse.dialects.dflash import (
    PID_PATTERN,
    Q_HS_PATTERN,
    RUN_START_LITERAL,
    SNAPSHOT_LITERAL,
    SNAPSHOT_WORD,
)
from logwatch.parse.dialects.generic import (
    EPOCH_PATTERN,
    GRAD_NAN_WORDS,
    GRAD_NORM_PATTERN,
    LOSS_NAN_WORDS,
    LOSS_PATTERN,
    LR_KEY,
    NONFINITE_VALUE,
    RARE_LOSS_GATE,
    STEP_PATTERN,
    VALIDATION,
)
from logwatch.parse.dialects.megatron import (
    MEGATRON_NAN,
    MEGATRON_NAN_LITERAL,
    NAN_ITERATIONS,
    NEMO_LOSS_KEY,
)
from logwatch.parse.dialects.mmengine import BRACKET_STEP_PATTERN
from logwatch.parse.dialects.opennmt import XENT_PATTERN
from logwatch.parse.extract import (
    _darknet_loss,
    _first_training_loss,
    _generic_loss,
    _integer,
    _keyed_metrics,
    _metric_pairs,
    _nan_if,
    _nonfinite_loss_value,
    _number,
    _q_hsb,
    _rank,
    _training_value,
    _value,
)
from logwatch.parse.sparse import (
    _either,
    _fill,
    _first_of,
    _first_of_uniform,
    _Prefilters,
    _sparse,
)
from logwatch.parse.telemetry import _telemetry
from logwatch.parse.throughput import THROUGHPUT_HINT, _throughput


def _general(frame: pl.DataFrame, wanted: frozenset[str]) -> pl.DataFrame:
    """The general per-key path over these lines, for the wanted value columns only."""
    frame = _dense(frame, wanted)
    rows = _Prefilters(frame)
    frame = _by_priority(_rare(frame, wanted, rows), wanted, rows)
    if "epoch" in wanted:
        has_epoch = frame.get_column("text").str.contains("poch", literal=True)
        frame = frame.with_columns(_sparse(frame, has_epoch, _built("epoch"), "epoch"))
    return frame


_BUILDERS: dict[str, Callable[[], pl.Expr]] = {
    "epoch": lambda: _value(EPOCH_PATTERN),
    "rank": _rank,
    "telemetry": _telemetry,
    "pid": lambda: _integer(PID_PATTERN),
    "_validation": lambda: pl.col("text").str.contains(VALIDATION),
    "nan_iterations": lambda: _integer(NAN_ITERATIONS),
    "throughput": _throughput,
    "metrics": _metric_pairs,
    "loss": _generic_loss,
    "_spelled": lambda: pl.col("text").str.contains(NONFINITE_VALUE),
    "_nonfinite_loss": _nonfinite_loss_value,
    "_darknet": lambda: pl.col("text").str.contains(DARKNET_PATTERN),
}
"""The sparse extractors of the general path, by the column they give."""


@cache
def _built(name: str) -> pl.Expr:
    """A sparse extractor (`_BUILDERS`), built once: building the larger ones (throughput's
    seven patterns) costs more than running them on a live batch, and Python builds an
    argument even where its rows are none."""
    return _BUILDERS[name]()


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
    add("q_hs", _integer(Q_HS_PATTERN), "q_hs" in wanted)
    add("q_hsb", _q_hsb(), "q_hsb" in wanted)
    add(
        "snapshot",
        txt.str.contains(SNAPSHOT_LITERAL, literal=True) & txt.str.contains(SNAPSHOT_WORD),
        "snapshot" in wanted or "telemetry" in wanted,
    )
    add("run_start", txt.str.contains(RUN_START_LITERAL, literal=True))
    add("_rank_rows", txt.str.slice(0, 16).str.contains(r"^\s*(?:\[|\d+: )"), "rank" in wanted)
    add("_bracket_rows", txt.str.contains("][", literal=True), step)
    add("_train_rows", txt.str.contains("(train)", literal=True), step)
    add("_nemo_rows", txt.str.contains(NEMO_LOSS_KEY, literal=True), loss)
    add("_megatron_rows", txt.str.contains(MEGATRON_NAN_LITERAL, literal=True), loss or grad)
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


def _rare(frame: pl.DataFrame, wanted: frozenset[str], col: _Prefilters) -> pl.DataFrame:
    """Wanted columns only a few lines carry, extracted on the rows their prefilter selected."""
    columns: list[pl.Series] = []
    if "rank" in wanted:
        columns.append(_sparse(frame, col("_rank_rows"), _built("rank"), "rank"))
    if "telemetry" in wanted:
        columns.append(_sparse(frame, col("snapshot"), _built("telemetry"), "telemetry"))
    if "pid" in wanted:
        columns.append(_sparse(frame, col("run_start"), _built("pid"), "pid"))
    if "_maybe_validation" in frame.columns:
        validation = _built("_validation")
        columns.append(_sparse(frame, col("_maybe_validation"), validation, "_validation"))
    if "nan_iterations" in wanted:
        nan_iterations = _built("nan_iterations")
        columns.append(_sparse(frame, col("_nan_iter_rows"), nan_iterations, "nan_iterations"))
    if "throughput" in wanted:
        columns.append(_sparse(frame, col("_throughput_rows"), _built("throughput"), "throughput"))
    return frame.with_columns(columns) if columns else frame


def _metrics(frame: pl.DataFrame) -> pl.Series:
    """`metrics` on step and loss lines (only when asked: it is the one list-building pass, and
    rules do not read it)."""
    steps = frame.select(pl.col("step").is_not_null() | pl.col("loss").is_not_null()).to_series()
    return _sparse(frame, steps, _built("metrics"), "metrics")


def _by_priority(frame: pl.DataFrame, wanted: frozenset[str], col: _Prefilters) -> pl.DataFrame:
    """Loss, grad norm and step (the wanted ones) from every dialect's extractor, in priority
    order; validation report lines carry none of them."""
    loss = "loss" in wanted
    sources = {name: _sources(frame, name, col) for name in _PRIORITY if name in wanted}
    uniform = {
        name: _first_of_uniform(frame, name, found, dense_after=_PRIORITY[name])
        for name, found in sources.items()
    }
    columns: list[pl.Series] = []
    if all(expr is not None for expr in uniform.values()):
        # each extractor selects every line or none (a live batch of one line): one query
        if uniform:
            frame = frame.with_columns(expr for expr in uniform.values() if expr is not None)
    else:
        if loss:
            frame = frame.with_columns(
                _first_of(frame, "loss", sources["loss"], dense_after=_PRIORITY["loss"])
            )
        columns = [
            _first_of(frame, name, found, dense_after=_PRIORITY[name])
            for name, found in sources.items()
            if name != "loss"
        ]
    if loss:
        columns.append(
            _fill(frame, "loss", _sparse(frame, _generic_rows(frame, col), _built("loss"), "loss"))
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


_PRIORITY = {"loss": 3, "grad_norm": 2, "step": 0}
"""The columns `_by_priority` takes from several extractors, and how many of those outrank the
dense column (`_first_of`'s `dense_after`)."""


def _sources(
    frame: pl.DataFrame, name: str, col: _Prefilters
) -> list[tuple[pl.Series | None, pl.Expr]]:
    """The extractors of one of `_PRIORITY`'s columns, each with its rows, in priority order."""
    return [
        (_rows_of(frame, col, rows), expr)
        for rows, expr in zip(_EXTRACTOR_ROWS[name], _extractors(name), strict=True)
    ]


def _rows_of(frame: pl.DataFrame, col: _Prefilters, rows: str) -> pl.Series | None:
    if rows == "_loss_blocked":  # a column of the dense pass, not a prefilter
        return frame.get_column(rows)
    if rows == "_bracket_rows|_train_rows":
        return _either(col, "_bracket_rows", "_train_rows")
    return col(rows)


_EXTRACTOR_ROWS = {
    "loss": (
        "_nemo_rows",
        "_megatron_rows",
        "_rare_loss_rows",
        "_rare_loss_rows",
        "_tag_rows",
        "_loss_blocked",
        "_rare_loss_rows",
    ),
    "grad_norm": ("_megatron_rows", "_rare_loss_rows"),
    "step": ("_bracket_rows|_train_rows", "_rare_loss_rows", "_tag_rows"),
}
"""The rows each of `_extractors(name)` reads (prefilter names, in the same order)."""


@cache
def _extractors(name: str) -> tuple[pl.Expr, ...]:
    """The extractors of `name`, in priority order (built once: building costs more than
    running them on a live batch)."""
    if name == "loss":
        return (
            _number(NEMO_LOSS_KEY),
            _value(MEGATRON_NAN + "forward loss"),
            _nan_if(LOSS_NAN_WORDS),
            _darknet_loss(),
            _number(r"\[loss\]"),
            _first_training_loss(),
            _training_value(XENT_PATTERN),
        )
    if name == "grad_norm":
        return (_value(MEGATRON_NAN + "grad norm"), _nan_if(GRAD_NAN_WORDS))
    return (
        _integer(BRACKET_STEP_PATTERN),
        _integer(DARKNET_PATTERN),
        _integer(r"\[step\]\s*(\d+)"),
    )


def _generic_rows(frame: pl.DataFrame, col: _Prefilters) -> pl.Series | None:
    """Lines that say `loss` somewhere but matched no known loss key."""
    if not col.some("_has_loss_word"):
        return None
    return frame.select(
        pl.col("_has_loss_word") & pl.col("loss").is_null() & ~pl.col("_loss_keyed")
    ).to_series()


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
    # a line without a non-finite spelling has no non-finite value (Megatron's iteration lines
    # all say `nan`, in `number of nan iterations:`): the costly extraction skips them
    spelled = _sparse(frame, rows, _built("_spelled"), "_spelled")
    found = _sparse(frame, spelled.fill_null(False), _built("_nonfinite_loss"), "loss")
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
    darknet = _sparse(frame, rows, _built("_darknet"), "_darknet")
    return rank.zip_with(~darknet.fill_null(False), pl.Series([None], dtype=rank.dtype))
