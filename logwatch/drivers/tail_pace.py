"""Adaptive rounds: how long `tail` waits before its next round while lines keep arriving.

A round costs about the same for one line as for a few dozen (the parse's and the rules' fixed
cost per round and per file), so a follower that ran a round for every line would spend most of
a busy node's core on those fixed costs. `Pacer` coalesces, from the round's times on the
driver's clock and its CPU time:

- A line that comes after a quiet spell (no line read for `QUIET_S`) is read in the round its
  file event starts: no added latency. So is every line of the first `GRACE_S` of a busy spell
  (the NaN line a trainer writes right after its step line).
- Past that, each round that read lines is followed by a hold that file events do not end:
  `FIRST_HOLD_S`, doubling while each hold ends with lines to read, up to the spell's cap:
  `BASE_HOLD_S` (1 s), or longer where a round's CPU time (with the hold before it) is more
  than `ROUND_SHARE` of that (a round of 200 files' lines, or of 8 busy ranks'): so long that
  the process takes at most about that share of a core, and never past `max_batch_delay`.
- A hold that ends with nothing to read ends the busy spell (the next line is read at once
  again, after `QUIET_S`). A round that left a file with more to read (a backlog) is not held:
  catching up goes at full speed.

Under sustained load each file's lines therefore reach the rules in batches of about the cap's
worth, and a line waits at most that long (plus the round) for its alert: 1 s while rounds are
cheap, at most `max_batch_delay` (5 s by default) however costly they are.
"""

from __future__ import annotations

FIRST_HOLD_S = 0.05
"""The first hold of a busy spell; each later one doubles, up to the cap."""

QUIET_S = 0.1
"""No line read for this long (outside a hold) ends a busy spell."""

GRACE_S = 0.1
"""The rounds of a busy spell's first this-many seconds are not held."""

BASE_HOLD_S = 1.0
"""The longest hold while rounds are cheap (at most `max_batch_delay`)."""

ROUND_SHARE = 0.02
"""Under sustained load, the process's CPU time from one round to the next (the round, polars'
pool, and what ran during the hold before it: the checkpoint, the file events) is held to at
most about this share of the time between them: rounds that cost 40 ms with the hold before
them are followed by holds of up to 2 s (capped by `max_batch_delay`). What `tail` costs a
busy node then stays about this share of a core, however many files' lines a round carries."""


class Pacer:
    """The hold before the next round, from what each round read and when (one per driver).

    `max_batch_delay_s`: the longest hold (0: none, every round runs as soon as an event
    comes). `hold_s`: the current hold, 0 outside a busy spell. `cap_s`: the longest hold
    for a round that took as long as the last one (`cap`)."""

    __slots__ = ("_held", "_last_end", "_spell", "cap_s", "hold_s", "max_batch_delay_s")

    def __init__(self, max_batch_delay_s: float) -> None:
        self.max_batch_delay_s = max_batch_delay_s
        self.hold_s = 0.0
        self.cap_s = min(BASE_HOLD_S, max_batch_delay_s)
        self._held = False  # the round that comes now follows a hold
        self._last_end = float("-inf")  # when the last round that read lines ended
        self._spell = float("-inf")  # when the current busy spell began

    def after_round(
        self, started: float, ended: float, lines: int, more: bool, cost_s: float | None = None
    ) -> float:
        """Seconds to wait before the next round, after one that ran from `started` to `ended`
        (monotonic seconds) and read `lines` lines; `more`: a file has more to read at once;
        `cost_s`: what the round cost (the driver passes the process's CPU time of the round
        and the hold before it; default: the round's duration)."""
        held, self._held = self._held, False
        if lines == 0 or self.max_batch_delay_s <= 0:
            if held:
                self.hold_s = 0.0  # a hold passed without a line: the busy spell is over
            return 0.0
        if not held and started - self._last_end >= QUIET_S:
            self._spell, self.hold_s = started, 0.0  # the first line after a quiet spell
        self._last_end = ended
        if more or started - self._spell < GRACE_S:
            return 0.0
        self.cap_s = self.cap(ended - started if cost_s is None else cost_s)
        self.hold_s = min(self.cap_s, self.hold_s * 2 or FIRST_HOLD_S)
        self._held = True
        return self.hold_s

    def cap(self, round_s: float) -> float:
        """The longest hold after a round that cost `round_s` seconds (of CPU): `BASE_HOLD_S`,
        or long enough that such rounds take at most `ROUND_SHARE` of a core; at most
        `max_batch_delay_s`."""
        return min(self.max_batch_delay_s, max(BASE_HOLD_S, round_s / ROUND_SHARE))


__all__ = ["BASE_HOLD_S", "FIRST_HOLD_S", "GRACE_S", "QUIET_S", "ROUND_SHARE", "Pacer"]
