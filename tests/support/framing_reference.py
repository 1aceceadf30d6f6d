"""The framing of lines as it was before issue 9 (every fix-up on every row, polars' CSV reader
as the splitter), kept as the reference the fast paths of `lines_to_series` must equal."""

from __future__ import annotations

import io

import polars as pl

from logwatch.sources.framing import (
    DEFAULT_MAX_LINE_BYTES,
    SMALL_BLOCK_BYTES,
    TRUNCATION_MARKER,
)

_NUL = b"\x00"
_REPLACEMENT = "\ufffd".encode()
_NONFINITE_HINT = r"(?i)(?:loss|norm)[\w/.]*['\"]?\s*[=:]?\s*(?:tensor\()?[-+]?(?:nan|inf)\b"
_REDRAW_JOIN = " \u21b5 "
_COMPRESSION_FIRST_BYTES = (b"\x1f", b"\x78", b"\x28")
_NOT_PLAIN = (b"\r", b"\x1b", b"#0")
_PREFIX = r"^(\[rank\d+\]:|\[default\d+\]:|\[\d+,mpirank:[^\]]*\]<std(?:out|err)>:)"


def reference_lines_to_series(
    data: bytes, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> pl.Series:
    """Decode whole lines (bytes ending in `\\n`) into a String series, one row per line.

    Invalid UTF-8 becomes U+FFFD, NUL bytes become U+FFFD, CRLF loses its CR, and a line with
    `\\r` redraws (a progress bar) keeps its last non-empty segment.
    """
    if not data:
        return pl.Series("text", [], dtype=pl.String)
    if _NUL in data:
        data = data.replace(_NUL, _REPLACEMENT)
    if _is_plain_small(data, max_line_bytes):
        return _plain_lines(data)
    # Polars' CSV reader with no quoting and NUL as separator (NULs were replaced above) is a
    # multi-threaded line splitter with lossy UTF-8 decoding: far faster than str.split.
    # Polars decompresses input that starts like gzip, zlib or zstd: a block of log lines must
    # never be taken for one, so such a block gets an empty first line, dropped again below.
    guarded = data[:1] in _COMPRESSION_FIRST_BYTES
    if guarded:
        data = b"\n" + data
    frame = pl.read_csv(
        io.BytesIO(data),
        has_header=False,
        separator="\x00",
        quote_char=None,
        encoding="utf8-lossy",
        schema={"text": pl.String},
        raise_if_empty=False,
    )
    text = frame.get_column("text").fill_null("")
    if guarded:
        text = text.slice(1)
        data = data[1:]
    expected = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if text.len() != expected:
        # Line numbers are a contract: should the fast splitter ever disagree with the newline
        # count, split exactly (slower) instead of numbering lines wrongly.
        lines = data.decode("utf-8", "replace").split("\n")
        text = pl.Series("text", lines[:expected], dtype=pl.String).str.strip_suffix("\r")
    marker_len = len(TRUNCATION_MARKER.encode())
    frame = pl.DataFrame([text])
    if frame.select(pl.col("text").str.contains("#0", literal=True).any()).item():
        # rsyslog / SageMaker write control characters as `#015` (CR) and `#033` (ESC).
        frame = frame.with_columns(
            pl.col("text")
            .str.replace_all("#015", "\r", literal=True)
            .str.replace_all("#033", "\x1b", literal=True)
        )
    if frame.select(pl.col("text").str.contains("\x1b", literal=True).any()).item():
        # ANSI colours sit between keys and values (torchtitan): `\x1b[32mloss: \x1b[33m7.8`.
        frame = frame.with_columns(pl.col("text").str.replace_all(r"\x1b\[[0-9;?]*[A-Za-z]", ""))
    # A redrawn line keeps its last state, and the rank / MPI prefix of its first segment. A
    # non-finite loss or grad norm shown by an earlier redraw only is kept in front of it: a NaN
    # that a progress bar drew over is still a NaN.
    prefix = pl.col("text").str.extract(_PREFIX, 1).fill_null("")
    segments = (
        pl.col("text")
        .str.split("\r")
        .list.eval(pl.element().filter(pl.element().str.strip_chars() != ""))
    )
    last = segments.list.last().fill_null("")
    hidden = (
        segments.list.slice(0, pl.max_horizontal(segments.list.len() - 1, 0))
        .list.eval(pl.element().filter(pl.element().str.contains(_NONFINITE_HINT)))
        .list.first()
    )
    state = (
        pl.when(hidden.is_not_null() & ~last.str.contains(_NONFINITE_HINT))
        .then(hidden + _REDRAW_JOIN + last)
        .otherwise(last)
    )
    redrawn = pl.when(state.str.starts_with(prefix)).then(state).otherwise(prefix + state)
    frame = frame.with_columns(
        pl.when(pl.col("text").str.contains("\r", literal=True))
        .then(redrawn)
        .otherwise(pl.col("text"))
        .alias("text")
    )
    # Lines the framer did not see whole (they fit in one read) are cut here, exactly as the framer
    # cuts them; framer-cut lines already carry the marker and stay under this bound.
    too_long = frame.get_column("text").str.len_bytes() > max_line_bytes + marker_len + 32
    if too_long.any():
        rows = too_long.arg_true().to_list()
        cut = [_truncate(frame.item(i, "text"), max_line_bytes) for i in rows]
        frame = frame.with_columns(frame.get_column("text").scatter(rows, cut))
    return frame.get_column("text")


def _is_plain_small(data: bytes, max_line_bytes: int) -> bool:
    """Whether `data` is a few plain lines (what a live tail reads per wake-up): no `\\r`, no
    escapes, none too long. For these the CSV splitter's fixed cost (milliseconds, on the path
    from a write to its alert) is most of the work, and a plain split gives the same lines."""
    if len(data) > SMALL_BLOCK_BYTES or len(data) > max_line_bytes:
        return False
    return not any(mark in data for mark in _NOT_PLAIN)


def _plain_lines(data: bytes) -> pl.Series:
    """Whole plain lines, split as `str.split` does (lossy UTF-8 as the CSV reader's)."""
    lines = data.decode("utf-8", "replace").split("\n")
    if data.endswith(b"\n"):
        lines.pop()
    return pl.Series("text", lines, dtype=pl.String)


def _truncate(line: str, max_line_bytes: int) -> str:
    raw = line.encode()
    head = raw[:max_line_bytes]
    marker = TRUNCATION_MARKER.format(dropped=len(raw) - len(head))
    return head.decode("utf-8", "replace") + marker
