"""`Engine.export_state` redacts each rule state again only when the rule replaced it: what it
exports after any sequence of batches, ticks and restarts is `masked` of the states as they are."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

import logwatch
from logwatch.engine import Engine
from logwatch.engine.state import masked
from logwatch.parse import parse_lines
from logwatch.redact import MASK
from tests.support.corpus import corpus

RULES = logwatch.load_rules()
SAMPLES = sorted(Path(__file__).resolve().parents[1].glob("samples/**/*.log"))
TOKEN = "xoxb-123456789012-123456789012-abcdefghijklmnopqrstuvwx"


def _fresh(engine: Engine, source: str) -> str:
    """The source's rule states redacted from scratch (no copy kept), as JSON."""
    return json.dumps(masked(engine.sources[source].rule_states), sort_keys=True, default=str)


def _exported(engine: Engine, source: str) -> str:
    return json.dumps(engine.export_state(source)["rule_states"], sort_keys=True, default=str)


def _batches(lines: list[str], rng: random.Random) -> list[list[str]]:
    out, begin = [], 0
    while begin < len(lines):
        end = begin + rng.randint(1, 40)
        out.append(lines[begin:end])
        begin = end
    return out


def test_every_export_equals_a_fresh_redaction_through_every_sample_and_the_corpus() -> None:
    """Every sample log and a stretch of the seeded corpus, fed in small batches (one source at
    a time and several at once through `process_many`), with wall-clock ticks between rounds
    and a restart: after every round, each source's exported rule states equal `masked` of its
    states made afresh. A rule that changed its state in place (the same object, other
    content) would leave a stale copy here and fail."""
    rng = random.Random(7)
    texts = {path.name: path.read_text(errors="replace").splitlines() for path in SAMPLES}
    texts["corpus.log"] = corpus(3, lines=600).decode("utf-8", "replace").split("\n")
    feeds = {name: _batches(lines, rng) for name, lines in texts.items()}
    engine = Engine(RULES)
    first = dict.fromkeys(feeds, 1)
    now = datetime(2026, 11, 28, 14, 0, 0)
    rounds = max(len(batches) for batches in feeds.values())
    for n in range(rounds):
        frames = []
        for name, batches in feeds.items():
            if n < len(batches):
                text = pl.Series(batches[n], dtype=pl.String)
                frames.append(parse_lines(text, source=name, first_line=first[name]))
                first[name] += len(batches[n])
        if n % 2:
            engine.process_many(frames)
        else:
            for frame in frames:
                engine.process(frame)
        now += timedelta(seconds=rng.choice([1, 1, 30, 700]))
        for name in feeds:
            engine.tick(name, now, arrived=True, line=first[name] - 1)
        if n == rounds // 2:
            engine.restart("train_nan.log", line=first["train_nan.log"], ts=None, why="test")
        for name in feeds:
            if name in engine.sources:
                assert _exported(engine, name) == _fresh(engine, name), (name, n)


def test_a_kept_line_is_redacted_and_a_replaced_state_redacted_again() -> None:
    """A rule state that keeps a line with a token exports it masked, export after export;
    once the rule replaces that state, the export is the new state's, redacted."""
    engine = Engine(RULES)
    engine.process(parse_lines(pl.Series(["step 1 | loss 2.0"]), source="a.log", first_line=1))
    states = engine.state_of("a.log").rule_states
    states["run-crashed"] = {"tail": f"RuntimeError: token={TOKEN}", "n": 1}
    for _ in range(2):
        exported = engine.export_state("a.log")["rule_states"]["run-crashed"]
        assert exported == {"tail": f"RuntimeError: token={MASK}", "n": 1}
    states["run-crashed"] = {"tail": f"ValueError: {TOKEN}", "n": 2}
    exported = engine.export_state("a.log")["rule_states"]["run-crashed"]
    assert exported == {"tail": f"ValueError: {MASK}", "n": 2}
    assert states["run-crashed"]["tail"].endswith(TOKEN)  # the engine's own state is as it was
