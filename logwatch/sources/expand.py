"""Command-line inputs to log files: a folder is every file under it (recursively), a quoted glob
(`'logs/**/*.log'`) what it matches; a file that is mostly not text is skipped and counted."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

from logwatch.errors import InputError
from logwatch.sources.streams import STDIN
from logwatch.words import counted

_SNIFF_BYTES = 8192
# Compressed logs are read (decompressed on the fly), and UTF-16 with a BOM is text.
_READABLE_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\xff\xfe", b"\xfe\xff")
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\b\x1b")
_CONTROLS = bytes(byte for byte in range(32) if byte not in _TEXT_CONTROLS)
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class Inputs:
    """The log files to read, in a stable order, and the files skipped as not text."""

    files: list[str]
    skipped: list[str] = field(default_factory=list)
    expanded: bool = False  # a folder or a glob was given (a fleet, not a list of files)


def expand_inputs(paths: list[str] | tuple[str, ...]) -> Inputs:
    """Folders and globs to files (natural order: rank 2 before rank 10); plain files and '-'
    as given. A folder or glob that holds no log file is an error naming it."""
    files: list[str] = []
    skipped: list[str] = []
    expanded = False
    for path in paths:
        if path == STDIN or (os.path.exists(path) and not os.path.isdir(path)):
            files.append(path)
            continue
        if os.path.isdir(path):
            found = _walk(path)
        elif _GLOB.search(path):
            found = sorted(
                (p for p in glob.glob(path, recursive=True) if os.path.isfile(p)), key=_natural
            )
            if not found:
                raise InputError(f"{path}: the glob matches no file (check the pattern)")
        else:
            files.append(path)  # missing: check_readable says so
            continue
        expanded = True
        text = [not _not_text(p) for p in found]
        logs = [p for p, keep in zip(found, text, strict=True) if keep]
        skipped += [p for p, keep in zip(found, text, strict=True) if not keep]
        if not logs:
            raise InputError(
                f"{path}: no log file in it ({len(found)} files, none of them text)"
                if found
                else f"{path}: the folder holds no file"
            )
        files += logs
    return Inputs(files, skipped, expanded)


def _walk(folder: str) -> list[str]:
    out: list[str] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        out += [os.path.join(root, name) for name in names if not name.startswith(".")]
    return sorted(out, key=_natural)


def _natural(path: str) -> list[tuple[int, int | str]]:
    """`rank2` before `rank10`: digit runs compare as numbers."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", path)]


def _not_text(path: str) -> bool:
    """Whether a file is mostly not text: a NUL, or over 10% control bytes, in its head."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(_SNIFF_BYTES)
    except OSError:
        return False  # check_readable names it
    if not head or head.startswith(_READABLE_MAGIC):
        return False
    # counted in C (`translate` drops the control bytes): a byte loop was most of a 4 353-file
    # folder's expansion
    controls = len(head) - len(head.translate(None, _CONTROLS))
    return b"\x00" in head or controls > len(head) // 10


def skipped_line(inputs: Inputs) -> str | None:
    """The one stderr line about skipped files, or None."""
    if not inputs.skipped:
        return None
    first = inputs.skipped[0]
    more = f" and {len(inputs.skipped) - 1} more" if len(inputs.skipped) > 1 else ""
    return (
        f"logwatch: {counted(len(inputs.skipped), 'file')} skipped as not text ({first}{more}); "
        "give a file by name to read it anyway"
    )
