"""The live driver's warm-up: the rules run once over typical lines at start, and nothing of
it is kept (no event, no state, no error report), while every common path is gone through."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from pytest import MonkeyPatch

from logwatch.cli.follow import follow_setup
from logwatch.cli.tail import tail_cmd
from logwatch.cli.top import top_cmd
from logwatch.drivers.tail_options import StartMode
from logwatch.drivers.warmup import SCRATCH_SOURCE, WARM_UP_LINES, warm_up
from logwatch.engine import Engine
from logwatch.parse import shape_of
from logwatch.parse.shapes import SHAPES
from logwatch.testing import running
from tests.support.tailkit import Tail
from tests.test_engine import RULES, exploding_spec, frames

LINES = ["step 1 | loss 2.0", "step 2 | loss nan", "step 3 | loss 2.1", "step 4 | loss inf"]


def test_the_warm_up_lines_go_through_every_shape_a_firing_and_its_end() -> None:
    """Each line shape, the general path, a NaN firing and its resolution are met once."""
    shapes = shape_of(pl.Series("text", list(WARM_UP_LINES))).to_list()
    assert {SHAPES[number].name for number in shapes if number is not None} == {
        shape.name for shape in SHAPES
    }
    assert None in shapes  # a line no shape fits: the general path
    engine = Engine(RULES)
    lines = list(WARM_UP_LINES)
    got = [(e.rule, e.status) for e in engine.run_all(frames(lines, list(range(len(lines)))))]
    assert ("nan-loss", "firing") in got
    assert ("nan-loss", "resolved") in got


def test_a_warmed_up_engine_keeps_nothing_of_it_and_alerts_as_a_cold_one() -> None:
    """After the warm-up the engine holds no state of its own lines, and a log cut into live
    batches gives the events (and the states) an engine that never warmed up gives."""
    cold, warm = Engine(RULES), Engine(RULES)
    warm_up(warm, warm.every_column)
    assert warm.sources == {}
    batches = frames(LINES, list(range(len(LINES))))
    expected = [e.to_jsonl() for e in cold.run_all(batches)]
    assert [e.to_jsonl() for e in warm.run_all(batches)] == expected
    assert warm.export_state("s.log") == cold.export_state("s.log")


def test_a_rule_that_raises_in_the_warm_up_is_reported_on_the_users_lines_only() -> None:
    """The warm-up reports no error and does not switch a rule off: the user's own lines
    report its error, once, under their source."""
    bad = exploding_spec()
    errors: list[tuple[str, str]] = []
    engine = Engine([bad, *RULES], on_error=lambda rule, source, exc: errors.append((rule, source)))
    warm_up(engine, engine.every_column)
    assert errors == []
    got = engine.run_all(frames(LINES, [2]))
    assert errors == [("exploding", "s.log")]
    assert [(e.line, e.rule) for e in got] == [(2, "nan-loss"), (3, "nan-loss"), (4, "nan-loss")]


def test_a_tail_that_warms_up_shows_and_saves_nothing_of_it(tmp_path: Path) -> None:
    """`logwatch tail` warms up at start: its rules see the warm-up lines (under the scratch
    source), yet no alert of theirs reaches the sink, and the checkpoint names only the
    followed file."""
    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 2.0\n")
    tail = Tail(tmp_path, warm_up=True, start=StartMode.BEGINNING)
    with running(tail.driver) as driver:
        driver.sync()
    seen = {source for source, _, _ in tail.rec.seen}
    assert seen == {SCRATCH_SOURCE, str(log)}
    assert [text for source, _, text in tail.rec.seen if source == SCRATCH_SOURCE] == list(
        WARM_UP_LINES
    )
    assert tail.sink.events == []
    assert SCRATCH_SOURCE not in tail.driver.engine.sources
    saved = b"".join(
        path.read_bytes() for path in (tmp_path / "state").rglob("*") if path.is_file()
    )
    assert b"warm-up" not in saved
    assert str(log).encode() in saved


def test_tail_and_top_warm_up_unless_told_not_to(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    """`tail` and `top` warm up by default; `--no-warm-up`, or LOGWATCH_WARM_UP=0 (what the
    test suite's processes run with, tests/conftest.py), starts without; the choice reaches the
    live driver's options."""
    monkeypatch.delenv("LOGWATCH_WARM_UP", raising=False)
    for command in (tail_cmd, top_cmd):
        assert command.make_context("x", ["a.log"]).params["warm_up"] is True
        assert command.make_context("x", ["a.log", "--no-warm-up"]).params["warm_up"] is False
    monkeypatch.setenv("LOGWATCH_WARM_UP", "0")
    assert tail_cmd.make_context("x", ["a.log"]).params["warm_up"] is False
    assert tail_cmd.make_context("x", ["a.log", "--warm-up"]).params["warm_up"] is True
    monkeypatch.chdir(tmp_path)  # no logwatch.toml found: the defaults
    monkeypatch.delenv("LOGWATCH_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for warm in (True, False):
        setup = follow_setup(
            [str(tmp_path / "*.log")], (), False, tmp_path / "state", False, False, 1.0, 5.0,
            1 << 20, "off", None, None, warm_up=warm,
        )  # fmt: skip
        assert setup.options.warm_up is warm
