"""`LOSS_LINES` holds on every line that has a `loss` value: the lines of every dialect the
parser reads, the corpus's non-finite spellings, the samples and the benchmark's trainers. The
engine gives a nonfinite rule on the loss only those lines of the pieces it parses for it
(`Needs.valued_rows`), so a loss on a line without one would be missed."""

from __future__ import annotations

import random
import sys
import tomllib
from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.parse import parse_lines
from logwatch.parse.dialects.generic import LOSS_LINES
from tests.support import corpus
from tests.support.properties import examples

ROOT = Path(__file__).resolve().parent.parent
DIALECTS = tomllib.loads((ROOT / "tests" / "data" / "dialects.toml").read_text("utf-8"))
LINES = [case["text"] for case in (*DIALECTS["line"], *DIALECTS["negative"])]
SAMPLES = [
    line
    for log in sorted((ROOT / "samples").rglob("*.log"))
    for line in log.read_text("utf-8", errors="replace").splitlines()
]


def _outside(lines: list[str]) -> list[str]:
    """The lines with a loss value that `LOSS_LINES` does not select."""
    frame = parse_lines(pl.Series(lines, dtype=pl.String), source="t", first_line=1)
    outside = frame.filter(pl.col("loss").is_not_null() & ~pl.col("text").str.contains(LOSS_LINES))
    return outside.get_column("text").to_list()


def test_every_dialect_and_sample_line_with_a_loss_holds_a_loss_literal() -> None:
    """Every corpus and sample line with a loss value is selected (and some are there)."""
    frame = parse_lines(pl.Series(LINES + SAMPLES), source="t", first_line=1)
    assert frame.get_column("loss").is_not_null().sum() > 100
    assert _outside(LINES + SAMPLES) == []


def _trainer_lines(trainer: str) -> list[str]:
    """About 1 MB of `bench/gen_dflash.py`'s realistic log of `trainer` (DFlash: the
    non-finite lines of its first 2 MB and 5 000 others)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import gen_dflash

    chunks = gen_dflash.generator(trainer, "realistic")(random.Random(7), 1_000_000)
    lines: list[str] = []
    size = 0
    for chunk in chunks:  # endless: cut where the file would end
        lines += chunk.splitlines()
        size += len(chunk)
        if size >= (2_000_000 if trainer == "dflash" else 1_000_000):
            break
    if trainer != "dflash":
        return lines
    bad = [line for line in lines if "nan" in line or "inf" in line]
    return bad + random.Random(7).sample(lines, 5_000)


def test_the_benchmark_trainers_lines_with_a_loss_hold_a_loss_literal() -> None:
    """The lines `bench/gen_dflash.py` writes for each trainer (DFlash, HF, Megatron)."""
    for trainer in ("dflash", "hf", "megatron"):
        assert _outside(_trainer_lines(trainer)) == [], trainer


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 60))
def test_non_finite_loss_spellings_hold_a_loss_literal(seed: int, count: int) -> None:
    """The corpus's non-finite lines, in every spelling, wrap and launcher prefix."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        value = rng.choice(corpus.WRAPS).format(v=rng.choice(corpus.NONFINITE))
        line = rng.choice(corpus.NAN_LINES).format(v=value, step=rng.randrange(9000), n=3)
        if rng.random() < 0.3:
            line = rng.choice(corpus.PREFIXES).format(r=rng.randrange(8)) + line
        lines.append(line)
    assert _outside(lines) == []
