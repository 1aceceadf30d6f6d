"""Throughput: work per second, in the units trainers print it (tokens/s, samples/s or it/s), or
one over the time an iteration took."""

from __future__ import annotations

import polars as pl

from logwatch.parse.dialects.generic import COUNT
from logwatch.parse.dialects.megatron import MS_PER_IT
from logwatch.parse.dialects.mmengine import SECONDS_BEFORE_DATA
from logwatch.parse.dialects.nanogpt import MS_AFTER_LOSS

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
_RATE_KEY = (
    r"(?-u:\b)(?:CurrSamplesPerSec|tokens?(?:/s(?:ec)?|_per_sec(?:ond)?)|toks?/s(?:ec)?|tps|wps"
    r"|samples(?:/s(?:ec)?|_per_sec(?:ond)?)|it/s)['\"]?\s*[=:]?\s*['\"]?" + COUNT
)
_RATE_AFTER = COUNT + r"\s*(?:it|iter|tok|toks|tokens|samples)/s(?-u:\b)"
_SECONDS_PER_IT = COUNT + r"\s*s(?:ec)?\s*/\s*(?:it(?:er)?|step)(?-u:\b)"
# the bracketed duration must end the line and follow a loss: `(10.94)` after fairseq's loss is
# its running average, `Saved checkpoint (3.9s)` is no iteration
_SECONDS_AFTER_LOSS = r"(?i:loss)[^()]*\(" + COUNT + r"\s*s\)\s*$"
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
        # times 0.001, not / 1000.0: polars divides a column of two or more rows by a number
        # as a product with its reciprocal, and one row exactly, so a line's value would hang
        # on its batch (a product is the same either way, and what the longer batches gave)
        rate(MS_PER_IT) * 0.001,
        rate(_SECONDS_AFTER_LOSS),
        rate(SECONDS_BEFORE_DATA),
        rate(MS_AFTER_LOSS) / 1000.0,
    )
    inverted = (pl.when(s > 0).then(1.0 / s) for s in durations)  # `0.0000s/iter` says nothing
    found = pl.coalesce(rate(_RATE_KEY), rate(_RATE_AFTER), *inverted)
    return pl.when(~pl.col("text").str.contains(_NOT_TRAINING_PACE)).then(found)
