"""Adaptive rounds (issue 30's live cost): while lines keep arriving, `tail` holds between rounds
so that they reach the rules in batches; the first line after a quiet spell, and a step line's
NaN right after it, are still read in the round their event starts; the alerts are replay's
whatever the batching."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from logwatch.drivers.tail_options import TailOptions
from logwatch.drivers.tail_pace import FIRST_HOLD_S, Pacer
from logwatch.testing import FakeClock, running
from tests.support.placement import LATE_HOST, comparable
from tests.support.samples import sample_logs
from tests.support.tailkit import BUILTIN, Tail, replayed_as

STEP = (
    "2026-11-28 14:02:{s:02d},199 INFO [train] step {n}/200000 | loss 2.1182 | acc 0.242 | "
    "lr 2.40e-05 | grad_norm 1.23 | tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]\n"
)
NAN = STEP.replace("loss 2.1182", "loss nan")


def _append(log: Path, text: str) -> None:
    with open(log, "a") as out:
        out.write(text)


def _nan_alerts(tail: Tail) -> list[int]:
    return [e.line for e in tail.sink.events if e.rule == "nan-loss" and e.status == "firing"]


def test_sustained_appends_are_held_longer_each_round_up_to_the_cap_then_quiet_resets(
    tmp_path: Path,
) -> None:
    """Lines every 60 ms (on the driver's clock): the first rounds run at once, then each round
    is followed by a hold that doubles up to --max-batch-delay; a hold that ends with nothing
    to read ends it, and the next line (a NaN) is read and alerted in the round it starts."""
    log = tmp_path / "train.log"
    log.write_text("")
    tail = Tail(tmp_path, rules=BUILTIN, watcher_factory=None, max_batch_delay_s=0.5)
    holds: list[float] = []
    n = 0

    def round_with_a_line(after_s: float) -> None:
        nonlocal n
        tail.clock.advance(after_s)
        n += 1
        _append(log, STEP.format(s=n % 60, n=n))
        tail.driver.poll_once()
        holds.append(tail.driver.next_hold_s)

    with tail.driver as driver:
        driver.poll_once()
        for _ in range(3):
            round_with_a_line(0.06)
        while len(holds) < 9:
            round_with_a_line(holds[-1])  # the next round comes when the hold ends
        assert holds == [0.0, 0.0, FIRST_HOLD_S, 0.1, 0.2, 0.4, 0.5, 0.5, 0.5]
        assert len(tail.rec.texts()) == n  # every line evaluated, none lost to the holds
        tail.clock.advance(0.5)
        driver.poll_once()  # the hold ended with nothing new: the busy spell is over
        assert driver.pacer.hold_s == 0.0
        tail.clock.advance(0.3)
        _append(log, NAN.format(s=59, n=10_000))
        driver.poll_once()
        assert _nan_alerts(tail) == [n + 1]  # alerted in the round the line started
        assert driver.next_hold_s == 0.0


def test_a_step_line_and_its_nan_right_after_are_each_read_at_once(tmp_path: Path) -> None:
    """After a quiet spell, a step line then its NaN 20 ms later (a trainer's rhythm, as the
    sparse benchmark writes it): neither waits for a hold, the NaN alerts in its own round."""
    log = tmp_path / "train.log"
    log.write_text("")
    tail = Tail(tmp_path, rules=BUILTIN, watcher_factory=None)
    with tail.driver as driver:
        driver.poll_once()
        for k in range(5):
            tail.clock.advance(0.3)
            _append(log, STEP.format(s=k, n=k))
            driver.poll_once()
            assert driver.next_hold_s == 0.0
            tail.clock.advance(0.02)
            _append(log, NAN.format(s=k, n=k))
            driver.poll_once()
            assert driver.next_hold_s == 0.0
            assert len(_nan_alerts(tail)) == k + 1  # alerted in its own round
        assert _nan_alerts(tail) == [2, 4, 6, 8, 10]


def test_a_backlog_is_read_on_without_holds() -> None:
    """A round that left a file with more to read is followed by the next one at once, even in
    a busy spell; the spell's hold picks up where it was once the backlog is read."""
    pacer = Pacer(1.0)
    assert pacer.after_round(0.0, 0.01, 5, more=False) == 0.0
    assert pacer.after_round(0.05, 0.06, 5, more=False) == 0.0
    assert pacer.after_round(0.11, 0.12, 5, more=False) == FIRST_HOLD_S
    assert pacer.after_round(0.17, 0.2, 50_000, more=True) == 0.0
    assert pacer.after_round(0.2, 0.23, 50_000, more=True) == 0.0
    assert pacer.after_round(0.23, 0.24, 7, more=False) == 2 * FIRST_HOLD_S


def test_no_batch_delay_never_holds() -> None:
    """--max-batch-delay 0s: every round runs as soon as an event comes."""
    pacer = Pacer(0.0)
    assert [pacer.after_round(t * 0.01, t * 0.01, 3, more=False) for t in range(50)] == [0.0] * 50


def test_a_negative_batch_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="max batch delay"):
        TailOptions(max_batch_delay_s=-1.0)


class _RealMonotonic(FakeClock):
    """Wall-clock time under the test's control, monotonic time real: the driver's holds really
    happen while the rules' clock stands still."""

    def monotonic(self) -> float:
        return time.monotonic()


def test_held_rounds_alert_as_replay_on_every_sample(tmp_path: Path) -> None:
    """Every sample written in small chunks to its own file, without waiting for the follower:
    rounds are held (so each file's lines come in batches of any size) and each file still gets
    exactly the events replay gives it, in order."""
    rng = random.Random(31)
    logs: dict[Path, list[bytes]] = {}
    samples: dict[Path, Path] = {}
    for n, sample in enumerate(sample_logs()):
        data, at, chunks = sample.read_bytes(), 0, []
        while at < len(data):
            size = rng.randint(1, 3000)
            chunks.append(data[at : at + size])
            at += size
        logs[tmp_path / f"{n:02}-{sample.name}"] = chunks
        samples[tmp_path / f"{n:02}-{sample.name}"] = sample
        (tmp_path / f"{n:02}-{sample.name}").write_bytes(b"")
    tail = Tail(
        tmp_path, rules=BUILTIN, clock=_RealMonotonic(), max_batch_delay_s=0.2, poll_interval_s=0.05
    )
    holds: list[float] = []
    pace = tail.driver._pace

    def recorded(more: bool) -> float:
        holds.append(pace(more))
        return holds[-1]

    tail.driver._pace = recorded  # type: ignore[method-assign]
    with running(tail.driver) as driver:
        driver.sync()
        while any(logs.values()):
            for log, chunks in logs.items():
                if chunks:
                    with open(log, "ab") as out:
                        out.write(chunks.pop(0))
            time.sleep(0.005)
        driver.sync()
        for seconds in (1, 180):  # past run-crashed's quiet_after, ticks on the real clock
            tail.clock.advance(seconds)
            time.sleep(0.1)  # a poll interval: the next round ticks
            driver.sync()
    assert max(holds) > 0  # rounds were held
    for log in logs:
        late = log.name.split("-", 1)[1] in LATE_HOST
        got = comparable([e for e in tail.sink.events if e.source == str(log)], late_host=late)
        want = comparable(replayed_as(samples[log], log), late_host=late)
        assert got == want, log.name
    assert len(tail.sink.events) > 20
