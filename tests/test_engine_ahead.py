"""What `Engine.prepare` computes ahead on the parse threads (the rules' `Needs.ahead` columns,
the GPU hold rules' scored rows) gives exactly the events of the engine computing it itself."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import logwatch
from logwatch.engine import Engine, gpu_rows
from logwatch.parse import parse_lines
from logwatch.rules.drop import PAUSES
from tests.support.properties import examples

OOM = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total",
    "capacity of 79.15 GiB of which 1.02 GiB is free.",
    "RuntimeError: CUDA error: out of",
    "memory",
]
PAUSE = "2026-11-01 00:00:05,000 INFO [ckpt] saved checkpoint to /ckpt/step_{step} in 40s"
SNAPSHOT = "2026-11-01 00:{m:02d}:00,000 INFO [wandb] snapshot step={step} gpu/0/util={u}"


def _lines(seed: int, count: int) -> list[str]:
    """DFlash step lines whose throughput drops now and then, with pauses, snapshots of an
    idle or busy GPU, and CUDA OOM messages (some wrapped over two lines) at random places."""
    rng = random.Random(seed)
    lines = []
    for step in range(count):
        tok = rng.choice([50000, 51000, 12000]) if rng.random() < 0.3 else 50500
        lines.append(
            f"2026-11-01 00:{step % 60:02d}:00,000 INFO [train] step {step}/9000 | loss 1.5 | acc"
            f" 0.3 | lr 2.40e-05 | grad_norm 1.0 | tok/s {tok} | q_hs=3 q_hsb=[1,2]"
        )
        kind = rng.random()
        if kind < 0.05:
            lines.append(PAUSE.format(step=step))
        elif kind < 0.25:
            lines.append(SNAPSHOT.format(m=step % 60, step=step, u=rng.choice([1, 97])))
        elif kind < 0.28:
            at = rng.randrange(len(OOM) - 1)
            lines.extend(OOM[at : at + 2])
    return lines


RULES = logwatch.load_rules()


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 10**6), st.integers(20, 300), st.integers(1, 4))
def test_prepared_batches_give_the_events_of_the_engine_itself(
    seed: int, count: int, pieces: int
) -> None:
    lines = _lines(seed, count)
    cuts = sorted(random.Random(seed).sample(range(1, len(lines)), pieces - 1))
    ahead, itself = Engine(RULES, stats=False), Engine(RULES, stats=False)
    got: list[tuple[str, str, int, str]] = []
    want: list[tuple[str, str, int, str]] = []
    for start, end in zip([0, *cuts], [*cuts, len(lines)], strict=True):
        text = pl.Series(lines[start:end], dtype=pl.String)
        frame = parse_lines(text, source="s", first_line=start + 1)
        prepared = ahead.prepare(frame)
        assert prepared is not None and prepared.ahead is not None
        assert PAUSES in prepared.ahead.columns
        got += [(e.rule, e.status, e.line, e.summary) for e in ahead.process(frame, None, prepared)]
        want += [(e.rule, e.status, e.line, e.summary) for e in itself.process(frame)]
    assert got == want


def test_a_prepared_pause_column_is_the_one_the_rule_reads() -> None:
    """The throughput rule reads the pauses `prepare` found: with none found ahead, a pause
    line no longer keeps a slow report after it out of the streak."""
    lines = [
        f"2026-11-01 00:00:{s:02d},000 INFO [train] step {s}/9 | loss 1.5 | acc 0.3 | lr 2.40e-05"
        f" | grad_norm 1.0 | tok/s {50000 if s < 40 else 100} | q_hs=3 q_hsb=[1,2]"
        for s in range(45)
    ]
    lines.insert(40, PAUSE.format(step=40))
    frame = parse_lines(pl.Series(lines, dtype=pl.String), source="s", first_line=1)
    engine = Engine(RULES, stats=False)
    prepared = engine.prepare(frame)
    assert prepared is not None and prepared.ahead is not None
    fired = {e.line for e in Engine(RULES, stats=False).process(frame, None, prepared)}
    assert prepared.ahead.get_column(PAUSES).sum() == 1
    blind = pl.DataFrame({PAUSES: [False] * frame.height})
    for name in prepared.ahead.columns:
        if name != PAUSES:
            blind = blind.with_columns(prepared.ahead.get_column(name))
    hidden_ahead = replace(prepared, ahead=blind)
    hidden = {e.line for e in Engine(RULES, stats=False).process(frame, None, hidden_ahead)}
    assert fired != hidden


def test_a_live_batch_gets_its_ahead_columns_from_the_live_checks() -> None:
    """On live batches (no `prepare`), the live checks' one select computes the rules'
    `Needs.ahead` columns too, and the rules read those: fed one line at a time, the pause
    line still keeps the slow report after it out of the throughput streak, and with the
    pauses hidden in that select it no longer does."""
    lines = [
        f"2026-11-01 00:00:{s:02d},000 INFO [train] step {s}/9 | loss 1.5 | acc 0.3 | lr 2.40e-05"
        f" | grad_norm 1.0 | tok/s {50000 if s < 40 else 100} | q_hs=3 q_hsb=[1,2]"
        for s in range(45)
    ]
    lines.insert(40, PAUSE.format(step=40))
    frames = [
        parse_lines(pl.Series([line], dtype=pl.String), source="s", first_line=n)
        for n, line in enumerate(lines, start=1)
    ]
    whole = parse_lines(pl.Series(lines, dtype=pl.String), source="s", first_line=1)
    itself = {e.line for e in Engine(RULES, stats=False).process(whole)}
    checks, seen = Engine._live_checks, []

    def spy(self: Engine, *args: object, blind: bool = False) -> object:
        found = checks(self, *args)  # type: ignore[arg-type]
        assert found.ahead is not None
        seen.append(found.ahead.get_column(PAUSES).item())
        if blind:
            ahead = found.ahead.with_columns(pl.lit(False).alias(PAUSES))
            return replace(found, ahead=ahead)
        return found

    def live(blind: bool) -> set[int]:
        engine = Engine(RULES, stats=False)
        engine._live_checks = lambda *args: spy(engine, *args, blind=blind)  # type: ignore[method-assign,assignment,return-value]
        return {e.line for frame in frames for e in engine.process(frame)}

    assert live(blind=False) == itself
    assert seen[40] is True and sum(seen) == 1
    assert live(blind=True) != itself


RUN_START = "2026-11-01 00:00:00,000 INFO [train] run start: run_id=r{run} world=8"
NAN = (
    "2026-11-01 00:{m:02d}:30,000 INFO [train] step {step}/9000 | loss nan | acc 0.3 | lr"
    " 2.40e-05 | grad_norm nan | tok/s 50500 | q_hs=3 q_hsb=[1,2]"
)


def _restarted(seed: int, count: int) -> list[str]:
    """`_lines` with `run start:` headers (restarts into the same file) and NaN steps at random
    places, and snapshots whose GPU stays idle across a restart."""
    rng = random.Random(seed + 1)
    lines = []
    for number, line in enumerate(_lines(seed, count)):
        lines.append(line)
        kind = rng.random()
        if kind < 0.04:
            lines.append(RUN_START.format(run=number))
        elif kind < 0.12:
            lines.append(NAN.format(m=number % 60, step=number))
    return lines


# Up to 160 step lines: about 6 restarts and 10 NaN steps on average (a run is evaluated on its
# own, so each restart costs both engines a step; 400 lines gave 16 runs for no new branch).
@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 10**6), st.integers(20, 160), st.integers(1, 3))
def test_a_batch_cut_at_run_starts_uses_what_was_prepared_for_it_whole(
    seed: int, count: int, pieces: int
) -> None:
    """A batch holding restarts is evaluated run by run, each run with its share of what
    `prepare` found for the whole batch (gate lines, `ahead` columns, each run's last step,
    GPU rows), parsed with only the columns replay parses: the events (and steps) of the
    engine computing each run itself, and no GPU row read again."""
    lines = _restarted(seed, count)
    cuts = sorted(random.Random(seed).sample(range(1, len(lines)), pieces - 1))
    ahead, itself = Engine(RULES, stats=False), Engine(RULES, stats=False)
    columns = ahead.columns
    got: list[tuple[str, str, int, int | None, str, str]] = []
    want: list[tuple[str, str, int, int | None, str, str]] = []
    for start, end in zip([0, *cuts], [*cuts, len(lines)], strict=True):
        text = pl.Series(lines[start:end], dtype=pl.String)
        frame = parse_lines(text, source="s", first_line=start + 1, columns=columns)
        prepared = ahead.prepare(frame, columns)
        assert prepared is not None
        with _no_gpu_rows_read() if prepared.gpu_rows is not None else nullcontext():
            events = ahead.process(frame, columns, prepared)
        got += [(e.rule, e.status, e.line, e.step, e.summary, e.run) for e in events]
        events = itself.process(frame, columns)
        want += [(e.rule, e.status, e.line, e.step, e.summary, e.run) for e in events]
    assert got == want


@contextmanager
def _no_gpu_rows_read() -> Iterator[None]:
    """Fails a test that reads a batch's GPU rows from its lines (`log_gpu_rows`)."""

    def read(*args: object, **kwargs: object) -> None:
        raise AssertionError("GPU rows read again from the lines")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gpu_rows, "log_gpu_rows", read)
        yield


def test_a_block_moved_to_the_carried_year_keeps_what_was_prepared() -> None:
    """replay moves a block's yearless head to the year carried from the block before, which
    makes a new frame: what `prepare` found that reads no timestamp (gate lines, the last
    step) is kept for it (`Prepared.moved`), with the engine's own events and no step search
    on the main thread."""
    import logwatch.engine.evaluate as evaluate_module

    lines = _restarted(5, 300)
    rules = [spec for spec in RULES if spec.id in ("nan-loss", "nan-grad")]
    engine, itself = Engine(rules, stats=False), Engine(rules, stats=False)
    columns = engine.columns
    frame = parse_lines(pl.Series(lines), source="s", first_line=1, columns=columns)
    prepared = engine.prepare(frame, columns)
    assert prepared is not None and prepared.stepped
    moved = frame.with_columns(pl.col("ts").dt.offset_by("-1y"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evaluate_module, "last_step_of", _not_called)
        got = engine.process(moved, columns, prepared.moved(moved))
    want = itself.process(moved, columns)
    assert [e.to_jsonl() for e in got] == [e.to_jsonl() for e in want]
    assert got
    with pytest.raises(ValueError, match="a frame of 1 rows"):
        prepared.moved(moved.head(1))


def test_the_last_step_search_reads_each_line_once() -> None:
    """Where no line says a step (a Hugging Face Trainer's log), the search for the last step
    parses every line once, not the growing tails over again."""
    import logwatch.engine.batch as batch_module

    lines = [f"{{'loss': 1.{i}, 'grad_norm': 0.5, 'learning_rate': 2e-05}}" for i in range(5000)]
    frame = parse_lines(pl.Series(lines), source="s", first_line=1, columns={"loss"})
    read: list[int] = []
    real = batch_module.complete

    def counted(piece: pl.DataFrame, *args: object, **kwargs: object) -> pl.DataFrame:
        read.append(piece.height)
        return real(piece, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batch_module, "complete", counted)
        assert batch_module.last_step_of(frame) is None
    assert sum(read) == frame.height


def _not_called(*args: object) -> None:
    raise AssertionError("called")


_STEPPED = [
    "2026-11-01 00:09:37,181 INFO [train] step {i}/9 | loss 2.1 | lr 2.40e-05",
    "iteration {i}/ 100 | consumed samples: 8 | lm loss: 2.0E+00 |",
    "step {i} | loss 1.0",
]
_STEPLESS = [
    "2026-11-01 00:09:38,107 INFO [hsq] q_hsb=[7,9,5,0,2,0] at q_hs=23",
    "{{'loss': 1.5, 'grad_norm': 0.5, 'learning_rate': 2e-05}}",
    "plain words",
]


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.sampled_from(_STEPPED + _STEPLESS), max_size=40),
    st.lists(st.sampled_from(_STEPLESS), max_size=40),
    st.integers(0, 1400),
)
def test_the_last_step_is_the_last_one_any_line_says(
    head: list[str], tail: list[str], quiet: int
) -> None:
    """`last_step_of` reads the batch from its end in growing windows: the step it gives is the
    last one a complete parse of every line gives, however many lines without one follow it
    (or None)."""
    import logwatch.engine.batch as batch_module

    kinds = head + tail + [_STEPLESS[quiet % 3]] * quiet
    lines = pl.Series([kind.format(i=i) for i, kind in enumerate(kinds)], dtype=pl.String)
    said = parse_lines(lines, source="s", first_line=1).get_column("step").drop_nulls()
    narrow = parse_lines(lines, source="s", first_line=1, columns=set())
    assert batch_module.last_step_of(narrow) == (int(said[-1]) if said.len() else None)
