"""Costly rounds and checkpoints are spaced out (issue 30's live cost): holds grow past 1 s only
when a round takes more than `ROUND_SHARE` of that, up to --max-batch-delay; checkpoints come
once writing them takes at most `CHECKPOINT_SHARE` of the time, and a crash between two of them
repeats no alert."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from logwatch.drivers.tail import CHECKPOINT_MAX_S, CHECKPOINT_SHARE
from logwatch.drivers.tail_pace import BASE_HOLD_S, FIRST_HOLD_S, ROUND_SHARE, Pacer
from logwatch.testing import running
from tests.support.tailkit import BUILTIN, Tail


def _holds(pacer: Pacer, round_s: float, rounds: int) -> list[float]:
    """The holds after `rounds` rounds of `round_s` CPU seconds each (twice that in wall time:
    a loaded machine; the CPU is what counts), lines read in every one, each round starting
    when the hold before it ends (a sustained load)."""
    now, holds = 0.0, []
    for _ in range(rounds):
        hold = pacer.after_round(now, now + 2 * round_s, 10, more=False, cost_s=round_s)
        holds.append(hold)
        now += 2 * round_s + max(hold, 0.04)
    return holds


def test_cheap_rounds_are_held_at_most_a_second_whatever_the_cap() -> None:
    """Rounds of 10 ms (under 2% of a second): the holds double up to 1 s and stay there,
    even with --max-batch-delay 5s."""
    holds = _holds(Pacer(5.0), 0.01, 12)
    assert max(holds) == BASE_HOLD_S == 1.0
    assert holds[-3:] == [1.0, 1.0, 1.0]
    assert FIRST_HOLD_S in holds


def test_costly_rounds_are_held_until_they_take_their_share_up_to_the_cap() -> None:
    """Rounds of 60 ms: holds grow to 60 ms / 2% = 3 s; rounds of 300 ms: to
    --max-batch-delay (5 s), not 15 s; with --max-batch-delay 1s, to 1 s as before."""
    assert ROUND_SHARE == 0.02
    assert _holds(Pacer(5.0), 0.06, 12)[-2:] == pytest.approx([3.0, 3.0])
    assert _holds(Pacer(5.0), 0.3, 12)[-2:] == [5.0, 5.0]
    assert _holds(Pacer(1.0), 0.3, 12)[-2:] == [1.0, 1.0]
    assert _holds(Pacer(0.5), 0.3, 12)[-2:] == [0.5, 0.5]


def test_holds_shrink_again_when_rounds_get_cheap() -> None:
    """The cap follows the last round: 300 ms rounds then 10 ms ones, the hold comes back to
    1 s within one round (it never doubles past the cap of the round just run)."""
    pacer = Pacer(5.0)
    _holds(pacer, 0.3, 12)
    assert pacer.hold_s == 5.0
    assert pacer.after_round(100.0, 100.5, 10, more=False, cost_s=0.01) == 1.0


def test_a_hold_after_a_costly_round_still_ends_the_spell_when_nothing_came() -> None:
    """A spell held at 3 s ends as any other: a hold with nothing new, then the next line is
    read at once."""
    pacer = Pacer(5.0)
    holds = _holds(pacer, 0.06, 12)
    assert holds[-1] == pytest.approx(3.0)
    assert pacer.after_round(200.0, 200.001, 0, more=False) == 0.0
    assert pacer.hold_s == 0.0
    assert pacer.after_round(201.0, 201.06, 1, more=False, cost_s=0.06) == 0.0  # quiet before
    assert pacer.after_round(201.1, 201.16, 1, more=False, cost_s=0.06) == 0.0  # its grace
    assert pacer.after_round(201.2, 201.26, 1, more=False, cost_s=0.06) == FIRST_HOLD_S


def test_without_a_cost_a_round_s_duration_counts() -> None:
    """A caller that does not say what a round cost (a test driving the pacer by hand): its
    duration on the clock counts."""
    assert _held_after(Pacer(5.0), 0.2) == 5.0
    assert _held_after(Pacer(5.0), 0.001) == 1.0


def test_the_driver_counts_the_round_and_the_hold_before_it(tmp_path: Path) -> None:
    """What the pacer is told a round cost: the process's CPU time of the round and of the hold
    before it (its checkpoint, the file events), each hold's counted once."""
    tail = Tail(tmp_path, watcher_factory=None)
    driver = tail.driver
    _holds(driver.pacer, 0.01, 12)  # a busy spell, held at 1 s
    driver.round_started, driver.round_lines = 100.0, 10  # held: no quiet spell before it
    driver.round_cpu_s, driver._hold_cpu_s = 0.03, 0.02
    driver._pace(False)
    assert driver.pacer.cap_s == pytest.approx(0.05 / ROUND_SHARE) == 2.5
    assert driver._hold_cpu_s == 0.0
    driver.round_cpu_s = 0.01
    driver._pace(False)
    assert driver.pacer.cap_s == 1.0  # the hold's CPU counted once


def _held_after(pacer: Pacer, round_s: float) -> float:
    now = 0.0
    for _ in range(12):
        now += round_s + max(pacer.after_round(now, now + round_s, 10, more=False), 0.04)
    return pacer.hold_s


NAN_AT = "seq={n} loss={loss}\n"


def _lines(first: int, last: int, nan: int = -1) -> bytes:
    return "".join(
        NAN_AT.format(n=i, loss="nan" if i == nan else "2.5") for i in range(first, last + 1)
    ).encode()


def test_a_costly_checkpoint_spaces_the_next_and_a_crash_between_repeats_no_alert(
    tmp_path: Path,
) -> None:
    """Each checkpoint takes 30 ms on the driver's clock: the next one is due 3 s later, not
    1 s, whatever rounds run meanwhile. Killed before it, the next run reads those lines again
    from the last checkpoint and sends none of their alerts twice; new lines alert."""
    log = tmp_path / "a.log"
    log.write_bytes(b"")
    first = Tail(tmp_path, rules=BUILTIN)
    driver = first.driver
    saves: list[float] = []
    assert driver.state is not None
    save = driver.state.save

    def costly(checkpoint: Any) -> bool:
        saves.append(first.clock.monotonic())
        first.clock.advance(0.03)
        return bool(save(checkpoint))

    driver.state.save = costly  # type: ignore[method-assign]
    with driver:
        assert driver.checkpoint_every_s == pytest.approx(0.03 / CHECKPOINT_SHARE) == 3.0
        log.write_bytes(_lines(1, 10))
        opened = len(saves)
        for _ in range(2):
            first.clock.advance(1.0)
            driver.poll_once()
        assert len(saves) == opened  # 2 s after the last one: not due yet
        first.clock.advance(1.0)
        driver.poll_once()
        assert len(saves) == opened + 1  # 3 s: due, covers lines 1-10
        with open(log, "ab") as out:
            out.write(_lines(11, 20, nan=15))
        first.clock.advance(1.0)
        driver.poll_once()
        assert len(saves) == opened + 1
        driver.close(checkpoint=False)  # the crash: lines 11-20 are past the checkpoint
    assert first.alerts() == [(15, "nan-loss", "firing"), (16, "nan-loss", "resolved")]
    with open(log, "ab") as out:
        out.write(_lines(21, 30, nan=25))
    second = Tail(tmp_path, rules=BUILTIN)
    with running(second.driver) as again:
        again.sync()
    assert second.seqs()[0] == 11  # read again from the checkpoint
    assert second.alerts() == [(25, "nan-loss", "firing"), (26, "nan-loss", "resolved")]


def test_checkpoints_are_never_further_apart_than_the_ceiling(tmp_path: Path) -> None:
    """However long a checkpoint takes, the next one is due within `CHECKPOINT_MAX_S`; a cheap
    one keeps the 1 s interval."""
    tail = Tail(tmp_path)
    assert tail.driver._spacing(5.0) == CHECKPOINT_MAX_S == 10.0
    assert tail.driver._spacing(0.002) == 1.0
    assert tail.driver._spacing(0.05) == pytest.approx(5.0)
