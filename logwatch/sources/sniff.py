"""What a log's first bytes and a path's file type say about how (or whether) it can be read."""

from __future__ import annotations

import re
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


TEXT_SAMPLE_BYTES = 64 << 10
"""How much of a log's (decoded) start `not_text_note` looks at."""
NOT_TEXT_SHARE = 0.10
"""Above this share of bytes that no text holds, a log is said to be mostly not text."""
_CONTROLS = bytes(set(range(32)) - {0x09, 0x0A, 0x0C, 0x0D, 0x1B})
"""Control bytes no text log holds (tab, newline, form feed, CR and ESC colours are text)."""
_INVALID = re.compile("[\udc80-\udcff]")
"""A byte that is not part of valid UTF-8, as `surrogateescape` decodes it."""


def not_text_note(head: bytes) -> str | None:
    """What to say about a log whose start is mostly not text (the share of invalid UTF-8 and
    of NUL and other control bytes, as `file` would call it `data`), or None for text."""
    sample = head[:TEXT_SAMPLE_BYTES]
    if len(head) > len(sample):  # a character cut at the end of the sample is not invalid
        sample = sample[: len(sample) - 3]
    if not sample:
        return None
    invalid = len(_INVALID.findall(sample.decode("utf-8", "surrogateescape")))
    nul = sample.count(0)
    controls = len(sample) - len(sample.translate(None, _CONTROLS)) - nul
    if (invalid + nul + controls) / len(sample) <= NOT_TEXT_SHARE:
        return None
    shares = [(invalid, "invalid UTF-8"), (nul, "NUL bytes"), (controls, "other control bytes")]
    parts = ", ".join(f"{_percent(n, len(sample))} {what}" for n, what in shares if n)
    kib = max(len(head[:TEXT_SAMPLE_BYTES]) >> 10, 1)
    return (
        f"mostly not text: of its first {kib} KiB, {parts} (`file` would say data, not text); "
        "read as lines anyway, so expect few rules to match. Check that this is the log you meant"
    )


def _percent(part: int, whole: int) -> str:
    share = 100 * part / whole
    return "<1%" if share < 1 else f"{share:.0f}%"
