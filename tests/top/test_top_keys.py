"""`logwatch top`'s keys that act on alerts, in a real terminal (tmux): `s` asks before it
silences, `u` lifts a silence, Enter shows the selected source's alerts in full."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.top.tmuxkit import START_S, TmuxTop, append, needs_tmux, run_start, step_line

pytestmark = needs_tmux
QUESTION = "silence nan-loss on rank1.log for 1h? y/n"


@pytest.fixture
def firing(tmp_path: Path) -> Iterator[tuple[TmuxTop, Path]]:
    """top on rank0 and rank1; rank1 (selected with j) has nan-loss firing."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.log").write_text(run_start("r0") + step_line(100, "2.5000"))
    (logs / "rank1.log").write_text(run_start("r1") + step_line(100, "2.5000"))
    args = [str(logs / "*.log"), "--state-dir", str(tmp_path / "state"), "--gpu", "off"]
    top = TmuxTop(tmp_path, args, width=160)
    try:
        top.wait_for(lambda s: "rank0" in s and "rank1" in s, START_S)
        append(logs / "rank1.log", step_line(101, "nan"))
        top.wait_for(lambda s: "FIRING nan-loss" in s, 20.0)
        top.keys("j")
        yield top, tmp_path / "state" / "silences.json"
    finally:
        top.close()


def _silences(path: Path) -> list[dict[str, str]]:
    return json.loads(path.read_text()) if path.exists() else []


def test_s_asks_and_anything_but_y_silences_nothing(firing: tuple[TmuxTop, Path]) -> None:
    """s shows the question naming the rule and the source; n answers it: nothing is stored,
    the row is not marked, the view says so."""
    top, silences = firing
    top.keys("s")
    top.wait_for(lambda s: QUESTION in s)
    top.keys("n")
    screen = top.wait_for(lambda s: "not silenced" in s and QUESTION not in s)
    assert "(silenced)" not in screen
    assert _silences(silences) == []


def test_s_then_y_silences_the_alert_for_an_hour(firing: tuple[TmuxTop, Path]) -> None:
    """s, y: a 1 h silence of exactly that rule on exactly that file; the row says (silenced)."""
    top, silences = firing
    top.keys("s")
    top.wait_for(lambda s: QUESTION in s)
    top.keys("y")
    top.wait_for(lambda s: "(silenced)" in s and "silenced nan-loss on rank1.log for 1h" in s)
    (silence,) = _silences(silences)
    assert silence["rule"] == "nan-loss" and silence["source"].endswith("/logs/rank1.log")
    assert silence["comment"] == "from logwatch top"
    length = datetime.fromisoformat(silence["ends"]) - datetime.fromisoformat(silence["starts"])
    assert length.total_seconds() == 3600


def test_u_lifts_the_silence(firing: tuple[TmuxTop, Path]) -> None:
    """After s y, u ends the silence now (its end in the past) and the row is loud again."""
    top, silences = firing
    top.keys("s")
    top.wait_for(lambda s: QUESTION in s)
    top.keys("y")
    top.wait_for(lambda s: "(silenced)" in s)
    top.keys("u")
    screen = top.wait_for(lambda s: "silence lifted on rank1.log: nan-loss" in s)
    assert "(silenced)" not in screen
    (silence,) = _silences(silences)
    assert datetime.fromisoformat(silence["ends"]) <= datetime.now()
    top.keys("u")
    top.wait_for(lambda s: "no silence mutes rank1.log" in s)


def test_enter_shows_the_alerts_summary_fix_and_log_line(firing: tuple[TmuxTop, Path]) -> None:
    """Enter on rank1: nan-loss with its summary, its fix and the line that fired it; any key
    goes back to the table."""
    top, _ = firing
    top.keys("Enter")
    screen = top.wait_for(lambda s: "firing on rank1.log" in s)
    assert "nan-loss · critical" in screen and "(line 3)" in screen
    assert "summary: loss is nan at step 101" in screen
    assert "fix: Stop or roll back" in screen
    assert "line 3: 2026-11-28 14:02:07,199 INFO [train] step 101/200000 | loss nan" in screen
    top.keys("x")
    top.wait_for(lambda s: "firing on rank1.log" not in s and "rank0.log" in s)


def test_enter_on_a_quiet_source_says_so(firing: tuple[TmuxTop, Path]) -> None:
    """Enter on rank0 (nothing firing): one line saying so, the table stays."""
    top, _ = firing
    top.keys("k", "Enter")
    top.wait_for(lambda s: "nothing firing on rank0.log" in s)
