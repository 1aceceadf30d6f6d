"""Line framing: every byte sequence becomes numbered lines, whatever the chunking."""

from __future__ import annotations

import io
import itertools
import random

import pytest

from logwatch.sources.framing import SMALL_BLOCK_BYTES, LineFramer, lines_to_series, read_blocks


def frame_all(
    data: bytes, block_bytes: int, max_line_bytes: int = 1 << 20
) -> list[tuple[int, str]]:
    out = []
    for block in read_blocks(
        io.BytesIO(data), block_bytes=block_bytes, max_line_bytes=max_line_bytes
    ):
        out.extend(enumerate(block.text.to_list(), block.first_line))
    return out


TRICKY = (
    b"plain\n\ncrlf\r\n"
    b"bad \xff\xfe utf8\n"
    b"nul\x00byte\n"
    b"bar 10%\rbar 20%\rbar 30%\n"
    b"trailing cr\r\n"
    b"\r\n"
    b"no newline at end"
)
EXPECTED = [
    "plain",
    "",
    "crlf",
    "bad \ufffd\ufffd utf8",
    "nul\ufffdbyte",
    "bar 30%",
    "trailing cr",
    "",
    "no newline at end",
]


@pytest.mark.parametrize("block_bytes", [1, 2, 5, 13, 64, 1 << 20])
def test_tricky_bytes_frame_the_same_at_any_block_size(block_bytes: int) -> None:
    """Invalid UTF-8, NUL, CRLF, \\r redraws and a missing final newline frame identically."""
    lines = frame_all(TRICKY, block_bytes)
    assert [text for _, text in lines] == EXPECTED
    assert [n for n, _ in lines] == list(range(1, len(EXPECTED) + 1))


def test_line_numbers_match_wc_l() -> None:
    """Line numbers count `\\n` like `wc -l`; a `\\r` never starts a new line."""
    data = b"".join(
        f"line {i}\r\n".encode() if i % 3 else f"p {i}\rq {i}\n".encode() for i in range(1, 501)
    )
    lines = frame_all(data, 333)
    assert len(lines) == data.count(b"\n")
    assert lines[-1] == (500, "line 500")


@pytest.mark.parametrize("block_bytes", [4096, 1 << 20, 64 << 20])
def test_long_line_is_truncated_with_marker_and_rest_read(block_bytes: int) -> None:
    """A 50 MB line is cut to max_line_bytes with a marker; the lines after it still arrive."""
    data = b"before\n" + b"x" * (50 << 20) + b" loss nan\nafter loss 1.0\n"
    lines = frame_all(data, block_bytes, max_line_bytes=1 << 20)
    assert [n for n, _ in lines] == [1, 2, 3]
    assert lines[0][1] == "before" and lines[2][1] == "after loss 1.0"
    long_line = lines[1][1]
    assert long_line.startswith("x" * 1000)
    assert f"line truncated, {(50 << 20) + 9 - (1 << 20)} bytes dropped" in long_line
    assert len(long_line.encode()) < (1 << 20) + 100


def test_framer_holds_partial_line_until_newline() -> None:
    """Fed bytes without a newline stay pending; flush() ends the unterminated line."""
    framer = LineFramer()
    assert framer.feed(b"step 1 | lo") == b""
    assert framer.feed(b"ss 2.0\nstep 2") == b"step 1 | loss 2.0\n"
    assert framer.pending_bytes == len(b"step 2")
    assert framer.flush() == b"step 2\n"
    assert framer.flush() == b""


def test_block_offsets_cover_the_file_exactly() -> None:
    """Each block's byte span starts where the previous ended; the last ends at the file size."""
    data = b"".join(f"row {i}\n".encode() for i in range(1000)) + b"tail"
    blocks = list(read_blocks(io.BytesIO(data), block_bytes=100))
    assert blocks[0].start_offset == 0
    for prev, nxt in itertools.pairwise(blocks):
        assert prev.end_offset == nxt.start_offset
    assert blocks[-1].end_offset == len(data)


def test_only_empty_lines() -> None:
    """A block of empty lines still yields one row per line."""
    assert lines_to_series(b"\n\n\n").to_list() == ["", "", ""]


def test_ansi_colours_and_syslog_escapes_are_removed() -> None:
    """ANSI colour codes and rsyslog's `#015` / `#033` escapes never sit between key and value."""
    data = (
        b"\x1b[31mstep: 412  \x1b[32mloss:     nan  \x1b[38;2;180;60;0mgrad_norm: 1.0\x1b[39m\n"
        b"[1,mpirank:0,algo-1]<stdout>:#015 29%|##| 100/345#015{'loss': 0.45}\n"
    )
    assert lines_to_series(data).to_list() == [
        "step: 412  loss:     nan  grad_norm: 1.0",
        "[1,mpirank:0,algo-1]<stdout>:{'loss': 0.45}",
    ]


def test_redrawn_line_keeps_rank_prefix() -> None:
    """A `\\r`-redrawn line keeps the rank prefix of its first segment."""
    data = b"[rank3]: 10%|#  | loss=2.1\r 20%|## | loss=nan\n"
    assert lines_to_series(data).to_list() == ["[rank3]: 20%|## | loss=nan"]


@pytest.mark.parametrize(
    "head", [b"\x1f\x8b\x08\x00", b"x\x9c", b"x\x01", b"\x28\xb5\x2f\xfd", b"(paren) line", b"xyz"]
)
def test_blocks_that_look_compressed_are_still_lines(head: bytes) -> None:
    """A block starting with gzip / zlib / zstd magic bytes is text to frame, not to inflate."""
    data = head + b" junk\nstep 2 | loss nan\n"
    assert lines_to_series(data).to_list()[1] == "step 2 | loss nan"
    assert lines_to_series(data).len() == 2


def test_nan_drawn_over_by_a_progress_bar_is_kept() -> None:
    """A non-finite loss in an earlier redraw stays visible in front of the bar's last state."""
    data = b"E 1/100 [loss=2.31]\rE 50/100 [loss=nan]\rE 100/100 [loss=1.90]\n"
    assert lines_to_series(data).to_list() == ["E 50/100 [loss=nan] \u21b5 E 100/100 [loss=1.90]"]
    finite = b"E 1/100 [loss=2.31]\rE 100/100 [loss=1.90]\n"
    assert lines_to_series(finite).to_list() == ["E 100/100 [loss=1.90]"]
    still_nan = b"E 50/100 [loss=nan]\rE 100/100 [loss=inf]\n"
    assert lines_to_series(still_nan).to_list() == ["E 100/100 [loss=inf]"]


SMALL_PIECES = [b"a", b" ", b"\n", b"\xff", b"\xc3", b"\xa9", b"\xe2\x82", b"\xf0\x9f\x98", b"\x80"]
SMALL_PIECES += [b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00", b"\xc0\xaf", b"loss nan"]


@pytest.mark.parametrize("seed", range(40))
def test_a_small_block_splits_as_a_large_one(seed: int) -> None:
    """A few lines (live tail's usual read, split without the CSV reader) come out exactly as
    the same lines inside a block too large for that shortcut: bad UTF-8, NULs, empty lines and
    a missing final newline included."""
    rng = random.Random(seed)
    for _ in range(25):
        data = b"".join(rng.choice(SMALL_PIECES) for _ in range(rng.randint(1, 40)))
        padding = (b"" if data.endswith(b"\n") else b"\n") + b"x" * (SMALL_BLOCK_BYTES + 1) + b"\n"
        large = lines_to_series(data + padding).to_list()
        assert lines_to_series(data).to_list() == large[:-1], data
