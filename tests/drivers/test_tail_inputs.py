"""`logwatch tail` on what it cannot follow (standard input, FIFOs, devices, folders) and on
UTF-16 files: always said, never a silent wait or skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from logwatch.testing import running
from tests.support.paths import ROOT
from tests.support.tailkit import Tail, numbered, wait_until

UTF16_NOTE = (
    ": UTF-16 text; logwatch reads UTF-8 — make the writer log UTF-8 "
    "(e.g. PYTHONIOENCODING=utf-8) or convert with iconv"
)


def tail_cli(tmp_path: Path, *args: str) -> tuple[int, str]:
    """`logwatch tail ARGS` as a process (one that waits forever fails the test, not hangs it)."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "xdg")}
    done = subprocess.run(
        [sys.executable, "-m", "logwatch.cli", "tail", *args, "--gpu", "off"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
    )
    return done.returncode, done.stderr


def test_standard_input_that_is_empty_ends_tail_with_exit_0(tmp_path: Path) -> None:
    """`logwatch tail -` follows standard input (see test_tail_stdin); empty, it exits 0."""
    code, err = tail_cli(tmp_path, "-")
    assert code == 0, err
    assert "logwatch: <stdin>: input ended (0 lines); closed\n" in err


def test_a_fifo_argument_is_refused(tmp_path: Path) -> None:
    """`logwatch tail FIFO` exits 2 saying it is a FIFO, not a regular log file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert tail_cli(tmp_path, str(fifo)) == (
        2,
        f"Error: {fifo}: not a regular file (a FIFO); logwatch tail follows regular log files\n",
    )


def test_a_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    """A path that resolves to /dev/zero is refused as a character device."""
    link = tmp_path / "zero.log"
    link.symlink_to("/dev/zero")
    code, err = tail_cli(tmp_path, str(link))
    assert code == 2 and err.startswith(f"Error: {link}: not a regular file (a character device)")


def test_glob_matches_that_are_not_files_are_reported_once(tmp_path: Path) -> None:
    """A glob matching a FIFO, a folder and a /dev/zero link skips each, said once each."""
    os.mkfifo(tmp_path / "a.log")
    (tmp_path / "b.log").mkdir()
    (tmp_path / "c.log").symlink_to("/dev/zero")
    (tmp_path / "d.log").write_bytes(numbered(1, 3))
    tail = Tail(tmp_path, state=False)
    with running(tail.driver) as driver:
        driver.sync()
        driver.sync()
    assert tail.seqs() == [1, 2, 3]
    for name, kind in [("a", "a FIFO"), ("b", "a directory"), ("c", "a character device")]:
        assert tail.said(f"skipping {tmp_path / name}.log: not a regular file ({kind})") == 1


@pytest.mark.parametrize("existing", [True, False])
def test_a_utf16_file_is_said_once_and_still_followed(tmp_path: Path, existing: bool) -> None:
    """A file starting with a UTF-16 BOM (there at start or created later) is reported once on
    stderr with the fix, and still followed."""
    path = tmp_path / "ps.log"
    if existing:
        path.write_bytes("step 1 loss=nan\n".encode("utf-16"))
    tail = Tail(tmp_path, state=False)
    with running(tail.driver) as driver:
        driver.sync()
        if not existing:
            path.write_bytes("step 1 loss=nan\n".encode("utf-16"))
            wait_until(lambda: tail.said(UTF16_NOTE) == 1)
        with open(path, "ab") as out:
            out.write("step 2\n".encode("utf-16-le"))
        wait_until(lambda: len(tail.rec.seen) == 2)
        driver.sync()
    assert tail.status.count(f"{path}{UTF16_NOTE}") == 1
