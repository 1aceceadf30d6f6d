"""Progress on stderr: `replay`'s bar shows bytes, throughput and time left; `logwatch test`
shows how many tests ran; both only on a terminal (a pipe gets nothing)."""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from logwatch.cli import cli
from logwatch.cli.progress import ReplayProgress, RuleTestProgress
from tests.support.paths import ROOT

MB = 1 << 20


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=140, color_system=None), out


def test_the_replay_bar_shows_bytes_throughput_and_time_left() -> None:
    """A 100 MB file half read: its name, 50%, `52.4/104.9 MB`, a rate in MB/s and the time
    left (`0:00:..`); a file under the threshold draws nothing."""
    console, out = terminal()
    progress = ReplayProgress(min_bytes=64 * MB, console=console)
    progress("small.log", 1 * MB, 2 * MB)
    assert progress.progress is None
    progress("big.log", 10 * MB, 100 * MB)
    time.sleep(0.2)
    progress("big.log", 50 * MB, 100 * MB)
    progress.progress.refresh()
    shown = out.getvalue()
    progress.close()
    assert "big.log" in shown and "50%" in shown and "52.4/104.9 MB" in shown
    assert re.search(r"\d+(\.\d+)? MB/s", shown), shown
    assert re.search(r"left 0:00:\d\d", shown), shown


def test_nothing_is_drawn_when_stderr_is_not_a_terminal() -> None:
    """A console that is not a terminal (a pipe, a CI log): no bar, no bytes written."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    replay, tests = ReplayProgress(min_bytes=1, console=console), RuleTestProgress(console=console)
    replay("big.log", 5, 10)
    tests(0, 3, "first")
    replay.close()
    tests.close()
    assert out.getvalue() == ""


def test_logwatch_test_is_silent_on_stderr_in_a_pipe() -> None:
    """`logwatch test` under CliRunner (stderr not a terminal): only the report on stdout (a
    pack of two tests: the ten of training.test.toml, run by tests/test_samples.py's
    `logwatch test rules/` too, cost 2-3 s of CPU here for the same check)."""
    result = CliRunner().invoke(cli, ["test", "rules/errors.test.toml"])
    assert result.exit_code == 0
    assert result.stderr == ""
    assert result.stdout.splitlines()[-1] == "2 tests, 0 failed"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_logwatch_test_shows_its_progress_in_a_terminal(tmp_path: Path) -> None:
    """In a real terminal (tmux), `logwatch test` shows `tests ━━ 3/10 left 0:00:02 <name>`
    while it runs; the bar is gone once it has finished, and stdout has the report."""
    socket = f"lwprog-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    out, rc = tmp_path / "out", tmp_path / "rc"
    command = f"{shlex.quote(sys.executable)} -m logwatch test rules/training.test.toml"
    script = f"cd {shlex.quote(str(ROOT))} && {command} > {out}; echo $? > {rc}; sleep 30"

    def tmux(*args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", socket, "-f", "/dev/null", *args], capture_output=True, text=True
        ).stdout

    tmux("new-session", "-d", "-s", "p", "-x", "120", "-y", "10", "sh", "-c", script)
    try:
        seen = ""
        deadline = time.monotonic() + 60
        while not (rc.exists() and rc.read_text().strip()) and time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", "p")
            if re.search(r"tests .* \d+/10 left", screen):
                seen = screen
            time.sleep(0.05)
        final = tmux("capture-pane", "-p", "-t", "p")
    finally:
        tmux("kill-server")
    assert rc.read_text().strip() == "0"
    assert seen, "no progress line was ever on the screen"
    assert not re.search(r"\d+/10 left", final)  # transient: gone at the end
    assert out.read_text().splitlines()[-1] == "10 tests, 0 failed"


_SHOWN = (
    "import sys; from logwatch.cli.progress import ReplayProgress; "
    "bar = ReplayProgress(min_bytes=0); bar('a.log', 1, 2); bar.close(); "
    "print('rich.console' in sys.modules)"
)


@pytest.mark.parametrize(
    ("env", "imported"),
    [({}, "False"), ({"FORCE_COLOR": "1"}, "True"), ({"TTY_COMPATIBLE": "1"}, "True")],
)
def test_a_pipe_gets_no_bar_without_importing_rich(env: dict[str, str], imported: str) -> None:
    """On a pipe the bar is not drawn and rich is not imported (a replay's start-up); where the
    environment makes a pipe a terminal for rich (`FORCE_COLOR`, `TTY_COMPATIBLE=1`), rich
    decides, as before."""
    base = {k: v for k, v in os.environ.items() if k not in {"FORCE_COLOR", "TTY_COMPATIBLE"}}
    done = subprocess.run(
        [sys.executable, "-c", _SHOWN],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == imported
    assert (done.stderr != "") == (imported == "True")
