"""`logwatch top` in a real terminal (tmux), on live files this test writes."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.top.tmuxkit import START_S, TmuxTop, append, needs_tmux, run_start, step_line

pytestmark = needs_tmux


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Two live runs, alpha and beta, in tmp_path/logs."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "alpha.log").write_text(run_start("alpha") + step_line(100, "2.5000"))
    (logs / "beta.log").write_text(run_start("beta") + step_line(200, "1.2500"))
    return logs


@pytest.fixture
def started(tmp_path: Path, runs: Path) -> Iterator[TmuxTop]:
    """logwatch top on the two runs (GPUs off), its first frame drawn."""
    top = TmuxTop(
        tmp_path, [str(runs / "*.log"), "--state-dir", str(tmp_path / "state"), "--gpu", "off"]
    )
    try:
        top.wait_for(lambda s: "alpha" in s and "beta" in s, START_S)
        yield top
    finally:
        top.close()


def row(screen: str, name: str) -> str:
    """The screen line of a source's row."""
    lines = [line for line in screen.splitlines() if line.startswith(name)]
    assert lines, f"no row for {name} in:\n{screen}"
    return lines[0]


def test_each_run_shows_its_step_and_loss_and_follows_new_lines(
    started: TmuxTop, runs: Path
) -> None:
    """Each row has its run id, step and loss; a new step line shows up in its row."""
    screen = started.screen()
    assert re.search(r"\balpha\b.*\b100\b.*2\.5\b", row(screen, "alpha.log")), screen
    assert re.search(r"\bbeta\b.*\b200\b.*1\.25\b", row(screen, "beta.log")), screen
    append(runs / "alpha.log", step_line(101, "2.4100"))
    started.wait_for(lambda s: re.search(r"\b101\b.*2\.41\b", row(s, "alpha.log")) is not None)


def test_a_nan_loss_shows_as_a_firing_alert_soon_after_the_write(
    started: TmuxTop, runs: Path
) -> None:
    """A NaN written to beta: its row's loss says nan and nan-loss shows as firing on it."""
    append(runs / "beta.log", step_line(201, "nan"))
    screen = started.wait_for(lambda s: "nan-loss" in s, 10.0)
    assert "nan" in row(screen, "beta.log")
    assert re.search(r"FIRING nan-loss .*beta\.log:3", screen), screen
    assert "1 firing" in screen


def test_q_quits_with_exit_0_a_checkpoint_and_the_terminal_restored(
    tmp_path: Path, runs: Path
) -> None:
    """q: exit 0, checkpoint.json naming both files, the tty back in canonical mode with echo."""
    state = tmp_path / "state"
    top = TmuxTop(
        tmp_path,
        [str(runs / "*.log"), "--state-dir", str(state), "--gpu", "off"],
        after="; stty -a; sleep 30",
    )
    try:
        top.wait_for(lambda s: "alpha" in s and "beta" in s, START_S)
        top.keys("q")
        assert top.wait_exit() == 0, top.err_file.read_text()
        shown = top.wait_for(lambda s: "icanon" in s)
        assert "-icanon" not in shown and "-echo " not in shown, shown
        checkpoint = json.loads((state / "checkpoint.json").read_text())
        assert sorted(Path(f["path"]).name for f in checkpoint["files"]) == [
            "alpha.log",
            "beta.log",
        ]
    finally:
        top.close()


def test_resize_to_80x24_still_shows_every_row(started: TmuxTop) -> None:
    """After a resize to 80x24 the narrow layout (no lr column) shows both rows, no line
    wider than 80."""
    assert re.search(r"gnorm +lr ", started.screen())  # 120 wide: every column
    started.resize(80, 24)
    screen = started.wait_for(lambda s: re.search(r"source .*step .*last .*alerts", s) is not None)
    assert not re.search(r"gnorm +lr ", screen), screen
    assert "alpha.log" in screen and "beta.log" in screen
    assert max(len(line) for line in screen.splitlines()) <= 80


def test_slash_filters_sources(started: TmuxTop) -> None:
    """/ then `bet` Enter: only beta's row is left; / Escape brings alpha back."""
    started.keys("/", "bet", "Enter")
    started.wait_for(lambda s: "beta.log" in s and "alpha.log" not in s)
    started.keys("/", "Escape")
    started.wait_for(lambda s: "beta.log" in s and "alpha.log" in s)


def test_question_mark_shows_the_keys(started: TmuxTop) -> None:
    """? shows the help; any key closes it."""
    started.keys("?")
    started.wait_for(lambda s: "quit (checkpoint written" in s)
    started.keys("x")
    started.wait_for(lambda s: "quit (checkpoint written" not in s and "alpha.log" in s)


def test_a_stalled_run_is_marked_in_red(tmp_path: Path, runs: Path) -> None:
    """With stall_after = 2s, a run that got a line while followed and then none: its row says
    STALL in red (an SGR red escape on that line); alpha, still writing, does not."""
    config = tmp_path / "logwatch.toml"
    config.write_text('[rules.log-stalled]\nstall_after = "2s"\n')
    args = [str(runs / "*.log"), "--state-dir", str(tmp_path / "state"), "--gpu", "off"]
    top = TmuxTop(tmp_path, [*args, "--config", str(config)])
    try:
        top.wait_for(lambda s: "alpha" in s and "beta" in s, START_S)
        append(runs / "beta.log", step_line(201, "1.2400"))
        screen = top.wait_for(lambda s: "STALL" in s and "log-stalled" in s, 30.0, escapes=True)
        (beta,) = [line for line in screen.splitlines() if "beta.log" in line and "STALL" in line]
        assert re.search(r"\x1b\[[0-9;]*31[;m]", beta), repr(beta)
    finally:
        top.close()


def test_sigterm_exits_0_with_a_checkpoint_and_the_terminal_restored(
    tmp_path: Path, runs: Path
) -> None:
    """SIGTERM to the full-screen top ends it as q does: exit 0, checkpoint, tty mode back."""
    state = tmp_path / "state"
    top = TmuxTop(
        tmp_path,
        [str(runs / "*.log"), "--state-dir", str(state), "--gpu", "off"],
        after="; stty -a; sleep 30",
    )
    try:
        top.wait_for(lambda s: "alpha" in s and "beta" in s, START_S)
        shell = int(top.pane_pid())
        (child,) = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
        os.kill(int(child), signal.SIGTERM)
        assert top.wait_exit() == 0, top.err_file.read_text()
        shown = top.wait_for(lambda s: "icanon" in s)
        assert "-icanon" not in shown and "-echo " not in shown, shown
        assert (state / "checkpoint.json").exists()
    finally:
        top.close()


def test_a_restart_from_the_checkpoint_shows_each_runs_step_at_once(
    tmp_path: Path, runs: Path
) -> None:
    """Quit, start again on the same state directory: the files resume past their history, yet
    each row has its run and step (from the checkpointed engine state) before any new line."""
    args = [str(runs / "*.log"), "--state-dir", str(tmp_path / "state"), "--gpu", "off"]
    (tmp_path / "one").mkdir()
    first = TmuxTop(tmp_path / "one", args)
    try:
        first.wait_for(lambda s: "alpha" in s and "beta" in s, START_S)
        first.keys("q")
        assert first.wait_exit() == 0
    finally:
        first.close()
    (tmp_path / "two").mkdir()
    second = TmuxTop(tmp_path / "two", args)
    try:
        screen = second.wait_for(lambda s: "alpha.log" in s and "beta.log" in s, START_S)
        assert re.search(r"\balpha\b +100\b", row(screen, "alpha.log")), screen
        assert re.search(r"\bbeta\b +200\b", row(screen, "beta.log")), screen
        assert "resuming at line 3 (checkpoint)" in (tmp_path / "two" / "top.err").read_text()
    finally:
        second.close()


def test_after_a_tail_stopped_with_a_nan_firing_top_shows_it_at_once(
    tmp_path: Path, runs: Path
) -> None:
    """`tail` (default state) sees beta's NaN and is stopped with SIGINT; `top` on the same
    files (the same watch, so the same state) shows nan-loss firing on beta before any new
    line, and says `still firing` when it starts."""
    from tests.support.process import Collected
    from tests.support.tailkit import wait_until

    env = {"XDG_STATE_HOME": str(tmp_path / "xdg")}
    pattern = str(runs / "*.log")
    tail = Collected(["tail", pattern, "--gpu", "off"], env=env)
    wait_until(lambda: sum("following it" in line for line in tail.err) == 2, START_S)
    append(runs / "beta.log", step_line(201, "nan"))
    wait_until(lambda: any("nan-loss" in line for line in tail.out))
    assert tail.stop(signal.SIGINT) == 0
    top = TmuxTop(tmp_path, [pattern, "--gpu", "off"], env=env)
    try:
        screen = top.wait_for(lambda s: "beta.log" in s and "1 firing" in s, START_S)
        assert "nan-loss" in row(screen, "beta.log") and "nan-loss" not in row(screen, "alpha.log")
        err = (tmp_path / "top.err").read_text()
        assert f"{runs / 'beta.log'}: still firing: nan-loss since line 3 (" in err
    finally:
        top.close()
