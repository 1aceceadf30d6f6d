"""The engine: lifecycles, chunk invariance, run restarts, and a failing rule."""

from __future__ import annotations

import itertools
import random
from typing import Any

import polars as pl
import pytest

from logwatch.alerts import AlertEvent
from logwatch.engine import Engine, log_message
from logwatch.parse import parse_lines
from logwatch.rules.base import Transition
from logwatch.rules.loader import RuleSpec, builtin_rules_dir, load_rules

RULES = load_rules([builtin_rules_dir()])


def frames(lines: list[str], cuts: list[int], source: str = "s.log") -> list[pl.DataFrame]:
    """Parse `lines` as batches cut at the given line indexes."""
    bounds = [0, *sorted(set(cuts)), len(lines)]
    return [
        parse_lines(pl.Series(lines[a:b], dtype=pl.String), source=source, first_line=a + 1)
        for a, b in itertools.pairwise(bounds)
        if b > a
    ]


def events(lines: list[str], cuts: list[int]) -> list[tuple[int, str, str]]:
    engine = Engine(RULES)
    return [(e.line, e.rule, e.status) for e in engine.run_all(frames(lines, cuts))]


def random_log(rng: random.Random, n: int) -> list[str]:
    """A log mixing finite / NaN losses, queue reports and snapshots, with long streaks."""
    out = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.4:
            out.append(
                f"step {i} | loss {rng.choice(['1.5', '2.0', 'nan', 'inf'])} | grad_norm {rng.choice(['1', 'nan'])}"
            )
        elif kind < 0.8:
            starving = (i // 17) % 2 == 0
            q = "0,0,0,0,0,31" if starving or rng.random() < 0.2 else "1,2,0,0,0,28"
            out.append(f"q_hsb=[{q}] at q_hs=31")
        elif kind < 0.95:
            out.append("snapshot step=1 prof/x=1" + (" gpu/0/util=9" if rng.random() < 0.3 else ""))
        else:
            out.append("data loader chatter")
    return out


@pytest.mark.parametrize("seed", range(6))
def test_any_split_gives_the_same_alerts(seed: int) -> None:
    """Random logs cut at random places produce exactly the alerts of the uncut log."""
    rng = random.Random(seed)
    lines = random_log(rng, 300)
    whole = events(lines, [])
    assert whole, "the random log should trigger something"
    for _ in range(3):
        cuts = rng.sample(range(1, len(lines)), rng.randint(1, 25))
        assert events(lines, cuts) == whole


def test_one_line_batches_give_the_same_alerts() -> None:
    """The extreme split, one line per batch (as a slow tail sees it), changes nothing."""
    lines = random_log(random.Random(99), 120)
    assert events(lines, list(range(1, len(lines)))) == events(lines, [])


def test_alert_fires_once_while_firing_and_resolves_once() -> None:
    """Consecutive NaN losses fire one alert; lines without a loss do not resolve it."""
    lines = [
        "loss 1.0",
        "loss nan",
        "loss nan",
        "no metrics here",
        "loss -inf",
        "loss 0.9",
        "loss 0.8",
    ]
    assert events(lines, [3]) == [(2, "nan-loss", "firing"), (6, "nan-loss", "resolved")]


def test_streak_needs_exactly_count_consecutive_reports() -> None:
    """Four single-bucket reports then a mixed one: no alert; five: one alert at the fifth."""
    single, mixed = "q_hsb=[0,0,0,0,0,31] at q_hs=31", "q_hsb=[0,1,0,0,0,30] at q_hs=31"
    assert events([single] * 4 + [mixed] + [single] * 4, []) == []
    got = events([single] * 7 + ["chatter"] + [mixed], [2, 6])
    assert got == [(5, "bucket-starvation", "firing"), (9, "bucket-starvation", "resolved")]


def test_restart_in_same_file_resolves_and_rearms() -> None:
    """A second `run start:` ends what the old run left firing; the new run can fire again."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    lines = [
        "run start: run_id=a pid=1",
        oom,
        oom,
        "run start: run_id=b pid=2",
        "step 1 | loss 2",
        oom,
    ]
    got = Engine(RULES).run_all(frames(lines, [4]))
    assert [(e.line, e.rule, e.status) for e in got] == [
        (2, "cuda-oom", "firing"),
        (4, "cuda-oom", "resolved"),
        (6, "cuda-oom", "firing"),
    ]
    assert "restarted at line 4" in got[1].summary
    assert got[2].step == 1


def test_step_carries_forward_across_batches() -> None:
    """An alert on a line without a step names the last step seen, even from an earlier batch."""
    lines = ["step 41 | loss 2.0", "chatter", "RuntimeError: CUDA out of memory."]
    (event,) = Engine(RULES).run_all(frames(lines, [1, 2]))
    assert event.step == 41 and event.line == 3


class Exploding:
    """A rule that raises on every batch."""

    def initial_state(self) -> dict[str, Any]:
        return {}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        raise ZeroDivisionError("boom")


def exploding_spec() -> RuleSpec:
    """The rule pack entry of an `Exploding` rule."""
    return RuleSpec(
        id="exploding",
        type="match",
        severity=RULES[0].severity,
        summary="s",
        resolved_summary="r",
        fix="",
        params={},
        rule=Exploding(),
        origin="test",
    )


def test_a_failing_rule_is_reported_once_and_others_keep_working() -> None:
    """An exception inside one rule goes to on_error once; the other rules still alert."""
    bad = exploding_spec()
    errors: list[tuple[str, str, str]] = []
    engine = Engine(
        [bad, *RULES], on_error=lambda rule, source, exc: errors.append((rule, source, str(exc)))
    )
    got: list[AlertEvent] = engine.run_all(frames(["loss 1", "loss nan", "loss 2"], [1, 2]))
    assert errors == [("exploding", "s.log", "boom")]
    assert [(e.line, e.rule) for e in got] == [(2, "nan-loss"), (3, "nan-loss")]


def test_sources_are_independent() -> None:
    """Two files interleaved in batches keep separate rule state."""
    engine = Engine(RULES)
    a = frames(["loss nan"], [], source="a.log") + frames(["loss 1.0"], [], source="b.log")
    b = frames(["loss 2.0"], [], source="a.log")
    got = [(e.source, e.status) for e in engine.run_all(a + b)]
    assert got == [("a.log", "firing"), ("a.log", "resolved")]
    assert [e.source for e in engine.active_alerts()] == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "2026-11-28 14:02:04,551 WARNING [telemetry] NVML unavailable (No module named 'pynvml')",
            "NVML unavailable (No module named 'pynvml')",
        ),
        (
            "Failed to initialize NVML: Driver/library version mismatch",
            "Failed to initialize NVML: Driver/library version mismatch",
        ),
        (
            "[2024-02-11 08:00:21,330] [INFO] [loss_scaler.py:190] [deepspeed] OVERFLOW! Rank 0",
            "OVERFLOW! Rank 0",
        ),
    ],
)
def test_summary_message_drops_the_log_prefix(text: str, message: str) -> None:
    """{message} in a summary is the line without its timestamp, level and logger tag."""
    assert log_message(text) == message


def test_ranks_reporting_in_turn_do_not_flap() -> None:
    """rank0 NaN, rank1 finite, interleaved: one alert, resolved when no rank is NaN any more."""
    lines = [
        "[rank0]: step 10 loss=nan",
        "[rank1]: step 10 loss=1.5",
        "[rank0]: step 11 loss=nan",
        "[rank1]: step 11 loss=1.4",
        "[rank0]: step 12 loss=1.3",
        "[rank1]: step 12 loss=1.2",
    ]
    for cuts in ([], [1], [2, 3], list(range(1, 6))):
        assert events(lines, cuts) == [(1, "nan-loss", "firing"), (5, "nan-loss", "resolved")]


def test_two_ranks_non_finite_resolve_only_when_both_recover() -> None:
    """The alert stays firing while any rank is still non-finite."""
    lines = ["[rank0]: loss=nan", "[rank1]: loss=inf", "[rank0]: loss=1.0", "[rank1]: loss=2.0"]
    assert events(lines, [2]) == [(1, "nan-loss", "firing"), (4, "nan-loss", "resolved")]
