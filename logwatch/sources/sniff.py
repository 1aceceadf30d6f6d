"""What a log's first bytes and a path's file type say about how (or whether) it can be read."""

from __future__ import annotations

import stat

UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
MAGIC = {
    "gzip": b"\x1f\x8b",
    "bzip2": b"BZh",
    "xz": b"\xfd7zXZ\x00",
    "zstd": b"\x28\xb5\x2f\xfd",
}
"""Compression formats by their magic number."""
HEAD_BYTES = max(len(m) for m in MAGIC.values())
"""How many first bytes `sniff` needs."""


def sniff(head: bytes) -> str | None:
    """The compression ('gzip', 'bzip2', 'xz', 'zstd') or 'utf-16' the first bytes show, or None
    for plain (UTF-8) text."""
    for name, magic in MAGIC.items():
        if head.startswith(magic):
            return name
    return "utf-16" if head[:2] in UTF16_BOMS else None


def utf16_note(path: str) -> str:
    """What `tail` says, once, about a UTF-16 file it follows byte by byte."""
    return (
        f"{path}: UTF-16 text; logwatch reads UTF-8 — make the writer log UTF-8 "
        "(e.g. PYTHONIOENCODING=utf-8) or convert with iconv"
    )


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ('a FIFO'), from its `st_mode`."""
    return _KINDS.get(stat.S_IFMT(mode), "not a plain file")
