"""write_atomic: the one way state files are replaced."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from logwatch.atomic import write_atomic


def test_replaces_the_file_whole_and_private(tmp_path: Path) -> None:
    """The new bytes replace the old, the file is 0600, and no temp file is left behind."""
    target = tmp_path / "checkpoint.json"
    target.write_text("old")
    write_atomic(target, b'{"new": true}')
    assert target.read_bytes() == b'{"new": true}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json"]


def test_a_symlink_planted_as_the_temp_file_is_not_followed(tmp_path: Path) -> None:
    """A `.tmp` symlink to another file makes the write fail; the other file is untouched."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "state.json"
    os.symlink(victim, tmp_path / "state.json.tmp")
    with pytest.raises(OSError) as info:
        write_atomic(target, b"overwrite")
    assert info.value.errno == errno.ELOOP
    assert victim.read_text() == "precious"
    assert not target.exists()
