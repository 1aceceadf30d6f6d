"""A path that stays unreadable: said when it starts, summarised at most once a minute while it
lasts (`still failing, 61 times`), said when it ends; a new kind of failure is said in full."""

from __future__ import annotations

import errno
from pathlib import Path

from logwatch.sources.matching import Matcher
from logwatch.testing import FakeClock


def test_a_path_that_stays_blocked_is_summarised_once_a_minute(tmp_path: Path) -> None:
    """Retried every second for 2m10s: the first failure with its fix, one summary a minute,
    then `readable now`; a failure after that is said in full again."""
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    clock = FakeClock()
    said: list[str] = []
    matcher = Matcher(
        [str(log)],
        poll_interval_s=1.0,
        status=said.append,
        first=lambda *_: True,
        clock=clock.monotonic,
    )
    denied = PermissionError(errno.EACCES, "Permission denied")
    for _ in range(131):
        matcher.cannot(str(log), denied)
        clock.advance(1)
    matcher.can_again(str(log))
    matcher.cannot(str(log), denied)
    (first, *rest) = said
    assert first.startswith(f"{log}: cannot open (Permission denied)")
    assert first.endswith("; retrying every 1s")
    assert rest == [
        f"{log}: still failing, 61 times in 1m00s; cannot open (Permission denied)",
        f"{log}: still failing, 121 times in 2m00s; cannot open (Permission denied)",
        f"{log}: readable now",
        first,
    ]
