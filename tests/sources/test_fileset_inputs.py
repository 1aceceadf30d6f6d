"""FileSet notes on inputs it cannot follow: compressed matches, missing directories, files it
may not open; said once (per change), on real files."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.sources.test_fileset import fileset


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


NO_DAC = ["--inh-caps=-dac_override,-dac_read_search"]
NO_DAC += ["--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("setpriv") is None, reason="root opens any file"
)
def test_permission_denied_is_said_once_per_change(tmp_path: Path) -> None:
    """A file that cannot be opened is said once, not every retry; again once it changed (as
    root: in a process without the capabilities that let root open anything)."""
    log = tmp_path / "a.log"
    log.write_bytes(b"x\n")
    log.chmod(0)
    prefix = ["setpriv", *NO_DAC] if os.geteuid() == 0 else []
    done = subprocess.run(
        [*prefix, sys.executable, "-c", PERMISSION_CHECK, str(log)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    note = f"{log}: cannot open (Permission denied); will retry"
    assert done.stdout.splitlines() == [note, note]
