"""`Engine.process_many` and `Engine.finish_many` give exactly what `process` and `finish` give
source by source: the same events in the same order, rule states, stats and rule errors."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import logwatch
from logwatch.alerts import AlertEvent
from logwatch.engine import Engine, Prepared, kept_last
from logwatch.parse import parse_block, parse_lines
from logwatch.rules.base import Needs, Outcome, Part, Transition
from logwatch.rules.gpu import HoldRule
from logwatch.rules.loader import RuleSpec
from tests.support.corpus import corpus
from tests.support.properties import examples

RULES = logwatch.load_rules()
BOOM = "BOOM"


@dataclass(frozen=True, slots=True)
class Touchy:
    """Fires at each line holding `BOOM` in a source's first batch with one, and raises on a
    batch where the line holding it also says `raise`; its `evaluate_many` raises as soon as
    one part would, so every source takes its own step then."""

    @property
    def needs(self) -> Needs:
        return Needs(frozenset({"text"}))

    def initial_state(self) -> dict[str, Any]:
        return {"seen": 0}

    def evaluate(self, frame: pl.DataFrame, state: dict[str, Any]) -> Outcome:
        texts = frame.get_column("text").to_list()
        rows = [row for row, text in enumerate(texts) if text and BOOM in text]
        if any("raise" in texts[row] for row in rows):
            raise ValueError("the line says raise")
        fired = [Transition(row, "firing", None, {"n": str(row)}) for row in rows]
        return (fired if not state["seen"] else []), {"seen": state["seen"] + len(rows)}

    def evaluate_many(self, frame: pl.DataFrame, parts: list[Part]) -> list[Outcome | None]:
        return [
            None if n % 3 == 0 else self.evaluate(frame.slice(p.begin, p.end - p.begin), p.state)
            for n, p in enumerate(parts)
        ]


TOUCHY = RuleSpec(
    id="touchy",
    type="match",
    severity=RULES[0].severity,
    summary="boom at {line}",
    resolved_summary="r",
    fix="",
    params={},
    rule=Touchy(),
    origin="test",
)


def _sources(seed: int, count: int) -> dict[str, list[str]]:
    """`count` sources' lines, each a stretch of the corpus (its restarts, NaN stretches,
    samples' lines) with a `BOOM` line here and there, some saying `raise`."""
    rng = random.Random(seed)
    out = {}
    for n in range(count):
        lines = corpus(seed + n, lines=rng.randint(5, 400)).decode("utf-8", "replace").split("\n")
        start = rng.randrange(max(1, len(lines) - 5))
        lines = lines[start : start + rng.randint(1, 300)]
        for _ in range(rng.randint(0, 2)):
            lines.insert(rng.randrange(len(lines) + 1), f"{BOOM} {rng.choice(['', 'raise'])}")
        out[f"rank{n}.log"] = lines
    return out


def _rounds(
    seed: int, sources: dict[str, list[str]], rounds: int, columns: frozenset[str] | None = None
) -> list[list[pl.DataFrame]]:
    """Each source's lines cut into `rounds` batches at random (some empty), parsed (for
    `columns` only, where given)."""
    rng = random.Random(seed)
    out: list[list[pl.DataFrame]] = [[] for _ in range(rounds)]
    for name, lines in sources.items():
        cuts = sorted(rng.randint(0, len(lines)) for _ in range(rounds - 1))
        for n, (begin, end) in enumerate(zip([0, *cuts], [*cuts, len(lines)], strict=True)):
            text = pl.Series(lines[begin:end], dtype=pl.String)
            out[n].append(parse_lines(text, source=name, first_line=begin + 1, columns=columns))
    for frames in out:
        rng.shuffle(frames)
    return out


def _said(events: list[list[AlertEvent]]) -> list[list[str]]:
    """Events as their reprs: a NaN value is equal to itself there."""
    return [[repr(event) for event in batch] for batch in events]


def _state(engine: Engine, source: str) -> str:
    """A source's exported state as sorted JSON: equal states, whatever their keys' order (the
    crash rule's open tracebacks come out of a `group_by`) or their NaNs."""
    return json.dumps(engine.export_state(source), sort_keys=True, default=str)


def _engine(errors: list[tuple[str, str, str]]) -> Engine:
    return Engine(
        [TOUCHY, *RULES], on_error=lambda rule, source, exc: errors.append((rule, source, str(exc)))
    )


# 1 to 5 sources: one alone, two or more in a batch, and parts 0 and 3 of `Touchy`'s
# `evaluate_many` taking their own step (`n % 3 == 0`) beside parts that do not; eight sources
# reached no other branch of `process_many` and cost each example up to twice the steps.
@settings(max_examples=examples(60), deadline=None)
@given(
    st.integers(0, 10**6),
    st.integers(1, 5),
    st.integers(1, 3),
    st.booleans(),
    st.booleans(),
)
def test_many_sources_at_once_are_the_sources_one_by_one(
    seed: int, count: int, rounds: int, parsed_for_rules: bool, prepare: bool
) -> None:
    """Random mixes of the corpus in a few rounds: `process_many` per round, then
    `finish_many`, give the events, rule errors, states and stats of `process` and `finish`
    source by source, in the same order."""
    many_errors: list[tuple[str, str, str]] = []
    one_errors: list[tuple[str, str, str]] = []
    many, one = _engine(many_errors), _engine(one_errors)
    computed = many.columns if parsed_for_rules else None
    batches = _rounds(seed, _sources(seed, count), rounds, computed)
    lasts: dict[str, pl.DataFrame | None] = {}
    for frames in batches:
        if prepare:  # what replay's parse threads compute ahead (gate hits, `ahead` columns)
            ready = [many.prepare(frame, computed) for frame in frames]
            got = many.process_many(frames, computed, ready)
            want = [one.process(f, computed, one.prepare(f, computed)) for f in frames]
        else:
            got = many.process_many(frames, computed)
            want = [one.process(frame, computed) for frame in frames]
        assert _said(got) == _said(want)
        for frame in frames:
            if frame.height:
                name = frame.get_column("source")[0]
                lasts[name] = kept_last(lasts.get(name), frame, one.last_lines)
    names = sorted(lasts)
    ends = [lasts[name] for name in names]
    got_ends = many.finish_many(names, ends)
    want_ends = [one.finish(name, last) for name, last in zip(names, ends, strict=True)]
    assert _said(got_ends) == _said(want_ends)
    assert many_errors == one_errors
    assert many.sources.keys() == one.sources.keys()
    for name in many.sources:
        assert _state(many, name) == _state(one, name)


def test_a_rule_raising_for_one_source_is_off_for_that_source_only() -> None:
    """A batched rule whose step raises on one source's lines is reported for it once and
    switched off there; the other sources' steps, taken from the batch, still fire."""
    errors: list[tuple[str, str, str]] = []
    engine = _engine(errors)
    texts = {"a.log": ["ok", f"{BOOM} raise"], "b.log": [f"{BOOM} x"], "c.log": [f"{BOOM} y"]}
    frames = [
        parse_lines(pl.Series(lines, dtype=pl.String), source=name, first_line=1)
        for name, lines in texts.items()
    ]
    got = engine.process_many(frames)
    assert errors == [("touchy", "a.log", "the line says raise")]
    assert [[(e.rule, e.source, e.line) for e in events] for events in got] == [
        [],
        [("touchy", "b.log", 1)],
        [("touchy", "c.log", 1)],
    ]
    again = engine.process_many(frames)
    assert again == [[], [], []]
    assert len(errors) == 1


@pytest.mark.parametrize("first", [True, False])
def test_a_source_restarting_in_its_batch_takes_its_own_path(first: bool) -> None:
    """A `run start:` after a source's first line restarts its rules: the batch gives the
    events of `process`, the restart's ends included."""
    start = "2026-11-01 00:00:00,000 INFO [train] run start: run_id=r2 world=8"
    lines = ["RuntimeError: CUDA error: an illegal memory access was encountered", start]
    lines += ["RuntimeError: CUDA error: an illegal memory access was encountered"]
    if first:
        lines.insert(0, start.replace("r2", "r1"))
    frames = [
        parse_lines(pl.Series(lines, dtype=pl.String), source=name, first_line=1)
        for name in ("a.log", "b.log")
    ]
    many, one = Engine(RULES), Engine(RULES)
    got = many.process_many(frames)
    assert _said(got) == _said([one.process(frame) for frame in frames])
    assert [e.status for e in got[0]] == ["firing", "resolved", "firing"]


def _losses(seed: int, count: int) -> list[str]:
    """DFlash step lines whose loss wanders, leaps now and then (a spike, an extreme one), and
    goes NaN for a stretch; some lines between say no loss."""
    rng = random.Random(seed)
    lines, loss = [], 2.0
    for step in range(count):
        loss = max(0.1, loss * rng.uniform(0.97, 1.02))
        said = loss * rng.choice([1, 1, 1, 1, 1, 1, 1, 1, 3, 300]) if step > 5 else loss
        shown = "nan" if 40 < step % 97 < 45 else f"{said:.4f}"
        lines.append(
            f"2026-11-01 00:{step % 60:02d}:00,000 INFO [train] step {step}/9000 | loss {shown}"
            f" | acc 0.3 | lr 2.40e-05 | grad_norm 1.0 | tok/s 50500 | q_hs=3 q_hsb=[1,2]"
        )
        if rng.random() < 0.1:
            lines.append("2026-11-01 00:00:05,000 INFO [data] loader refilled")
    return lines


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 6), st.integers(1, 4))
def test_loss_histories_of_many_sources_are_each_their_own(
    seed: int, count: int, rounds: int
) -> None:
    """The spike rule scored for many sources in one query (short and long histories, the
    calm ones, spikes, extreme leaps, NaN stretches) gives each source's own events and state."""
    rng = random.Random(seed)
    sources = {f"rank{n}.log": _losses(seed + n, rng.randint(2, 260)) for n in range(count)}
    many, one = Engine(RULES), Engine(RULES)
    fired = 0
    for frames in _rounds(seed, sources, rounds):
        got = many.process_many(frames)
        want = [one.process(frame) for frame in frames]
        assert _said(got) == _said(want)
        fired += sum(e.rule == "loss-spike" for batch in got for e in batch)
    for name in many.sources:
        assert _state(many, name) == _state(one, name)
    assert fired or not any(len(lines) > 40 for lines in sources.values())


def _snapshots(seed: int, count: int, bad: bool) -> list[str]:
    """A run's `[wandb] snapshot` lines every 30 s, 8 GPUs each: GPU 3 idle (util 2) and GPU 5
    near its memory's top from the 4th line on, some hot, a key missing now and then, power
    said by some runs only, a step line between; with `bad`, one snapshot says `mem_gb=nan`
    (a value no GPU column holds: read as missing, and said)."""
    rng = random.Random(seed)
    lines = []
    for n in range(count):
        t = f"2026-11-01 00:{n // 2:02d}:{30 * (n % 2):02d},000"
        keys = []
        for gpu in range(8):
            util = 2 if gpu == 3 and n >= 3 else rng.randint(80, 99)
            mem = "139.5" if gpu == 5 and n >= 3 else f"{rng.uniform(60, 70):.1f}"
            mem = "nan" if bad and n == count // 2 and gpu == 1 else mem
            keys += [f"gpu/{gpu}/util={util}", f"gpu/{gpu}/mem_gb={mem}"]
            keys += [f"gpu/{gpu}/mem_total_gb=139.8", f"gpu/{gpu}/temp_c={rng.randint(55, 90)}"]
            keys += [f"gpu/{gpu}/power_w={rng.randint(300, 700)}"] if seed % 3 else []
        keys = [key for key in keys if "util" in key or rng.random() > 0.05]  # some missing
        lines.append(f"{t} INFO [wandb] snapshot step={n} " + " ".join(keys))
        lines.append(f"{t} INFO [train] step {n}/900 | loss 2.0 | grad_norm 1.0 | q_hs=3")
    return lines


@settings(max_examples=examples(16), deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 5), st.integers(1, 4), st.booleans())
def test_gpu_snapshots_of_many_sources_are_read_once_and_each_their_own(
    seed: int, count: int, rounds: int, bad: bool
) -> None:
    """The GPU rows of many sources' snapshot lines, read in one pass (`_gpu_prepared`) and cut
    back to each source, give each source's own GPU alerts, states and warnings; a round where
    one source's snapshot holds a value no column can hold reads each source's on its own (the
    warning names that source and line)."""
    rng = random.Random(seed)
    sources = {
        f"rank{n}.log": _snapshots(seed + n, rng.randint(1, 20), bad and n == 1)
        for n in range(count)
    }
    warned: dict[str, list[str]] = {"many": [], "one": []}
    many = Engine(RULES, on_warning=lambda w: warned["many"].append(str(w)))
    one = Engine(RULES, on_warning=lambda w: warned["one"].append(str(w)))
    fired = set()
    for frames in _rounds(seed, sources, rounds):
        got = many.process_many(frames)
        assert _said(got) == _said([one.process(frame) for frame in frames])
        fired |= {e.rule for batch in got for e in batch}
    assert warned["many"] == warned["one"]
    for name in many.sources:
        assert _state(many, name) == _state(one, name)
    if any(len(lines) >= 28 for lines in sources.values()):  # 14 snapshots: 6 min 30 s
        assert {"gpu-idle", "gpu-memory-high"} <= fired


def _prepared_said(engine: Engine, ready: Prepared | None) -> list[object]:
    """What a `Prepared` holds, comparable: hits, steps, `ahead`, shapes, the GPU rows, their
    frames and the hold rules' scores (reprs: NaN equal to itself)."""
    if ready is None:
        return [None]
    rows = ready.gpu_rows
    gpu: list[object] = [None]
    if rows is not None:
        holds = [s.rule for s in engine.rules if isinstance(s.rule, HoldRule)]
        gpu = [repr(rows.narrow.rows()), rows.dropped]
        gpu += [_or_error(lambda rule=rule: rows.scored(rule)) for rule in holds]
        gpu += [_or_error(lambda: rows.frame(rows.metrics))]
    return [
        {gate: hits.to_list() for gate, hits in ready.hits.items()},
        ready.error,
        ready.stepped,
        ready.last_step,
        ready.run_steps,
        None if ready.ahead is None else repr(ready.ahead.rows()),
        None if ready.shapes is None else ready.shapes.to_list(),
        *gpu,
    ]


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 8), st.booleans(), st.booleans(), st.booleans())
def test_a_group_prepared_at_once_is_each_frame_prepared(
    seed: int, count: int, parsed_for_rules: bool, shaped: bool, long: bool
) -> None:
    """`prepare_many` over a parse group's frames (the corpus's restarts, NaN stretches, GPU
    snapshots, with and without the lines' shapes; `long`: each source's lines 20 times, so
    that only the frames' last lines are read for their steps) gives each frame what
    `prepare` gives it alone: gate hits, last step, `ahead` columns, GPU rows and scores."""
    engine = Engine(RULES)
    computed = engine.columns if parsed_for_rules else None
    frames, shapes = [], []
    for n, lines in enumerate(_sources(seed, count).values()):
        text = pl.Series(lines * (20 if long else 1), dtype=pl.String)
        block = parse_block(text, source=f"rank{n}.log", first_line=1, columns=computed)
        frames.append(block.frame)
        shapes.append(block.shapes)
    whole = pl.concat(frames, rechunk=True)
    frames = [whole.slice(b, f.height) for b, f in zip(_starts(frames), frames, strict=True)]
    told = None
    if shaped and all(s is not None for s in shapes):
        told = pl.concat([cast(pl.Series, s) for s in shapes])
    got = engine.prepare_many(whole, frames, computed, shapes=told)
    for frame, ready, begin in zip(frames, got, _starts(frames), strict=True):
        cut = None if told is None else told.slice(begin, frame.height)
        want = engine.prepare(frame, computed, shapes=cut)
        assert _prepared_said(engine, ready) == _prepared_said(engine, want)


def _or_error(made: Callable[[], pl.DataFrame]) -> str:
    try:
        return repr(made().rows())
    except ValueError as exc:
        return str(exc)


def _starts(frames: list[pl.DataFrame]) -> list[int]:
    return list(itertools.accumulate((f.height for f in frames), initial=0))[:-1]
