"""Opening logs as byte streams: standard input, gzip / bzip2 / xz decompressed on the fly,
UTF-16 transcoded to UTF-8, each read up to any damage with every byte before it handed out."""

from __future__ import annotations

import bz2
import codecs
import io
import lzma
import os
import sys
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

from logwatch.errors import InputError
from logwatch.sources.sniff import HEAD_BYTES, TEXT_SAMPLE_BYTES, not_text_note, sniff

STDIN = "-"


def check_readable(
    paths: Sequence[str], *, not_text: Callable[[str, str], None] | None = None
) -> None:
    """Fail early, with the fix, on a path that is missing, a folder or unreadable;
    `not_text(path, note)` hears once of each file that is mostly not text (`text_note`)."""
    if list(paths).count(STDIN) > 1:
        raise InputError("-: standard input can be read only once (give '-' one time)")
    for path in paths:
        if path == STDIN:
            continue
        p = Path(path)
        if not p.exists():
            raise InputError(f"{path}: no such file (check the path, or quote a glob)")
        if p.is_dir():
            raise InputError(
                f"{path}: is a directory (give the log files in it, e.g. '{path}/*.log')"
            )
        if not os.access(p, os.R_OK):
            raise InputError(f"{path}: permission denied (run as a user who can read it)")
    if not_text is None:
        return
    for path in paths:
        note = text_note(path)
        if note is not None:
            not_text(path, note)


def open_log(path: str) -> tuple[ByteStream, int, int]:
    """The log as a byte stream (standard input for '-'; gzip, bzip2 and xz decompressed and
    UTF-16 transcoded to UTF-8 on the fly), its size on disk (0 when unknown or not the size of
    the text) and the year its timestamps without one belong to (from its mtime)."""
    if path == STDIN:
        stdin = _Prefixed(sys.stdin.buffer, HEAD_BYTES)
        return _decoded(path, stdin, stdin.head), 0, datetime.now().year
    try:
        raw = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc.strerror}") from None
    info = os.fstat(raw.fileno())
    year = datetime.fromtimestamp(info.st_mtime).year
    try:
        stream = _decoded(path, raw, raw.peek(HEAD_BYTES))
    except BaseException:
        raw.close()
        raise
    return stream, info.st_size if stream is raw else 0, year


def text_note(path: str) -> str | None:
    """What to say when the start of a log (decompressed) is mostly not text
    (`sniff.not_text_note`); None for text, standard input (it cannot be read twice) and a
    file that cannot be read (replay says why)."""
    if path == STDIN:
        return None
    try:
        stream, _, _ = open_log(path)
    except (InputError, OSError):
        return None
    try:
        head = b""
        while len(head) < TEXT_SAMPLE_BYTES + 3 and (more := stream.read(TEXT_SAMPLE_BYTES)):
            head += more
    except (OSError, EOFError):
        return None  # damaged: replay says so
    finally:
        close_stream(stream)
    return not_text_note(head)


def _decoded(path: str, raw: ByteStream, head: bytes) -> ByteStream:
    """`raw` read through whatever its first bytes call for."""
    kind = sniff(head)
    if kind == "zstd":
        source = "FILE" if path == STDIN else path
        raise InputError(
            f"{path}: zstd-compressed; decompress it: `zstd -dc {source} | logwatch replay -`"
        )
    if kind is None:
        return raw
    decoders: dict[str, Callable[[ByteStream], ByteStream]] = {
        "gzip": GzipStream,
        "bzip2": lambda r: DecompressStream(r, bz2.BZ2Decompressor),
        "xz": lambda r: DecompressStream(r, lzma.LZMADecompressor),
        "utf-16": Utf16Stream,
    }
    return decoders[kind](raw)


class _Prefixed:
    """A stream whose first `size` bytes were read ahead (`head`) to see what it holds; pipes
    cannot seek back, and a pipe's first read may hold fewer bytes than asked."""

    def __init__(self, raw: ByteStream, size: int) -> None:
        self.raw = raw
        head = b""
        while len(head) < size and (more := raw.read(size - len(head))):
            head += more
        self.head, self._unread = head, head

    def read(self, size: int = -1, /) -> bytes:
        """The read-ahead bytes first, then the rest of the stream."""
        if not self._unread:
            return self.raw.read(size)
        out = self._unread if size < 0 else self._unread[:size]
        self._unread = self._unread[len(out) :]
        return out


def close_stream(stream: ByteStream) -> None:
    """Close the file under a stream of decoders (never standard input)."""
    raw: object = stream
    while isinstance(raw, GzipStream | DecompressStream | Utf16Stream | _Prefixed):
        raw = raw.raw
    if raw is not sys.stdin.buffer and isinstance(raw, io.IOBase):
        raw.close()


class ByteStream(Protocol):
    """Anything with a binary `read(size)`: a file, standard input, a decompressor."""

    def read(self, size: int = -1, /) -> bytes:
        """Up to `size` bytes; b'' at the end."""
        ...


class GzipStream:
    """gzip decompression that hands out every byte it could decompress before a damaged or
    cut-off end, then raises EOFError (Python's GzipFile loses the last read's bytes instead).
    Concatenated gzip members (`cat a.gz b.gz`) are read one after another."""

    def __init__(self, raw: ByteStream, chunk_bytes: int = 1 << 20) -> None:
        self.raw, self.chunk_bytes = raw, chunk_bytes
        self._inflate = zlib.decompressobj(wbits=31)
        self._buffer = bytearray()
        self._done = False

    def read(self, size: int = -1, /) -> bytes:
        want = size if size >= 0 else 1 << 62
        while len(self._buffer) < want and not self._done:
            self._fill()
        if not self._buffer and self._done and not self._inflate.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        out = bytes(self._buffer[:want])
        del self._buffer[:want]
        return out

    def _fill(self) -> None:
        data = self._inflate.unused_data if self._inflate.eof else b""
        if self._inflate.eof:
            if not data:
                data = self.raw.read(self.chunk_bytes)
                if not data:
                    self._done = True
                    return
            self._inflate = zlib.decompressobj(wbits=31)  # the next member
        else:
            data = self.raw.read(self.chunk_bytes)
            if not data:
                self._done = True
                return
        try:
            self._buffer += self._inflate.decompress(data)
        except zlib.error as exc:
            self._done = True
            if not self._buffer:
                raise EOFError(f"corrupt gzip data: {exc}") from None


class Utf16Stream:
    """UTF-16 text (either byte order, after its BOM) handed out as UTF-8 bytes, decoded
    incrementally so that a split code unit or surrogate pair at a read boundary is kept whole;
    undecodable code units become U+FFFD, as invalid UTF-8 does."""

    def __init__(self, raw: ByteStream, chunk_bytes: int = 1 << 20) -> None:
        self.raw, self.chunk_bytes = raw, chunk_bytes
        self._decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
        self._done = False

    def read(self, size: int = -1, /) -> bytes:
        """Some UTF-8 bytes (at most about `size` * 3/2), b'' only at the end of the input."""
        want = self.chunk_bytes if size < 0 else max(2, size - size % 2)
        while not self._done:
            data = self.raw.read(want)
            self._done = not data
            text = self._decoder.decode(data, final=self._done)
            if text:
                return text.encode("utf-8", "surrogatepass")
        return b""


class DecompressStream:
    """bzip2 or xz decompression, streaming like `GzipStream`: every byte before a damaged or
    cut-off end comes out, then EOFError; concatenated streams are read one after another."""

    def __init__(
        self, raw: ByteStream, new: Callable[[], Decompressor], chunk_bytes: int = 1 << 20
    ) -> None:
        self.raw, self.chunk_bytes, self._new = raw, chunk_bytes, new
        self._unpack = new()
        self._done = False

    def read(self, size: int = -1, /) -> bytes:
        """Up to `size` decompressed bytes; b'' at the end, EOFError at a damaged end."""
        want = self.chunk_bytes if size < 0 else size
        while not self._done:
            if self._unpack.eof:
                data = self._unpack.unused_data or self.raw.read(self.chunk_bytes)
                if not data:
                    self._done = True
                    break
                self._unpack = self._new()  # the next stream
            elif self._unpack.needs_input:
                data = self.raw.read(self.chunk_bytes)
                if not data:
                    self._done = True
                    raise EOFError("compressed file ended before the end-of-stream marker")
            else:
                data = b""
            try:
                out = self._unpack.decompress(data, max_length=want)
            except (OSError, ValueError) as exc:  # lzma.LZMAError is an OSError
                self._done = True
                raise EOFError(f"corrupt compressed data: {exc}") from None
            if out:
                return out
        return b""


class Decompressor(Protocol):
    """What `bz2.BZ2Decompressor` and `lzma.LZMADecompressor` have in common."""

    @property
    def eof(self) -> bool:
        """The end-of-stream marker was reached."""
        ...

    @property
    def needs_input(self) -> bool:
        """More input is needed before more output can come."""
        ...

    @property
    def unused_data(self) -> bytes:
        """Bytes after the end of the stream."""
        ...

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        """Decompress `data`, at most `max_length` bytes out."""
        ...
