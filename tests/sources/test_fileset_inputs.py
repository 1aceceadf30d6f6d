"""FileSet notes on inputs it cannot follow: compressed matches, missing directories, files it
may not open; said once (per change), on real files."""

from __future__ import annotations

import gzip
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sources.test_fileset import fileset
from tests.support.paths import ROOT
from tests.support.process import CAN_BE_DENIED, unprivileged

USER = pwd.getpwuid(os.geteuid()).pw_name
"""Who the unprivileged runs are (`unprivileged()` keeps the uid): the notes name them."""
RUN_AS = "(or run logwatch as a user that may read it)"


def test_a_compressed_match_is_skipped_with_one_note(tmp_path: Path) -> None:
    """`train.log.1.gz` matched by `train.log*` is not followed as text; said once."""
    (tmp_path / "train.log").write_bytes(b"step 1\n")
    (tmp_path / "train.log.1.gz").write_bytes(gzip.compress(b"step 0\n" * 100))
    files, said = fileset(tmp_path, "train.log*")
    assert files.rescan(0.0) == [str(tmp_path / "train.log")]
    assert files.rescan(1.0) == [str(tmp_path / "train.log")]  # not opened yet: still new
    assert said == [
        f"skipping {tmp_path / 'train.log.1.gz'}: gzip-compressed; tail follows plain text "
        "(read it with `logwatch replay`)"
    ]


def test_a_glob_whose_directory_is_missing_says_so_once(tmp_path: Path) -> None:
    """`runs/*/train.log` with no `runs/` says which directory is missing, once."""
    files, said = fileset(tmp_path, "runs/*/train.log")
    files.rescan(0.0)
    files.rescan(1.0)
    assert said == [
        f"{tmp_path / 'runs/*/train.log'}: directory {tmp_path / 'runs'} does not exist (yet); "
        "waiting for it"
    ]


PERMISSION_CHECK = """
import os, sys
from logwatch.sources.fileset import FileSet
log = sys.argv[1]
said = []
files = FileSet([log], status=said.append, watcher_factory=None)
for now in range(3):
    assert files.open(log, float(now)) is None
os.rename(log, log + ".old")  # the path now names another file: said again
open(log, "wb").close()
os.chmod(log, 0)
files.open(log, 4.0)
print("\\n".join(said))
"""


@pytest.mark.skipif(not CAN_BE_DENIED, reason="root opens any file, and setpriv is missing")
def test_permission_denied_is_said_once_per_change(tmp_path: Path) -> None:
    """A file that cannot be opened is said once, not every retry; again once it changed (as
    root: in a process without the capabilities that let root open anything)."""
    log = tmp_path / "a.log"
    log.write_bytes(b"x\n")
    log.chmod(0)
    done = subprocess.run(
        [*unprivileged(), sys.executable, "-c", PERMISSION_CHECK, str(log)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    note = (
        f"{log}: cannot open (Permission denied) as user {USER}; fix: chmod u+r {log} {RUN_AS}; "
        "retrying every 1s"
    )
    assert done.stdout.splitlines() == [note, note]


def run_unprivileged(script: str, *args: str) -> list[str]:
    """Run a Python `script` with `args` where file modes bind (see `unprivileged`); the lines
    it printed."""
    done = subprocess.run(
        [*unprivileged(), sys.executable, "-c", script, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


# Rounds as the tail driver runs them, on a fake monotonic clock: what changed is opened. The
# watcher is the real one, deaf to writes and chmods (they raise no event it passes on), so
# only the poll can notice that a file became readable.
BLOCKED_ROUNDS = """
import os, sys
from logwatch.sources.fileset import FileSet
from logwatch.testing import DeafWatcher
patterns, release = sys.argv[1].split(","), sys.argv[2:]
said = []
files = FileSet(patterns, status=said.append, watcher_factory=DeafWatcher(), poll_interval_s=1.0)
files.start()
def round(now):
    return [p for p in files.changes(now) if files.open(p, now) is not None]
for now in (0.0, 1.0, 2.0, 3.0):
    print(f"opened at {now}: {round(now)}")
for path in release:
    os.chmod(path, 0o700 if os.path.isdir(path) else 0o644)
print(f"opened at 4.0: {round(4.0)}")
files.close()
print("\\n".join(said))
"""


@pytest.mark.skipif(not CAN_BE_DENIED, reason="root opens any file, and setpriv is missing")
def test_a_file_that_becomes_readable_is_opened_within_a_poll_said_once_meanwhile(
    tmp_path: Path,
) -> None:
    """A new match holding a NaN line that may not be read (mode 000) is said once with the
    fix, tried again every poll interval (not said again), and opened at the first poll after
    a chmod, which raises no event here; that it is readable again is said too."""
    log = tmp_path / "b.log"
    log.write_bytes(b"step=2 loss=nan\n")
    log.chmod(0)
    lines = run_unprivileged(BLOCKED_ROUNDS, str(tmp_path / "*.log"), str(log))
    assert lines == [
        "opened at 0.0: []",
        "opened at 1.0: []",
        "opened at 2.0: []",
        "opened at 3.0: []",
        f"opened at 4.0: ['{log}']",
        f"{log}: cannot open (Permission denied) as user {USER}; fix: chmod u+r {log} {RUN_AS}; "
        "retrying every 1s",
        f"{log}: readable now",
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_of_another_user_names_the_bits_that_would_let_us_read_it(tmp_path: Path) -> None:
    """A 0600 file owned by `nobody` and its group: the fix is the `other` read bit."""
    log = tmp_path / "b.log"
    log.write_bytes(b"step=2 loss=nan\n")
    log.chmod(0o600)
    nobody = pwd.getpwnam("nobody")
    os.chown(log, nobody.pw_uid, nobody.pw_gid)
    lines = run_unprivileged(BLOCKED_ROUNDS, str(tmp_path / "*.log"), str(log))
    assert lines[4:] == [
        f"opened at 4.0: ['{log}']",
        f"{log}: cannot open (Permission denied) as user {USER}; fix: chmod o+r {log} {RUN_AS}; "
        "retrying every 1s",
        f"{log}: readable now",
    ]


@pytest.mark.skipif(not CAN_BE_DENIED, reason="root opens any file, and setpriv is missing")
def test_files_behind_folders_that_may_not_be_searched_or_listed_are_said_and_picked_up(
    tmp_path: Path,
) -> None:
    """A named file in a folder it may not search, and a glob in a folder it may not list, are
    each said once with the fix (no longer silently nothing), then followed once the folders
    open up; a named file or glob folder that does not exist is still waited for as before."""
    locked, shut = tmp_path / "locked", tmp_path / "shut"
    for folder in (locked, shut):
        folder.mkdir()
        (folder / "train.log").write_bytes(b"step=2 loss=nan\n")
    locked.chmod(0o600)  # no x: its files cannot be reached
    shut.chmod(0o300)  # no r: glob lists nothing
    patterns = [locked / "train.log", shut / "*.log", tmp_path / "absent.log"]
    patterns += [tmp_path / "none" / "*.log"]
    lines = run_unprivileged(BLOCKED_ROUNDS, ",".join(map(str, patterns)), str(locked), str(shut))
    assert lines == [
        "opened at 0.0: []",
        "opened at 1.0: []",
        "opened at 2.0: []",
        "opened at 3.0: []",
        f"opened at 4.0: ['{locked / 'train.log'}', '{shut / 'train.log'}']",
        f"{locked / 'train.log'}: cannot open (Permission denied) as user {USER}, which may not "
        f"search {locked}; fix: chmod u+x {locked} {RUN_AS}; retrying every 1s",
        f"{shut}: cannot list (Permission denied) as user {USER}; fix: chmod u+rx {shut} "
        f"{RUN_AS}; retrying every 1s",
        f"{tmp_path / 'none' / '*.log'}: directory {tmp_path / 'none'} does not exist (yet); "
        "waiting for it",
        f"{shut}: readable now",  # found listable by the rescan, before the opens
        f"{locked / 'train.log'}: readable now",
    ]


@pytest.mark.skipif(not CAN_BE_DENIED, reason="root opens any file, and setpriv is missing")
def test_a_folder_it_may_search_but_not_read_is_polled_and_said_once(tmp_path: Path) -> None:
    """A named file in a folder with mode --x is followed, but no file event can come from
    that folder (inotify needs read permission, and watchdog skips it without a word): that
    is said once, with the polling that replaces the events (was: nothing said)."""
    folder = tmp_path / "run"
    folder.mkdir()
    log = folder / "train.log"
    log.write_bytes(b"step=2 loss=nan\n")
    folder.chmod(0o100)
    lines = run_unprivileged(BLOCKED_ROUNDS, str(log), str(folder))
    assert lines == [
        f"opened at 0.0: ['{log}']",
        "opened at 1.0: []",
        "opened at 2.0: []",
        "opened at 3.0: []",
        "opened at 4.0: []",
        f"{folder}: not readable, so no file events from it; polling it every 1s "
        "(watched once it is readable)",
    ]
