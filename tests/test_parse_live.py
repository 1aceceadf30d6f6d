"""A live batch (tail's few lines) parses as the big-batch route parses the same lines: its
shapes, found in its framing query by the shapes' literals first (`parse.framing._live_shapes`),
and the general path's values, which a one-line batch takes in fewer queries
(`parse.sparse._first_of_uniform`)."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from logwatch.parse import TINY_BATCH_ROWS, parse_block, shape_of
from logwatch.parse.framing import _framed
from logwatch.parse.shapes import SHAPES, line_shape
from tests.support import corpus
from tests.test_shapes import ANY_LINE, SETTINGS, TAIL_COLUMNS
from tests.test_shapes_quiet import clipping_lines, data_lines, timers_lines

LINES = st.one_of(ANY_LINE, data_lines(), clipping_lines(), timers_lines())
# A line that holds two shapes' literals (a step line's `] step ` and a snapshot's), and one that
# holds a literal but fits no shape: only the pattern of the right shape may take it.
MIXED = (
    "2026-11-28 14:02:07,199 INFO [wandb] snapshot step=5 gpu/0/util=97 ] step  | lm loss: 1",
    "2026-11-28 14:02:07,199 INFO [train] step 5/200000 | loss nan | acc 0.2 ALERT id=3",
    "time (ms) | forward-backward: 3361.16 {'loss': 2.0, 'learning_rate': 1e-05, 'epoch': 0.1}",
)


def _live(lines: list[str]) -> list[int | None]:
    frame = _framed(pl.Series("text", lines, dtype=pl.String), "s", 1, shaped=True)
    return frame.get_column("_shape").to_list()


@SETTINGS
@given(st.lists(st.one_of(LINES, st.sampled_from(MIXED)), min_size=1, max_size=TINY_BATCH_ROWS))
def test_a_live_batchs_shapes_are_shape_of(lines: list[str]) -> None:
    """Each line's shape in a live batch's frame is its shape by `shape_of` and by
    `line_shape` (every shape's pattern on every line): null where none fits."""
    text = pl.Series("text", lines, dtype=pl.String)
    found = shape_of(text)
    expected = found.to_list() if found is not None else [None] * len(lines)
    assert _live(lines) == expected
    assert text.to_frame().select(line_shape()).to_series().to_list() == expected


def test_every_shape_is_found_in_a_live_batch() -> None:
    """Lines of every shape, one batch: each found as its own shape, a line without one null."""
    lines = [
        "2026-11-28 14:02:07,199 INFO [train] step 5/200000 | loss 2.1182 | acc 0.242 | "
        "lr 2.40e-05 | grad_norm 1.23 | tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]",
        "2026-11-28 14:02:07,199 INFO [hsq] q_hsb=[3,4,6,5,7,8] at q_hs=12",
        "2026-11-28 14:02:07,199 INFO [wandb] snapshot step=5 prof/target_fwd_ms=212.4 "
        "gpu/0/util=97 gpu/0/mem_gb=70.1",
        "2026-11-28 14:02:07,199 INFO [wandb] snapshot step=5 sys/disk_gb=8.1 gpu/0/util=97",
        "{'loss': 2.1, 'grad_norm': 1.0, 'learning_rate': 2e-05, 'epoch': 0.5}",
        " iteration        5/ 20000000 | consumed samples:          5 | elapsed time per "
        "iteration (ms): 3591.8 | learning rate: 1.500E-04 | global batch size:   512 | lm loss:"
        " 2.1 | loss scale: 65536.0 | grad norm: 1.349 | number of skipped iterations:   0 | "
        "number of nan iterations:   0 |",
        " iteration        6/ 20000000 | consumed samples:          6 | elapsed time per "
        "iteration (ms): 3591.8 | learning rate: 1.500E-04 | global batch size:   512 | loss "
        "scale: 65536.0 | number of skipped iterations:   1 | number of nan iterations:   0 |",
        "2026-11-28 14:02:07,199 INFO [data] worker 3 prefetched 32 batches (queue 100)",
        "2026-11-28 14:02:07,199 WARNING [train] grad clipping active: norm 12.4 > 1.0",
        "time (ms) | forward-backward: 3361.16 | optimizer: 183.96",
        "step 5 | loss nan | grad_norm 1.0",
    ]
    assert _live(lines) == [*range(len(SHAPES)), None]


FILLER = "worker heartbeat"
"""A line no extractor reads: behind it, each extractor selects some lines of a big batch, not
all (the column-by-column route)."""


def _corpus_lines() -> list[str]:
    text = corpus.corpus(11, 600).decode("utf-8", "replace")
    lines = [*text.replace("\r", "\n").splitlines(), *corpus.NAN_LINES]
    return sorted({line for line in lines if line.strip()})


@pytest.mark.parametrize("columns", [TAIL_COLUMNS, None])
def test_a_one_line_batch_parses_as_in_a_big_batch(columns: frozenset[str] | None) -> None:
    """Every line of the corpus (every dialect, NaN spelling, prefix and near miss it knows),
    alone in a live batch, gives the row it gives in a batch too big for the live route, ahead
    of a line that holds no value (the general path's one-query priority columns against its
    column-by-column route). The big batch is all the lines at once, each at the head of a file
    of its own (`segments`: a timestamp without a year takes its year from its own file only),
    as a line alone at the head of `[line, *FILLER * TINY_BATCH_ROWS]` gives it (the same 670
    rows, checked both ways when this was written), not 670 big batches."""
    lines = _corpus_lines()
    block = [text for line in lines for text in (line, FILLER)]
    big = parse_block(
        pl.Series("text", block, dtype=pl.String),
        source="s",
        first_line=1,
        default_year=2026,
        columns=columns,
        segments=[(2, 2026)] * len(lines),
    ).frame
    assert big.height == 2 * len(lines) > TINY_BATCH_ROWS
    heads = big.gather_every(2).with_columns(pl.lit(1, big.schema["line"]).alias("line"))
    differ = []
    for index, line in enumerate(lines):
        live = parse_block(
            pl.Series("text", [line], dtype=pl.String),
            source="s",
            first_line=1,
            default_year=2026,
            columns=columns,
        ).frame
        if not live.equals(heads.slice(index, 1)):
            differ.append(line)
    assert differ == []
