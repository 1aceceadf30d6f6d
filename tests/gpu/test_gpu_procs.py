"""The run's process tree from /proc: a launcher's workers count as the run's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from logwatch.gpu.procs import parent_map, with_descendants

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="no /proc here")


def test_children_and_grandchildren_of_the_logged_pid_are_found() -> None:
    """A real launcher -> worker -> grandchild tree is found from the launcher's pid."""
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(30)\n"
    )
    launcher = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert launcher.stdout is not None
    with launcher, launcher.stdout:
        worker = int(launcher.stdout.readline())
        try:
            found = with_descendants({launcher.pid})
            assert {launcher.pid, worker} <= found
            assert os.getpid() not in found  # the parent of the logged pid is not the run's
        finally:
            os.kill(worker, signal.SIGKILL)
            launcher.kill()


def test_command_names_with_spaces_and_parentheses(tmp_path: Path) -> None:
    """A process named `a) (b` does not break the /proc/<pid>/stat parse."""
    for pid, parent, comm in [(10, 1, "init"), (20, 10, "a) (b"), (30, 20, "python")]:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({comm}) S {parent} 1 1 0 -1\n")
    (tmp_path / "self").mkdir()
    assert parent_map(tmp_path) == {10: 1, 20: 10, 30: 20}
    assert with_descendants({20}, tmp_path) == {20, 30}
    assert with_descendants(set(), tmp_path) == set()
