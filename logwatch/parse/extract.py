"""The general path's expressions, one per key or dialect form (over `text`): each exact on its
own; `parse.general` runs them, in priority order, on the rows their prefilter selects."""

from __future__ import annotations

import polars as pl

from logwatch.parse.dialects.darknet import DARKNET_PATTERN
from logwatch.parse.dialects.dflash import Q_HSB_PATTERN
from logwatch.parse.dialects.generic import (
    ANY_LOSS,
    BEFORE,
    COMPONENT_KEY,
    END,
    GENERIC_LOSS,
    LOSS_PATTERN,
    METRIC_NUMBER,
    METRIC_PAIR,
    NOT_A_LOSS,
    NOT_MEASURED,
    NOT_OTHER,
    NOT_TRAINING,
    NUMBER,
    PADDING,
    SEP,
    STEP_PATTERN,
    TOTAL_KEY,
)
from logwatch.parse.dialects.lightning import AGGREGATE
from logwatch.parse.dialects.mmengine import BRACKET_STEP_PATTERN


def _value(pattern: str) -> pl.Expr:
    """The first capture of `pattern` as Float64 (NaN and Inf kept)."""
    return pl.col("text").str.extract(pattern, 1).cast(pl.Float64, strict=False)


def _number(key: str) -> pl.Expr:
    """The first number that follows `key` and a separator, as Float64 (NaN/Inf kept)."""
    return _value(BEFORE + "(?:" + key + ")" + SEP + "(" + NUMBER + ")" + PADDING + END)


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
        & ~match.struct.field("2").str.contains(NOT_A_LOSS)
        & ~match.struct.field("2").str.contains(AGGREGATE)
        & ~value.is_finite()
    )
    first = pl.col("text").str.extract_all(ANY_LOSS).list.eval(pl.element().filter(keep))
    return first.list.first().str.extract(ANY_LOSS, 3).cast(pl.Float64, strict=False)


_PROGRESS = "|".join((STEP_PATTERN, BRACKET_STEP_PATTERN, r"(?i:epoch)"))


def _generic_loss() -> pl.Expr:
    pairs = pl.col("text").str.extract_all(GENERIC_LOSS)
    keep = pairs.list.eval(
        pl.element().filter(~pl.element().str.extract(r"^([^=:]*)", 1).str.contains(NOT_A_LOSS))
    )
    first = keep.list.first()
    key = first.str.extract(r"^([^=:]*)", 1)
    value = first.str.extract(r"[=:]\s*['\"]?(?:tensor\()?(" + NUMBER + ")", 1).cast(
        pl.Float64, strict=False
    )
    component_alone = (
        key.str.contains(COMPONENT_KEY)
        & ~key.str.contains(TOTAL_KEY)
        & value.is_finite()
        & ~pl.col("text").str.contains(_PROGRESS)
    )
    return pl.when(component_alone.fill_null(False)).then(None).otherwise(value)


def _q_hsb() -> pl.Expr:
    body = pl.col("text").str.extract(Q_HSB_PATTERN, 1)
    return (
        body.str.split(",")
        .list.eval(pl.element().str.strip_chars().cast(pl.Int64, strict=False))
        .alias("q_hsb")
    )


def _rank() -> pl.Expr:
    groups = pl.col("text").str.extract_groups(
        r"^\s*(?:\[rank(\d+)\]:|\[default(\d+)\]:|\[\d+,mpirank:(\d+)[^\]]*\]<std(?:out|err)>:|\s*(\d+): )"
    )
    return pl.coalesce(*(groups.struct.field(str(i)) for i in range(1, 5))).cast(
        pl.Int64, strict=False
    )


def _metric_pairs() -> pl.Expr:
    """Each pair matched whole, then its key and value by two small anchored patterns."""
    value = r"(" + METRIC_NUMBER + r")[\s,|\]})';\"]?$"
    found = (
        pl.col("text")
        .str.extract_all(METRIC_PAIR)
        .list.eval(
            pl.struct(
                pl.element().str.extract(r"([A-Za-z_][\w./-]*)", 1).alias("key"),
                pl.element().str.extract(value, 1).cast(pl.Float64, strict=False).alias("value"),
            )
        )
    )
    return found.list.eval(pl.element().filter(~pl.element().struct.field("key").is_in(NOT_OTHER)))
