"""`complete` given the shapes the block's parse found (`ParsedBlock.shapes`, as the engine
keeps them from `prepare`) computes exactly what it computes finding them itself, without
finding them again."""

from __future__ import annotations

import random

import polars as pl
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import logwatch.parse.block as block_module
import logwatch.parse.shaped as shaped_module
from logwatch.parse import ALWAYS, complete, parse_block
from tests.support import corpus
from tests.support.properties import examples

STEP = (
    "2026-11-01 00:00:0{s},000 INFO [train] step {n}/9000 | loss {v} | acc 0.3 | lr 2.40e-05"
    " | grad_norm {g} | tok/s 50000 | q_hs=3 q_hsb=[1,2]"
)
OTHERS = [
    "2026-11-01 00:00:01,000 INFO [hsq] q_hsb=[0,0,0,0,0,31] at q_hs=31",
    "2026-11-01 00:00:02,000 INFO [wandb] snapshot step=7 gpu/0/util=99 gpu/0/mem_gb=70.1",
    "{'loss': 1.25, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.1}",
    " iteration      100/  1000 | consumed samples: 800 | lm loss: 2.5E+00 | grad norm: 1.1 |",
    "WARNING [data] worker 3 slow: 2.3s to fetch batch (threshold 2.0s)",
]


def _lines(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        kind = rng.random()
        if kind < 0.5:
            value = rng.choice([*corpus.NONFINITE, "1.25", "0.5"])
            out.append(STEP.format(s=n % 10, n=n, v=value, g=rng.choice(["nan", "1.5"])))
        else:
            out.append(rng.choice(OTHERS))
    return out


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(0, 10**6), st.integers(20, 700), st.integers(0, 300))
def test_complete_with_the_parse_shapes_is_complete_itself(seed: int, count: int, at: int) -> None:
    text = pl.Series(_lines(seed, count), dtype=pl.String)
    shapes = parse_block(text, source="s", first_line=1, columns={"loss"}).shapes
    assume(shapes is not None)  # a block of no known shape has none to give
    assert shapes is not None
    frame = parse_block(text, source="s", first_line=1, columns=ALWAYS).frame
    start = min(at, count - 1)
    piece, known = frame.slice(start), shapes.slice(start)
    wanted = {"loss", "grad_norm", "step", "q_hsb"}
    itself = complete(piece, wanted)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shaped_module, "shape_of", _not_called)
        patch.setattr(block_module, "line_shape", _not_called)
        given_shapes = complete(piece, wanted, shapes=known)
    assert given_shapes.equals(itself)


def test_shapes_of_another_length_are_refused() -> None:
    text = pl.Series(_lines(1, 20), dtype=pl.String)
    frame = parse_block(text, source="s", first_line=1, columns=ALWAYS).frame
    with pytest.raises(ValueError, match="shapes has 3 rows for a frame of 20"):
        complete(frame, {"loss"}, shapes=pl.Series([None, 0, 1], dtype=pl.Int8))


def _not_called(*args: object) -> None:
    raise AssertionError("the shapes were found again")


def test_event_rows_read_their_columns_with_the_parse_shapes() -> None:
    """An event's summary columns that the parse skipped (`epoch` for nan-loss) are read on its
    row with the shapes `prepare` kept, not found again, and say what a full parse says."""
    from logwatch import load_rules
    from logwatch.engine import Engine

    # loss-spike reads the loss on every line: the parse finds the lines' shapes
    rules = [spec for spec in load_rules() if spec.id in ("nan-loss", "loss-spike")]
    lines = [STEP.format(s=n % 10, n=n, v="1.25", g="1.5") for n in range(400)]
    lines[300] = STEP.format(s=0, n=300, v="NaN", g="1.5")
    text = pl.Series(lines, dtype=pl.String)

    def events(*, prepared: bool) -> list[str]:
        engine = Engine(rules, stats=False)
        parsed = parse_block(text, source="s", first_line=1, columns=engine.columns)
        assert "epoch" not in engine.columns and parsed.shapes is not None
        if not prepared:
            return [e.summary for e in engine.process(parsed.frame, engine.columns)]
        ready = engine.prepare(parsed.frame, engine.columns, shapes=parsed.shapes)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(shaped_module, "shape_of", _not_called)
            patch.setattr(block_module, "line_shape", _not_called)
            return [e.summary for e in engine.process(parsed.frame, engine.columns, ready)]

    fired = "loss is nan at step 300 (line 301)"
    resolved = "loss is finite again (1.25) at step 301 (line 302) (firing for 1s, since line 301)"
    assert events(prepared=True) == events(prepared=False) == [fired, resolved]
