"""A quiet gated rule on a long batch reads its columns only from each gate line on, until it is
quiet again (`Engine._gated`), and its events read only their own rows (`_EventRows`): the events
are exactly those of the same batch parsed in full, at any cut into batches."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any, cast

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import logwatch
import logwatch.engine as engine_module
from logwatch.engine import Engine
from logwatch.engine.batch import _GATED_ROWS as GATED_ROWS
from logwatch.parse import parse_lines
from tests.support import corpus
from tests.support.properties import examples

GATED = ("nan-loss", "nan-grad", "loss-scale-overflow", "run-crashed")
RULES = [spec for spec in logwatch.load_rules() if spec.id in GATED]
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "train.py", line 3, in <module>',
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]


def _lines(seed: int, count: int, bad: int) -> list[str]:
    """`count` finite DFlash step lines (some with rank prefixes or no step), with `bad` lines
    spelling non-finite values (every spelling and dialect the corpus knows), overflow and
    traceback lines put in at random places."""
    rng = random.Random(seed)
    lines = []
    for step in range(count):
        loss, grad = rng.uniform(0.5, 4), rng.uniform(0.1, 3)
        line = f"2026-11-01 00:00:00,000 INFO [train] step {step}/9000 | loss {loss:.4f} | acc 0.3"
        line += f" | lr 2.40e-05 | grad_norm {grad:.2f} | tok/s 50000 | q_hs=3 q_hsb=[1,2]"
        if rng.random() < 0.1:
            line = corpus.PREFIXES[rng.randrange(2)].format(r=rng.randrange(4)) + line
        lines.append(line if rng.random() > 0.05 else "INFO [data] worker 3 prefetched 64")
    for _ in range(bad):
        value = rng.choice(corpus.NONFINITE)
        kind = rng.random()
        if kind < 0.6:
            text = rng.choice(corpus.NAN_LINES).format(v=value, step=rng.randrange(9000), n=2)
        elif kind < 0.75:
            text = f"step {rng.randrange(9000)} | loss {rng.choice(['1e400', '1' * 400])} | lr 1"
        elif kind < 0.85:
            text = "[rank1]: Gradient overflow. Skipping step, reducing loss scale to 1024.0"
        else:
            at = rng.randrange(len(lines) + 1)
            lines[at:at] = TRACEBACK
            continue
        if rng.random() < 0.3:
            text = corpus.PREFIXES[0].format(r=rng.randrange(4)) + text
        lines.insert(rng.randrange(len(lines) + 1), text)
    return lines


def _events(
    lines: list[str], cuts: list[int], *, full: bool, rules: list[Any] | None = None
) -> list[str]:
    """Every event of the gated rules (or `rules`) over `lines` cut at `cuts` into batches:
    parsed in full (`full`), or only the columns replay parses for them."""
    engine = Engine(RULES if rules is None else rules, stats=False)
    columns = None if full else engine.columns
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(lines)}), len(lines)]
    events = []
    for start, end in itertools.pairwise(bounds):
        frame = parse_lines(
            pl.Series(lines[start:end]),
            source="t",
            first_line=start + 1,
            default_year=2026,
            columns=columns,
        )
        events.extend(engine.process(frame, columns))
    events.extend(engine.finish("t"))
    return [event.to_jsonl() for event in events]


@settings(max_examples=examples(40), deadline=None)
@given(
    st.integers(0, 10**6),
    st.integers(200, 3000),
    st.integers(0, 12),
    st.lists(st.integers(1, 3000), max_size=3),
)
def test_gated_rules_on_long_batches_give_the_full_parse_events(
    seed: int, count: int, bad: int, cuts: list[int]
) -> None:
    """The gated rules' events with their columns read from the gate lines on are those of the
    batches parsed in full, at any cut."""
    lines = _lines(seed, count, bad)
    assert _events(lines, cuts, full=False) == _events(lines, cuts, full=True)


def test_the_gated_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property above runs the gated path (it would pass vacuously on the dense one): on a
    long batch with one NaN line, nan-loss reads the loss from its gate line on, and its events
    are the full parse's."""
    taken: list[bool] = []
    gated = Engine._gated

    def spy(self: Engine, *args: Any) -> Any:
        found = gated(self, *args)
        taken.append(found is not None)
        return found

    lines = _lines(7, 2000, 0)
    lines[900] = lines[900].replace("| loss ", "| loss nan | was ")
    monkeypatch.setattr(engine_module.Engine, "_gated", spy)
    events = _events(lines, [], full=False)
    assert True in taken
    assert [json.loads(e)["status"] for e in events] == ["firing", "resolved"]
    assert [json.loads(e)["line"] for e in events] == [901, 902]
    assert events == _events(lines, [], full=True)


ALL_RULES = logwatch.load_rules()
GATE_LINES = [
    "[rank0]:[E ProcessGroupNCCL.cpp:1234] NCCL error: unhandled system error",
    "NVRM: Xid (PCI:0000:44:00): 79, pid=3412, name=python3, GPU has fallen off the bus.",
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1024.0",
    "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
    "Out of memory: Killed process 1234 (python) total-vm:1kB",
    "pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found: cannot open",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE)",
    "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.",
    "ModuleNotFoundError: No module named 'pynvml'",
]


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 400))
def test_the_lines_prepare_finds_are_each_gates_own(seed: int, count: int) -> None:
    """The lines `Engine.prepare` says each gate selects are the lines its regex matches (for
    the nonfinite gate, what its expression selects; for `NEVER`, none)."""
    rng = random.Random(seed)
    pool = [*_lines(seed, 40, 6), *TRACEBACK, *GATE_LINES]
    pool += [line.format(v=rng.choice(corpus.NONFINITE), step=3, n=1) for line in corpus.NAN_LINES]
    text = pl.Series([rng.choice(pool) for _ in range(count)], dtype=pl.String)
    frame = parse_lines(text, source="t", first_line=1)
    engine = Engine(ALL_RULES, stats=False)
    prepared = engine.prepare(frame)
    assert prepared is not None
    gates = {needs.gate: needs for needs in engine._needs if needs.gate is not None}
    assert set(prepared.hits) == set(gates)
    for gate, needs in gates.items():
        rows = needs.rows if needs.rows is not None else pl.col("text").str.contains(gate)
        want = frame.select(rows.fill_null(False).arg_true()).to_series().to_list()
        assert prepared.hits[gate].to_list() == want, gate


@settings(max_examples=examples(15), deadline=None)
@given(st.integers(0, 10**6), st.integers(100, 1500), st.lists(st.integers(1, 4000), max_size=2))
def test_a_nan_episode_is_read_from_its_gate_lines_on(
    seed: int, length: int, cuts: list[int]
) -> None:
    """A divergence that logs a NaN loss for hundreds of steps opens the gate on more than one
    line in 64, but in one stretch: the gated path still reads only from the stretch on (in
    growing pieces, the rest of the batch at once past a few), with the full parse's events."""
    taken: list[tuple[int, bool]] = []  # (the batch's rows, whether it was read gated)
    gated = Engine._gated

    def spy(self: Engine, *args: Any) -> Any:
        found = gated(self, *args)
        taken.append((cast(pl.DataFrame, args[3]).height, found is not None))
        return found

    lines = _lines(seed, 4000, 0)
    at = random.Random(seed).randrange(0, 4000 - length)
    for row in range(at, at + length):
        lines[row] = lines[row].replace("| loss ", "| loss nan | was ")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_module.Engine, "_gated", spy)
        events = _events(lines, cuts, full=False)
    # every batch long enough to gain by it is read gated (a batch of a line or two, cut from
    # the file's start, is read in full, as a batch with gate lines everywhere is)
    assert taken and all(was for rows, was in taken if rows >= 4 * GATED_ROWS)
    assert "firing" in [json.loads(e)["status"] for e in events]
    assert events == _events(lines, cuts, full=True)


def test_a_batch_that_begins_inside_an_episode_is_read_piecewise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch cut inside a NaN episode begins with the rule not quiet: it is read from its
    first row on, in pieces, until the episode ends (not parsed in full), and the later gate
    lines from theirs on; the events are the full parse's."""
    calls: list[tuple[bool, bool]] = []  # (from the batch's first row, taken)
    gated = Engine._gated

    def spy(self: Engine, *args: Any) -> Any:
        found = gated(self, *args)
        calls.append((bool(args[-1]), found is not None))
        return found

    lines = _lines(11, 4000, 0)
    for row in [*range(1000, 1600), 3000]:
        lines[row] = lines[row].replace("| loss ", "| loss nan | was ")
    monkeypatch.setattr(engine_module.Engine, "_gated", spy)
    events = _events(lines, [1300], full=False)
    assert (True, True) in calls and (False, True) in calls
    assert [json.loads(e)["status"] for e in events].count("firing") == 2
    assert events == _events(lines, [1300], full=True)


@settings(max_examples=examples(20), deadline=None)
@given(st.integers(0, 10**6), st.lists(st.integers(1, 3000), max_size=2))
def test_nan_loss_alone_reads_only_the_lines_that_can_say_a_loss(
    seed: int, cuts: list[int]
) -> None:
    """nan-loss reading the pieces alone parses only their lines that can hold a loss value
    (`Needs.valued_rows`), at any cut, with the full parse's events."""
    import logwatch.engine.batch as batch_module

    lines = _lines(seed, 3000, 8)
    at = random.Random(seed).randrange(0, 2400)
    for row in range(at, at + 500):
        lines[row] = lines[row].replace("| loss ", "| loss nan | was ")
    alone = [spec for spec in RULES if spec.id == "nan-loss"]
    valued = batch_module._Pieces.valued
    read: list[int] = []

    def spy(self: Any, start: int, size: int, rows: pl.Expr) -> Any:
        found = valued(self, start, size, rows)
        read.append(found[0].height)
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batch_module._Pieces, "valued", spy)
        events = _events(lines, cuts, full=False, rules=alone)
    assert read
    assert events == _events(lines, cuts, full=True, rules=alone)


def test_rules_whose_gates_open_on_the_same_lines_read_the_same_pieces() -> None:
    """In a divergence both the loss and the grad norm are NaN: nan-loss and nan-grad read the
    same pieces of the batch from the first NaN line on, computed once for both."""
    import logwatch.engine.batch as batch_module

    lines = _lines(3, 4000, 0)
    for row in range(1200, 1900):
        lines[row] = (
            lines[row]
            .replace("| loss ", "| loss nan | was ")
            .replace("grad_norm ", "grad_norm inf | was ")
        )
    both = [spec for spec in RULES if spec.id in ("nan-loss", "nan-grad")]
    counts = []
    for rules in (both, both[:1]):
        engine = Engine(rules, stats=False)
        frame = parse_lines(
            pl.Series(lines), source="t", first_line=1, default_year=2026, columns=engine.columns
        )
        calls: list[int] = []
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(batch_module, "complete", _counting(batch_module.complete, calls))
            events = engine.process(frame, engine.columns)
        assert {event.rule for event in events} == {spec.id for spec in rules}
        counts.append(len(calls))
    assert counts[0] == counts[1] > 0


def _counting(real: Any, calls: list[int]) -> Any:
    """`real`, counting its calls into `calls`."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    return counted
