"""A gate read only on its rules' valued rows (`GateScan`'s `valued`, nan-loss's loss lines),
with its candidates first (`Needs.candidates`): the rows it gives are the gate's rows among
the valued rows, and the candidates select every line the gate does."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.engine import Engine
from logwatch.parse.dialects.generic import LOSS_LINES
from logwatch.rules.loader import load_rules
from logwatch.rules.nonfinite import NONFINITE_CANDIDATES, NONFINITE_GATE, NONFINITE_ROWS
from logwatch.rules.scan import VALUED_SHARE, GateScan
from tests.rules.test_gates import CORPUS
from tests.support.properties import examples

LOSS = pl.col("text").str.contains(LOSS_LINES)
# pieces of non-finite values, near misses and what trips each candidate pass
PIECES = [
    "loss ",
    "loss=",
    "'loss': ",
    "grad_norm ",
    "number of ",
    "nan",
    "NaN",
    "-nan",
    "inf",
    "Inf",
    "INFO",
    "infinity",
    "nan.000",
    "e",
    "E",
    "+",
    "e+",
    "E-",
    "1",
    "999",
    "2.5e400",
    "1.0E+309",
    "\u0661\u0662\u0663",
    "e\u0663\u0663\u0663",
    " ",
    "|",
    ",",
    "\u00a0",
    ")",
    "*",
    "/",
    "x",
    "\u212a",
    "\u0130",
    "9" * 60,
]
LINES = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
LONG = st.integers(190, 230).map(lambda n: "loss " + "7" * n)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(LINES, LONG), min_size=1, max_size=30))
def test_the_nonfinite_candidates_select_every_line_the_gate_selects(lines: list[str]) -> None:
    frame = pl.DataFrame({"text": lines}, schema={"text": pl.String})
    found = frame.select(
        pl.col("text").str.contains(NONFINITE_GATE).alias("gate"),
        NONFINITE_ROWS.alias("rows"),
        NONFINITE_CANDIDATES.alias("candidates"),
    )
    assert not (found["gate"] & ~found["candidates"]).any()
    assert not (found["rows"] & ~found["candidates"]).any()


def test_the_nonfinite_candidates_select_every_gate_line_of_the_corpus() -> None:
    lines = pl.Series([*CORPUS, "1" * 400, "x=" + "7" * 250, "loss 1e400", "loss 1E+999"])
    found = pl.DataFrame({"text": lines}).select(
        NONFINITE_ROWS.alias("rows"), NONFINITE_CANDIDATES.alias("candidates")
    )
    assert found["rows"].any()
    assert not (found["rows"] & ~found["candidates"]).any()


def _scan(candidates: pl.Expr | None) -> GateScan:
    return GateScan({NONFINITE_GATE: NONFINITE_ROWS}, None, {NONFINITE_GATE: (LOSS, candidates)})


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.one_of(LINES, LONG, st.sampled_from(["x" * 300, "gpu/0/util=99 " * 20])), max_size=80
    ),
    st.booleans(),
)
def test_a_valued_gate_gives_its_rows_among_the_valued_rows_or_all_of_them(
    lines: list[str], with_candidates: bool
) -> None:
    frame = pl.DataFrame({"text": lines}, schema={"text": pl.String})
    found = frame.select(
        NONFINITE_ROWS.fill_null(False).alias("rows"), LOSS.fill_null(False).alias("valued")
    )
    gate = found["rows"].arg_true().to_list()
    among = (found["rows"] & found["valued"]).arg_true().to_list()
    got = _scan(NONFINITE_CANDIDATES if with_candidates else None).hits(frame)[NONFINITE_GATE]
    head = frame.head(256).select(
        pl.col("text").str.len_bytes().filter(LOSS.fill_null(False)).sum().alias("valued"),
        pl.col("text").str.len_bytes().sum().alias("all"),
    )
    some, every = head.row(0)
    staged = bool(every) and some <= VALUED_SHARE * every
    assert got.to_list() == (among if staged else gate)


def test_snapshot_heavy_blocks_read_the_gate_on_loss_lines_only() -> None:
    step = (
        "2026-11-01 00:09:37,181 INFO [train] step {i}/9 | loss {v} | lr 2.40e-05 | grad_norm 1.0"
    )
    snapshot = "2026-11-01 00:09:37,430 INFO [wandb] snapshot step=2 " + "gpu/0/util=99 " * 30
    lines = []
    for i in range(100):
        lines += [step.format(i=i, v="nan" if i % 7 == 3 else "2.1"), snapshot]
    lines.append("x" + "1" * 250)  # a non-finite digit run on a line without a loss
    frame = pl.DataFrame({"text": lines})
    got = _scan(NONFINITE_CANDIDATES).hits(frame)[NONFINITE_GATE].to_list()
    assert got == [2 * i for i in range(100) if i % 7 == 3]
    # read on every line, the gate gives the digit run too (no rule behind it reads that line)
    assert GateScan({NONFINITE_GATE: NONFINITE_ROWS}).hits(frame)[NONFINITE_GATE][-1] == 200


def test_the_engine_reads_nan_loss_alone_on_its_loss_lines_and_not_with_nan_grad() -> None:
    """nan-loss declares loss lines as its valued rows; nan-grad none: a gate both read is
    read on every line."""
    from logwatch.rules.loader import builtin_rules_dir

    every = load_rules([builtin_rules_dir()])
    loss_only = [spec for spec in every if spec.id == "nan-loss"]
    assert NONFINITE_GATE in Engine(loss_only)._gate_scan._valued
    assert NONFINITE_GATE not in Engine(every)._gate_scan._valued
