"""Framing's fast path (plain lines: a byte test, the splitter, nothing else) and each fix-up it
skips give exactly the lines the pre-issue-9 framing gave (tests/support/framing_reference.py)."""

from __future__ import annotations

import io
import itertools

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.sources.framing import (
    _HINT_WORDS,
    _NONFINITE_HINT,
    DEFAULT_MAX_LINE_BYTES,
    SMALL_BLOCK_BYTES,
    TRUNCATION_MARKER,
    LineFramer,
    _hinted,
    _split_at_newlines,
    count_newlines,
    lines_to_series,
    read_blocks,
)
from tests.support.framing_reference import reference_lines_to_series
from tests.support.properties import examples

PLAIN = b"2026-11-28 14:02:03 step 1300 | loss 2.31 | grad_norm 1.1\n"
PLAIN_TEXT = PLAIN.decode().rstrip("\n")
ROWS = SMALL_BLOCK_BYTES // len(PLAIN) + 10  # enough plain lines to pass the small-block path


def around(line: bytes) -> bytes:
    """`line` at the middle of a block of plain lines too large for the small-block split."""
    half = PLAIN * (ROWS // 2)
    return half + line + half


def framed(data: bytes, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> list[str]:
    """The block's lines, checked against the reference framing on the way."""
    lines = lines_to_series(data, max_line_bytes).to_list()
    assert lines == reference_lines_to_series(data, max_line_bytes).to_list()
    return lines


def middle(data: bytes, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> str:
    """The one line at the middle of `around(...)`; every other line must be plain as written."""
    lines = framed(data, max_line_bytes)
    assert len(lines) == 2 * (ROWS // 2) + 1
    assert set(lines[: ROWS // 2] + lines[ROWS // 2 + 1 :]) == {PLAIN_TEXT}
    return lines[ROWS // 2]


@pytest.mark.parametrize(
    ("line", "text"),
    [
        (
            b"E 1/100 [loss=nan]\rE 100/100 [loss=1.90]\n",
            "E 1/100 [loss=nan] \u21b5 E 100/100 [loss=1.90]",
        ),
        (b"[rank3]: 10%|#  | loss=2.1\r 20%|## | loss=nan\n", "[rank3]: 20%|## | loss=nan"),
        (b"\x1b[31mstep: 412  \x1b[32mloss:     nan\x1b[39m\n", "step: 412  loss:     nan"),
        (b"<stdout>:#015 29%|##| 100/345#015{'loss': 0.45}\n", "{'loss': 0.45}"),
        (b"#033[31mloss: nan#033[0m\n", "loss: nan"),
        (b"# epoch 1 ## done\n", "# epoch 1 ## done"),
        (b"nul\x00byte \xff\n", "nul\ufffdbyte \ufffd"),
        (b"crlf line\r\n", "crlf line"),
        (b"   \r\n", "   "),
        (b"two crs\r\r\n", "two crs"),
    ],
    ids=[
        "redraw",
        "rank-redraw",
        "ansi",
        "syslog-cr",
        "syslog-esc",
        "hash",
        "nul",
        "crlf",
        "blank-crlf",
        "cr-cr-lf",
    ],
)
def test_one_marked_line_among_plain_ones(line: bytes, text: str) -> None:
    """One line with a `\\r`, an ESC, a `#0` escape, a NUL or a CRLF in a large block of plain
    lines is fixed up alone: it reads as before, the plain lines around it as written."""
    assert middle(around(line)) == text


def test_every_line_marked() -> None:
    """A block whose every line is a redraw (a progress bar's log) reads as before."""
    data = b"".join(f"E {i}/9 [loss=2.{i}]\rE {i + 1}/9 [loss=nan]\n".encode() for i in range(3000))
    lines = framed(data)
    assert lines[0] == "E 1/9 [loss=nan]"
    assert len(lines) == 3000


def test_crlf_block() -> None:
    """A Windows-written log (every line CRLF) loses each line's CR and nothing else."""
    data = PLAIN.replace(b"\n", b"\r\n") * ROWS
    assert framed(data) == [PLAIN_TEXT] * ROWS


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_long_line_in_a_block_is_cut_at_the_same_bound(extra: int) -> None:
    """A line within one read is cut exactly where it always was: longer than max_line_bytes
    plus the marker and a margin, and never one byte before."""
    max_line_bytes = 1000
    bound = max_line_bytes + len(TRUNCATION_MARKER.encode()) + 32
    text = middle(around(b"x" * (bound + extra) + b"\n"), max_line_bytes)
    if extra <= 0:
        assert text == "x" * (bound + extra)
    else:
        dropped = bound + extra - max_line_bytes
        assert text == "x" * max_line_bytes + TRUNCATION_MARKER.format(dropped=dropped)


def test_small_block_with_bad_utf8_is_cut_as_before() -> None:
    """Bad UTF-8 grows threefold when decoded: a short line of it is cut in a block with a
    `\\r` (the checked path), as it was, and kept whole in a plain small block, as it was."""
    assert framed(b"\r\n" + b"\xff" * 70 + b"\n", max_line_bytes=100)[1] == (
        "\ufffd" * 34 + TRUNCATION_MARKER.format(dropped=110)  # 99 bytes kept, the last broken
    )
    assert framed(b"\xff" * 99 + b"\n", max_line_bytes=100) == ["\ufffd" * 99]


PIECES = [
    b"a",
    b" ",
    b"\n",
    b"\n",
    b"\r",
    b"\r\n",
    b"\x00",
    b"\xff",
    b"\xc3\xa9",
    b"\xe2\x82",
    b"\x1b[31m",
    b"\x1b[0m",
    b"\x1b",
    b"#015",
    b"#033[1m",
    b"#0",
    b"#",
    b"loss=nan",
    b"loss: inf",
    b"grad_norm 1.0",
    b"[rank3]:",
    b"[1,mpirank:0,algo-1]<stdout>:",
    b"E 1/100 [loss=2.31]",
    b"\xef\xbb\xbf",
    b"y" * 300,
    b"\xff" * 40,
    b"\x00" * 40,
]
HEADS = [b"", b"\x1f\x8b", b"x\x9c", b"\x28\xb5\x2f\xfd", b"\xef\xbb\xbf", b"\r", b"\n"]
pieces = st.lists(st.sampled_from(PIECES), max_size=40).map(b"".join)


@settings(max_examples=examples(300), deadline=None, database=None)
@given(
    head=st.sampled_from(HEADS),
    before=pieces,
    large=st.booleans(),
    after=pieces,
    max_line_bytes=st.sampled_from([1, 16, 100, 400, 4096, DEFAULT_MAX_LINE_BYTES]),
)
def test_any_block_frames_as_the_reference(
    head: bytes, before: bytes, large: bool, after: bytes, max_line_bytes: int
) -> None:
    """Random blocks mixing redraws, CRLF, ANSI and syslog escapes, NULs, bad UTF-8, BOMs,
    compression magic and long lines, small or large, give the reference framing's lines."""
    padding = b"\n" + PLAIN * ROWS if large else b""
    data = head + before + padding + after
    lines = lines_to_series(data, max_line_bytes).to_list()
    assert lines == reference_lines_to_series(data, max_line_bytes).to_list()


@settings(max_examples=examples(200), deadline=None, database=None)
@given(data=pieces, cuts=st.lists(st.integers(0, 2000), max_size=12))
def test_framer_hands_out_every_byte_once(data: bytes, cuts: list[int]) -> None:
    """Fed in any pieces, the framer returns each line whole and once, the last on flush."""
    framer = LineFramer()
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    out = b"".join(framer.feed(data[a:b]) for a, b in itertools.pairwise(bounds))
    tail = framer.flush()
    assert out + tail == data + (b"\n" if tail else b"")


def reference_blocks(
    data: bytes, block_bytes: int, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> list[list[str]]:
    """Each block's lines as the reference frames the bytes the framer hands out per read."""
    framer, stream, blocks = LineFramer(max_line_bytes), io.BytesIO(data), []
    while chunk := stream.read(block_bytes):
        if complete := framer.feed(chunk):
            blocks.append(reference_lines_to_series(complete, max_line_bytes).to_list())
    if tail := framer.flush():
        blocks.append(reference_lines_to_series(tail, max_line_bytes).to_list())
    return blocks


@pytest.mark.parametrize(
    "line", [b"\xef\xbb\xbfbom first", b"\xff" * 99, b"\x1b[1mloss nan\r", b"#015 50%#015 x"]
)
def test_line_carried_over_between_reads_frames_as_inside_its_block(line: bytes) -> None:
    """A line cut by a read boundary (carried by the framer, framed apart from the rest of the
    read) comes out exactly as the reference frames it inside the block: BOM, cut bound and
    fix-ups included."""
    head = PLAIN * ROWS
    data = head + line + b"\n" + PLAIN * ROWS
    blocks = read_blocks(io.BytesIO(data), block_bytes=len(head) + 5, max_line_bytes=100)
    lines = [b.text.to_list() for b in blocks]
    assert lines == reference_blocks(data, len(head) + 5, max_line_bytes=100)
    assert lines[1][0] != PLAIN_TEXT  # the carried line opens the second block


@settings(max_examples=examples(60), deadline=None, database=None)
@given(
    parts=st.lists(st.tuples(pieces, st.integers(ROWS // 2, ROWS)), min_size=3, max_size=5),
    end=pieces,
    block_bytes=st.sampled_from([SMALL_BLOCK_BYTES - 100, 70_001, 100_003, 1 << 20]),
)
def test_blocks_of_a_stream_frame_as_the_reference(
    parts: list[tuple[bytes, int]], end: bytes, block_bytes: int
) -> None:
    """Read in large blocks (each read framed whole, its partial first and last lines dropped
    and the line carried over from the read before framed alone), a stream of plain lines and
    marked ones gives every block the lines the reference gives the framer's bytes."""
    data = b"".join(marked + b"\n" + PLAIN * rows for marked, rows in parts) + end
    blocks = [b.text.to_list() for b in read_blocks(io.BytesIO(data), block_bytes=block_bytes)]
    assert blocks == reference_blocks(data, block_bytes)


TEXT_PIECES = [b"a", b" ", b"\n", b"\n", b"\xc3\xa9", b"loss=nan", b"#", b"y" * 30]


def wrong_splits(lines: list[str]) -> list[list[str]]:
    """Ways a splitter could get `lines` wrong: two lines merged (keeping or dropping their
    newline), a line lost, an empty line made up."""
    wrong = [lines[1:], [*lines, ""], ["", *lines]]
    for i in range(len(lines) - 1):
        head, tail = lines[:i], lines[i + 2 :]
        wrong += [[*head, lines[i] + "\n" + lines[i + 1], *tail]]
        wrong += [[*head, lines[i] + lines[i + 1], *tail]]
    return wrong


@settings(max_examples=examples(200), deadline=None, database=None)
@given(st.lists(st.sampled_from(TEXT_PIECES), min_size=1, max_size=30).map(b"".join))
def test_the_split_check_takes_the_lines_and_nothing_else(data: bytes) -> None:
    """Replay does not count a block's newlines when a cheaper check proves the CSV reader
    cut the block at them: the check takes the block's own lines (so the fast path is used),
    and no merged, lost or made-up line gets past it."""
    lines = data.decode().split("\n")
    if data.endswith(b"\n"):
        lines.pop()
    assert _split_at_newlines(pl.Series("text", lines, dtype=pl.String), data)
    for wrong in wrong_splits(lines):
        assert not _split_at_newlines(pl.Series("text", wrong, dtype=pl.String), data)


def test_the_split_check_leaves_crlf_and_bad_utf8_to_the_count() -> None:
    """Blocks whose lines lost a CR or had bytes rewritten are counted, not proven: a
    rewrite can grow a row by the byte a merged line lost, so the sum alone would pass it."""
    merged = pl.Series("text", ["a\ufffdb"])
    assert not _split_at_newlines(merged, b"a\xe2\x82\nb\n")  # two lines as one
    assert not _split_at_newlines(merged, b"a\xf0\x9f\x98b\n")  # same size as read
    assert lines_to_series(around(b"a\xe2\x82\nb\n")).to_list()[ROWS // 2 : ROWS // 2 + 2] == [
        "a\ufffd",
        "b",
    ]
    assert not _split_at_newlines(pl.Series("text", ["a"]), b"a\r\n")
    assert not _split_at_newlines(pl.Series("text", ["\ufffd"]), b"\xff\n")
    assert not _split_at_newlines(pl.Series("text", ["a"]), b"\xef\xbb\xbfa\n")
    assert lines_to_series(around(b"\xef\xbb\xbfa\xff\r\n"), DEFAULT_MAX_LINE_BYTES).len() == (
        count_newlines(around(b"\n"))
    )


REDRAW_PIECES = [
    b"\r",
    b"\r",
    b"\r\r",
    b" ",
    b"\t",
    b"\x0b",
    b"\x0c",
    b"\xc2\xa0",  # U+00A0, and below U+3000 and U+2028: blanks that `str.strip_chars` strips
    b"\xe3\x80\x80",
    b"\xe2\x80\xa8",
    b"\xe2\x96\x88",  # a tqdm bar's block, not a blank
    b"  0%|          | 1/20 [00:04<01:19, 4.11s/it]",
    b"{'loss': nan, 'learning_rate': 1e-05, 'epoch': 0.1}",
    b"{'loss': 1.74, 'learning_rate': 1e-05, 'epoch': 0.1}",
    b"loss=inf",
    b"'grad_norm': NaN",
    b"Loss: INF,",
    b"norm",
    b": nan",
    b"loss",
    b"[rank3]:",
    b"[default0]:",
    b"x",
]


@settings(max_examples=examples(300), deadline=None, database=None)
@given(
    lines=st.lists(st.lists(st.sampled_from(REDRAW_PIECES), max_size=12).map(b"".join), max_size=8),
    large=st.booleans(),
)
def test_redrawn_lines_frame_as_the_reference(lines: list[bytes], large: bool) -> None:
    """Lines of `\\r` redraws (a last state after blank redraws or none, Unicode blanks, rank
    prefixes, a non-finite value in an earlier redraw, in the last, or one spelled across a
    `\\r`), among plain lines or alone, give the reference framing's lines: the last state is
    cut by one regex and only lines an earlier redraw may hide a NaN in take the list path."""
    padding = PLAIN * ROWS if large else b""
    data = padding + b"".join(line + b"\n" for line in lines) + padding
    assert lines_to_series(data).to_list() == reference_lines_to_series(data).to_list()


def test_the_hint_words_are_in_every_line_the_hint_matches() -> None:
    """The hint's regex reads only the lines holding `nan` or `inf` (ASCII case aside): its
    `(?i)` folds no character outside ASCII to one of their letters, so that pass drops no
    line the regex matches, and `_hinted` picks the rows the regex alone picks."""
    others = pl.Series([chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000])
    letters = "".join(sorted(set("".join(_HINT_WORDS))))
    assert not others.str.contains(f"(?i)^[{letters}]$").any()
    said = ["loss: NaN", "grad_norm=INF", "Loss=Inf", "norm: -nan", "loss nan", "LOSS: nAn"]
    lines = pl.Series([f"  0%|   | 1/20\r{line}\r{{'loss': 1.5}}" for line in said])
    lines = pl.concat([lines, pl.Series(["loss: 1.5\rnorm 2", "nan\rinf\rx", "Loss ∞\r1"])])
    lines = lines.alias("text")
    assert lines.head(len(said)).str.contains(_NONFINITE_HINT).all()
    regex_only = lines.str.contains(_NONFINITE_HINT).arg_true()
    assert _hinted(lines).to_list() == regex_only.head(len(said)).to_list() == list(range(6))
