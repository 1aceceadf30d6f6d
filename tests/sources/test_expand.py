"""A folder's files that are mostly not text are told apart by their head's control bytes."""

from __future__ import annotations

from pathlib import Path

from logwatch.sources.expand import expand_inputs


def test_over_a_tenth_control_bytes_is_not_text_and_tabs_escapes_do_not_count(
    tmp_path: Path,
) -> None:
    """No NUL: 11 of 100 bytes control is skipped, 10 of 100 is read; tabs, newlines and the
    ESC of colour codes are text (a coloured log is a log)."""
    (tmp_path / "a-binary.bin").write_bytes(b"\x01" * 11 + b"x" * 89)
    (tmp_path / "b-edge.log").write_bytes(b"\x02" * 10 + b"x" * 90)
    (tmp_path / "c-colour.log").write_bytes(b"\x1b[31m\t\r\n\f\b" * 20)
    found = expand_inputs([str(tmp_path)])
    assert [Path(p).name for p in found.files] == ["b-edge.log", "c-colour.log"]
    assert [Path(p).name for p in found.skipped] == ["a-binary.bin"]
