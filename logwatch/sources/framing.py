"""Bytes to lines: framing that never crashes and never loses a line number.

Lines end at `\\n` (as for `wc -l`); a `\\r` never starts a new line. Framing works on raw bytes
so that a file is cut into blocks of whole lines with known line numbers and byte offsets; the
text decoding of a block happens in one vectorized step (`lines_to_series`).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

import polars as pl

from logwatch.sources.streams import ByteStream

DEFAULT_MAX_LINE_BYTES = 1 << 20
DEFAULT_BLOCK_BYTES = 8 << 20
"""Replay's block: polars' per-query cost and the parse threads' hand-offs are paid per block,
and its working memory is held per block in flight (two parsed ahead, one read ahead). On the
730 MB realistic DFlash log, all rules, 8 MiB blocks peak at 399 000-418 000 KB (GNU time,
on a loaded machine) against 464 000-479 000 KB for 12 MiB, whose quiet peak of about 510 000
KB was over replay's 512 MB budget; the CPU time is the same within noise (BENCHMARKS.md, branch
`allrules`). On the earlier, kinder 739 MB file, 12 MiB blocks had replayed in 5-10 % less wall
time than 8 MiB ones."""
TRUNCATION_MARKER = " …[logwatch: line truncated, {dropped} bytes dropped]"
_NUL = b"\x00"
_REPLACEMENT = "\ufffd".encode()
_BOM = b"\xef\xbb\xbf"  # UTF-8's; polars' CSV reader drops it at the start of its input
_NONFINITE_HINT = r"(?i)(?:loss|norm)[\w/.]*['\"]?\s*[=:]?\s*(?:tensor\()?[-+]?(?:nan|inf)\b"
_HINT_WORDS = ["nan", "inf"]
"""Words one of which, ASCII case aside, every `_NONFINITE_HINT` match holds: its `(?i)`
folds no character outside ASCII to a letter of them (`tests/sources/test_framing_paths.py`)."""
_REDRAW_JOIN = " \u21b5 "  # between a hidden non-finite redraw and the line's last state
_COMPRESSION_FIRST_BYTES = (b"\x1f", b"\x78", b"\x28")  # gzip, zlib, zstd magic numbers
SMALL_BLOCK_BYTES = 64 << 10
"""Blocks up to this size of plain lines are split in Python, not by polars' CSV reader."""
_PREFIX = r"^(\[rank\d+\]:|\[default\d+\]:|\[\d+,mpirank:[^\]]*\]<std(?:out|err)>:)"


@dataclass(frozen=True, slots=True)
class LineBlock:
    """Whole lines read from one source: their text, first line number and byte span."""

    text: pl.Series
    first_line: int
    start_offset: int
    end_offset: int

    @property
    def count(self) -> int:
        """Number of lines in the block."""
        return self.text.len()


class LineFramer:
    """Cuts a byte stream into whole lines, truncating over-long ones with a visible marker.

    Memory stays bounded by `max_line_bytes` plus one fed chunk: an over-long line keeps only its
    head while the rest is counted and dropped until its newline arrives.
    """

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._pending = bytearray()
        self._dropped = 0  # bytes dropped from the current over-long line
        self._held = 0  # bytes of the current line kept elsewhere (an evaluated partial line)
        self._before = 0  # bytes dropped from it before that

    @property
    def pending_bytes(self) -> int:
        """Bytes of the current unfinished line (kept or dropped)."""
        return len(self._pending) + self._dropped

    def feed(self, data: bytes) -> bytes:
        """Take new bytes; return the whole lines now complete (ending with `\\n`), maybe b''."""
        finished, start, end = self.split(data)
        if not finished:
            return data[start:end]  # the same object when `data` ends with a newline
        return b"".join((finished, memoryview(data)[start:end]))

    def split(self, data: bytes) -> tuple[bytes, int, int]:
        """Take new bytes; return the pending line they finish (with its `\\n`; b'' when none
        was pending) and the span `data[start:end]` of the whole lines after it, uncopied."""
        cut = data.rfind(b"\n")
        if cut < 0:
            self._hold(data)
            return b"", 0, 0
        view = memoryview(data)
        finished, start = b"", 0
        if self._pending or self._dropped or self._held or self._before:
            start = data.find(b"\n") + 1
            finished = self._finish_pending(view[: start - 1]) + b"\n"
        self._hold(view[cut + 1 :])
        return finished, start, cut + 1

    def flush(self) -> bytes:
        """Return the unfinished last line as a whole line (end of file), or b''."""
        if not self._pending and not self._dropped:
            return b""
        return self._finish_pending(b"") + b"\n"

    def take(self) -> tuple[bytes, int]:
        """Hand out the unfinished line as it stands: (kept bytes, bytes dropped from the line so
        far, also before `continue_line`); the framer then holds nothing."""
        kept, dropped = bytes(self._pending), self._dropped + self._before
        self._pending.clear()
        self._dropped = self._held = self._before = 0
        return kept, dropped

    def continue_line(self, held: int, dropped: int) -> None:
        """The current line goes on after `held` bytes kept elsewhere and `dropped` dropped: what
        comes next is kept only up to `max_line_bytes` for the whole line."""
        self._held, self._before = held, dropped

    def _hold(self, data: bytes | memoryview) -> None:
        room = self.max_line_bytes - self._held - len(self._pending)
        if room >= len(data):
            self._pending += data
        else:
            self._pending += data[: max(room, 0)]
            self._dropped += len(data) - max(room, 0)

    def _finish_pending(self, rest: bytes | memoryview) -> bytes:
        self._hold(rest)
        line = bytes(self._pending)
        if self._dropped:  # counting what an earlier part dropped, but only if more came
            line += TRUNCATION_MARKER.format(dropped=self._dropped + self._before).encode()
        self._pending.clear()
        self._dropped = self._held = self._before = 0
        return line


def lines_to_series(data: bytes, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> pl.Series:
    """Decode whole lines (bytes ending in `\\n`) into a String series, one row per line.

    Invalid UTF-8 becomes U+FFFD, NUL bytes become U+FFFD, CRLF loses its CR, and a line with
    `\\r` redraws (a progress bar) keeps its last non-empty segment.
    """
    return _frame(data, max_line_bytes, small=True)


def _frame(data: bytes, max_line_bytes: int, *, small: bool) -> pl.Series:
    """`lines_to_series`; with `small` false never by the small-block split (which keeps a
    leading UTF-8 BOM the CSV reader drops, and cuts no line), so that a piece of a large block
    frames exactly as inside it."""
    if not data:
        return pl.Series("text", [], dtype=pl.String)
    if _NUL in data:
        data = data.replace(_NUL, _REPLACEMENT)
    if small and _is_plain_small(data, max_line_bytes):
        return _plain_lines(data)
    redrawn = b"\r" in data
    text = _csv_lines(data, redrawn=redrawn)
    # Most blocks are plain lines: each fix-up runs only where a byte test of the whole block
    # (memchr-fast) says it can change something, and then only on the rows it changes.
    escaped = False
    if b"#" in data:  # rsyslog / SageMaker write control characters as `#015` (CR), `#033` (ESC)
        rows = text.str.contains("#0", literal=True)
        escaped = bool(rows.any())
        text = _fix_rows(text, rows, _UNESCAPE)
    if escaped or b"\x1b" in data:
        text = _fix_rows(text, text.str.contains("\x1b", literal=True), _NO_ANSI)
    if escaped or redrawn:
        text = _fix_redrawn(text, text.str.contains("\r", literal=True))
    # A line's text is at most six times its bytes plus a few (three for bad UTF-8, twice again
    # for a redraw's prefix): a block under a sixth of the bound has no line to cut.
    if 6 * len(data) + 8 > _cut_bound(max_line_bytes):
        text = _cut_too_long(text, max_line_bytes)
    return text


def _csv_lines(data: bytes, *, redrawn: bool) -> pl.Series:
    """Lines split at `\\n` with lossy UTF-8 and CRLF's CR dropped, by polars' CSV reader with no
    quoting and NUL as separator (NULs are replaced by then): the fastest exact splitter found,
    ahead of `str.split` on the decoded block. `redrawn`: whether `data` holds a `\\r`."""
    # Polars decompresses input that starts like gzip, zlib or zstd: a block of log lines must
    # never be taken for one, so such a block gets an empty first line, dropped again below.
    guarded = data[:1] in _COMPRESSION_FIRST_BYTES
    frame = pl.read_csv(
        io.BytesIO(b"\n" + data if guarded else data),
        has_header=False,
        separator="\x00",
        quote_char=None,
        encoding="utf8-lossy",
        schema={"text": pl.String},
        raise_if_empty=False,
    )
    text = frame.get_column("text")
    if text.has_nulls():  # empty lines (a native check; the fill is a query)
        text = text.fill_null("")
    if guarded:
        text = text.slice(1)
    if not redrawn and _split_at_newlines(text, data):
        return text
    expected = count_newlines(data) + (0 if data.endswith(b"\n") else 1)
    if text.len() != expected:
        # Line numbers are a contract: should the fast splitter ever disagree with the newline
        # count, split exactly (slower) instead of numbering lines wrongly.
        lines = data.decode("utf-8", "replace").split("\n")
        text = pl.Series("text", lines[:expected], dtype=pl.String).str.strip_suffix("\r")
    return text


def _split_at_newlines(rows: pl.Series, data: bytes) -> bool:
    """Whether the CSV reader's `rows` of `data` are cut at its newlines and nowhere else, proven in about 40 % of the time `count_newlines` takes.

    The reader keeps a byte, or drops a newline, the `\\r` before one, or a leading BOM; it
    rewrites invalid UTF-8 only, to U+FFFD. For input without a `\\r` (the caller tests for
    one: a reader that cut at a lone `\\r` would pass the sum) and rows without a U+FFFD
    (nothing rewritten: a rewrite can grow a row by as much as a lost newline): with no row
    holding a `\\n`, each of the input's newlines was dropped; when the rows' bytes plus one
    per cut add up to the input's, nothing else was, so each cut is at a newline. A block with
    a BOM (the sum disagrees) or a U+FFFD in a row is left to `_csv_lines`' newline count."""
    cuts = rows.len() - (0 if data.endswith(b"\n") else 1)
    found = pl.DataFrame([rows]).select(
        pl.col("text").str.len_bytes().sum().alias("bytes"),
        pl.col("text").str.contains_any(["\n", "\ufffd"]).any().alias("unproven"),
    )
    total, unproven = found.row(0)
    return not unproven and total + cuts == len(data)


def count_newlines(data: bytes) -> int:
    """How many `\\n` `data` holds, counted in place (a replace, as fast on a warm buffer,
    would allocate a second copy of a replay block at the read's peak memory)."""
    return data.count(b"\n")


def _fix_rows(text: pl.Series, rows: pl.Series, fix: pl.Expr) -> pl.Series:
    """`text` with `fix` applied to the rows where `rows` is true (the others as they are)."""
    index = rows.arg_true()
    if index.is_empty():
        return text
    if index.len() == text.len():
        return pl.DataFrame([text]).select(fix.alias("text")).to_series()
    fixed = pl.DataFrame([text.gather(index)]).select(fix.alias("text")).to_series()
    return text.scatter(index, fixed)


def _fix_redrawn(text: pl.Series, rows: pl.Series) -> pl.Series:
    """`_fix_rows(text, rows, _REDRAWN)` at a tenth of its cost: each redrawn line's last state
    is its last `\r` segment where that one is not blank (`_last_states`; no list per line
    kept), and only the lines on which an earlier redraw may show a non-finite value (the hint
    matches the text before the last state: a superset of the segments `_REDRAWN` reads, since
    a match may also span a `\r`) take `_REDRAWN`."""
    index = rows.arg_true()
    if index.is_empty():
        return text
    every = index.len() == text.len()
    lines = text if every else text.gather(index)
    fixed = _last_states(lines)
    hinted = _hinted(lines)
    if not hinted.is_empty():
        exact = pl.DataFrame([lines.gather(hinted)]).select(_REDRAWN.alias("text")).to_series()
        fixed = fixed.scatter(hinted, exact)
    return fixed if every else text.scatter(index, fixed)


def _last_states(lines: pl.Series) -> pl.Series:
    """Each redrawn line's last state after its first segment's rank prefix (`_redrawn` where no
    earlier redraw shows a non-finite value): its last `\r` segment where that one is not blank
    (a `str.split`: a third of the `_LAST_STATE` regex's cost on tqdm's long lines), else that
    regex's group (a line ending in blank redraws). Each found once: an eager query does not
    share a repeated expression (the cut read the regex twice)."""
    text = pl.col("text")
    found = pl.DataFrame([lines]).select(
        text.str.split("\r").list.last().alias("last"),
        text.str.extract(_PREFIX, 1).fill_null("").alias("prefix"),
    )
    last = found.get_column("last")
    blank = last.str.strip_chars().str.len_bytes() == 0
    if blank.any():
        rows = blank.arg_true()
        again = pl.DataFrame([lines.gather(rows)]).select(
            text.str.extract(_LAST_STATE, 1).fill_null("")
        )
        last = last.scatter(rows, again.to_series())
    state, prefix = pl.col("last"), pl.col("prefix")
    cut = pl.when(state.str.starts_with(prefix)).then(state).otherwise(prefix + state)
    return found.with_columns(last).select(cut.alias("text")).to_series()


def _hinted(lines: pl.Series) -> pl.Series:
    """The rows of `lines` whose text before the last state holds `_NONFINITE_HINT`: looked for
    there only on the lines whose whole text holds it (the text before is a prefix of the
    line, followed by a `\r`, so a match in it is one in the line)."""
    text = pl.col("text")
    # The hint's regex only on the lines holding one of its words (an Aho-Corasick pass, about
    # a third of the regex's cost on tqdm's long lines; Hugging Face's dicts all say `loss`).
    maybe = lines.str.contains_any(_HINT_WORDS, ascii_case_insensitive=True).arg_true()
    if maybe.is_empty():
        return maybe
    hint = lines.gather(maybe).to_frame().select(text.str.contains(_NONFINITE_HINT))
    maybe = maybe.filter(hint.to_series())
    if maybe.is_empty():
        return maybe
    before = lines.gather(maybe).to_frame()
    found = before.select(text.str.replace(_LAST_STATE, "").str.contains(_NONFINITE_HINT))
    return maybe.filter(found.to_series())


# The last non-blank segment of a redrawn line (what `_redrawn`'s `last` keeps): it starts the
# line or follows a `\r`, holds a non-blank and no `\r`, and only blanks (`\r` is one) follow
# it. `\s` is Unicode's White_Space, the set `str.strip_chars` strips.
_LAST_STATE = r"(?:^|\r)([^\r]*\S[^\r]*)\s*$"


def _redrawn() -> pl.Expr:
    """A redrawn line keeps its last state, and the rank / MPI prefix of its first segment. A
    non-finite loss or grad norm shown by an earlier redraw only is kept in front of it: a NaN
    that a progress bar drew over is still a NaN."""
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
    return pl.when(state.str.starts_with(prefix)).then(state).otherwise(prefix + state)


_UNESCAPE = (
    pl.col("text")
    .str.replace_all("#015", "\r", literal=True)
    .str.replace_all("#033", "\x1b", literal=True)
)
# ANSI colours sit between keys and values (torchtitan): `\x1b[32mloss: \x1b[33m7.8`.
_NO_ANSI = pl.col("text").str.replace_all(r"\x1b\[[0-9;?]*[A-Za-z]", "")
_REDRAWN = _redrawn()


def _cut_bound(max_line_bytes: int) -> int:
    return max_line_bytes + len(TRUNCATION_MARKER.encode()) + 32


def _cut_too_long(text: pl.Series, max_line_bytes: int) -> pl.Series:
    """Lines the framer did not see whole (they fit in one read) are cut here, exactly as the
    framer cuts them; framer-cut lines already carry the marker and stay under this bound."""
    too_long = text.str.len_bytes() > _cut_bound(max_line_bytes)
    if not too_long.any():
        return text
    rows = too_long.arg_true().to_list()
    return text.scatter(rows, [_truncate(text[i], max_line_bytes) for i in rows])


def _is_plain_small(data: bytes, max_line_bytes: int) -> bool:
    """Whether `data` is a few plain lines (what a live tail reads per wake-up): no `\\r`, no
    escapes, none too long. For these the CSV splitter's fixed cost (milliseconds, on the path
    from a write to its alert) is most of the work, and a plain split gives the same lines."""
    if len(data) > SMALL_BLOCK_BYTES or len(data) > max_line_bytes:
        return False
    return not (b"\r" in data or b"\x1b" in data or (b"#" in data and b"#0" in data))


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


def read_blocks(
    stream: ByteStream,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    start_offset: int = 0,
    first_line: int = 1,
) -> Iterator[LineBlock]:
    """Read a whole stream as blocks of complete lines; the last unterminated line is included."""
    framer = LineFramer(max_line_bytes)
    offset = block_start = start_offset
    line_no = first_line
    while True:
        chunk = stream.read(block_bytes)
        if not chunk:
            break
        data = bytes(chunk)
        offset += len(data)
        finished, start, end = framer.split(data)
        if finished or start < end:
            text = _block_lines(finished, data, start, end, max_line_bytes)
            block_end = offset - framer.pending_bytes
            yield LineBlock(text, line_no, block_start, block_end)
            line_no += text.len()
            block_start = block_end
    tail = framer.flush()
    if tail:
        yield LineBlock(lines_to_series(tail, max_line_bytes), line_no, block_start, offset)


def _block_lines(
    finished: bytes, data: bytes, start: int, end: int, max_line_bytes: int
) -> pl.Series:
    """`lines_to_series(finished + data[start:end])` without copying a large read: the whole
    read is framed and the rows of its partial first and last lines dropped (lines are framed
    one by one, so the other rows are the same)."""
    if end - start <= SMALL_BLOCK_BYTES:
        return lines_to_series(finished + data[start:end], max_line_bytes)
    rows = _frame(data, max_line_bytes, small=False)
    first = 1 if start else 0
    body = rows.slice(first, rows.len() - first - (end < len(data)))
    if not finished:
        return body
    # The carried line is split in Python (the CSV reader costs a millisecond) when that gives
    # what its block gives it: no leading BOM for the CSV reader to drop, and too short to cut.
    small = not finished.startswith(_BOM) and 6 * len(finished) + 8 <= _cut_bound(max_line_bytes)
    return pl.concat([_frame(finished, max_line_bytes, small=small), body])
