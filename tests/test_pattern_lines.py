"""A rule that moves only on its pattern's lines (`Needs.pattern`: classify, match) is given
only its gate's lines of a long batch, read on the shapes its pattern reaches
(`evaluate._pattern_lines`): its events are those it finds on the whole batch."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import logwatch.engine.evaluate as evaluate_module
from logwatch import api
from logwatch.alerts import AlertEvent
from logwatch.engine import Engine
from logwatch.parse import parse_block
from tests.support.properties import examples
from tests.test_shapes import MIXED_LINES, megatron_lines

# Lines nan-eval-loss, gpu-lost, nvml-disabled and loss-scale-collapse fire on, among lines of
# every shape (whose `loss`, `(ms): 79` hold their gates' literals) and near misses.
FIRING = [
    " validation loss at iteration 1000 | lm loss value: nan | lm loss PPL: nan | ",
    "{'eval_loss': nan, 'eval_runtime': 1.2, 'epoch': 0.5}",
    "[rank3]: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
    "2026-11-28 14:09:05,117 WARNING [gpu] nvml: cannot read gpu temperature: NVML not loaded",
    "[Rank 2] Loss scale already at minimum, skipping",
    " validation loss at iteration 2000 | lm loss value: 2.5E+00 | lm loss PPL: 12.1 | ",
    " iteration      100/  1000 | elapsed time per iteration (ms): 79.5 | lm loss: 2.5E+00 |",
]
LINES = st.lists(
    st.one_of(
        MIXED_LINES,
        st.lists(megatron_lines(), max_size=20),
        st.lists(st.sampled_from(FIRING), max_size=4),
    ),
    min_size=1,
    max_size=6,
).map(lambda parts: [line.replace("\n", " ").replace("\r", " ") for part in parts for line in part])


def _events(lines: list[str], *, narrowed: bool) -> list[AlertEvent]:
    engine = Engine(api.load_rules([], builtin=True), stats=False)
    text = pl.Series("text", lines * 8, dtype=pl.String)  # a long batch, not a live one
    block = parse_block(text, source="s", first_line=1, default_year=2026, columns=engine.columns)
    prepared = engine.prepare(block.frame, engine.columns, shapes=block.shapes)
    with pytest.MonkeyPatch.context() as patch:
        if not narrowed:  # every rule on the whole batch
            patch.setattr(evaluate_module, "_pattern_lines", lambda *_: None)
        found = engine.process(block.frame, engine.columns, prepared)
        found += engine.finish("s", None, computed=engine.columns)
    return found


@settings(max_examples=examples(25), deadline=None)
@given(LINES)
def test_a_pattern_rule_given_its_gate_lines_finds_what_it_finds_on_the_batch(
    lines: list[str],
) -> None:
    """The same events, in the same order, with the same lines, steps and summaries."""
    narrowed, whole = _events(lines, narrowed=True), _events(lines, narrowed=False)
    assert [repr(event) for event in narrowed] == [repr(event) for event in whole]  # NaN values


def test_the_narrowed_path_runs_and_fires() -> None:
    """On a Megatron batch with a NaN eval loss, nan-eval-loss reads only its gate's lines
    (the eval line, not the iteration lines that hold `loss`) and fires there."""
    iteration = (
        " iteration      100/  1000 | consumed samples:  51200 | elapsed time per iteration"
        " (ms): 3591.8 | learning rate: 1.500E-04 | global batch size:   512 | lm loss:"
        " 2.187573E+00 | loss scale: 65536.0 | grad norm: 1.349 | number of skipped"
        " iterations:   0 | number of nan iterations:   0 |"
    )
    lines = [iteration] * 300 + [FIRING[1]] + [iteration] * 300
    seen: list[int] = []
    real = evaluate_module._pattern_lines

    def spy(*args: object) -> pl.Series | None:
        picked = real(*args)  # type: ignore[arg-type]  # the real function's own arguments
        if picked is not None:
            seen.append(picked.len())
        return picked

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evaluate_module, "_pattern_lines", spy)
        events = _events(lines, narrowed=True)
    assert [event.rule for event in events] == ["nan-eval-loss"]
    assert events[0].line == 301
    assert seen == [8]  # the validation line, once per copy of the lines
