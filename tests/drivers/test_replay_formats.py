"""`logwatch replay` on UTF-16 text and bzip2 / xz / zstd logs, files and standard input."""

from __future__ import annotations

import bz2
import functools
import io
import json
import lzma
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.sources.streams import DecompressStream, Utf16Stream

NAN_LOG = (
    "2026-11-28 14:09:05,117 INFO [train] step 1402/200000 | loss 2.3 | grad_norm 1.1\n"
    "2026-11-28 14:09:09,201 INFO [train] step 1403/200000 | loss nan | grad_norm 1.2\n"
    "2026-11-28 14:09:13,300 INFO [train] step 1404/200000 | loss 2.2 | grad_norm 1.0\n"
)


def lines_and_status(stdout: str) -> list[tuple[int, str]]:
    return [(e["line"], e["status"]) for e in map(json.loads, stdout.splitlines())]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be-bom"])
def test_utf16_log_alerts_with_right_line_numbers(tmp_path: Path, encoding: str) -> None:
    """A PowerShell-style UTF-16 log (either byte order, with BOM) alerts like its UTF-8 form."""
    data = (
        b"\xfe\xff" + NAN_LOG.encode("utf-16-be")
        if encoding == "utf-16-be-bom"
        else NAN_LOG.encode("utf-16")
    )
    path = tmp_path / "u16.log"
    path.write_bytes(data)
    result = CliRunner().invoke(cli, ["replay", str(path), "--format", "jsonl"])
    assert result.exit_code == 0
    assert lines_and_status(result.stdout) == [(2, "firing"), (3, "resolved")]
    text = CliRunner().invoke(cli, ["replay", str(path)]).stdout
    assert f"{path}: 3 lines, 3 step lines (1402..1404)" in text


def test_utf16_stream_keeps_pairs_split_across_reads() -> None:
    """Odd-sized reads that cut code units and surrogate pairs still decode exactly."""
    text = "loss 🔥 nan\nstep 2 é\n" * 50
    stream = Utf16Stream(io.BytesIO(text.encode("utf-16")), chunk_bytes=3)
    out = b"".join(iter(lambda: stream.read(3), b""))
    assert out.decode("utf-8") == text


@pytest.mark.parametrize("fmt", ["bz2", "xz"])
def test_bzip2_and_xz_logs_are_read_transparently(tmp_path: Path, fmt: str) -> None:
    """Rotated .bz2 / .xz logs (two streams concatenated, too) replay like the plain file."""
    compress = bz2.compress if fmt == "bz2" else lzma.compress
    path = tmp_path / f"train.log.{fmt}"
    path.write_bytes(compress(NAN_LOG.encode()) + compress(NAN_LOG.encode()))
    result = CliRunner().invoke(cli, ["replay", str(path), "--format", "jsonl"])
    assert result.exit_code == 0
    assert lines_and_status(result.stdout) == [
        (2, "firing"),
        (3, "resolved"),
        (5, "firing"),
        (6, "resolved"),
    ]


@pytest.mark.parametrize("fmt", ["bz2", "xz"])
def test_compressed_standard_input_is_decompressed(fmt: str) -> None:
    """`cat x.log.bz2 | logwatch replay -` decompresses what it reads from standard input."""
    compress = bz2.compress if fmt == "bz2" else lzma.compress
    result = CliRunner().invoke(
        cli, ["replay", "-", "--format", "jsonl"], input=compress(NAN_LOG.encode())
    )
    assert result.exit_code == 0
    assert lines_and_status(result.stdout) == [(2, "firing"), (3, "resolved")]


@pytest.mark.parametrize("fmt", ["bz2", "xz"])
def test_cut_off_bzip2_and_xz_report_what_they_read_then_fail(tmp_path: Path, fmt: str) -> None:
    """A truncated .bz2 / .xz: the alerts before the damage are printed, then one line, exit 2."""
    # xz's fastest preset: its default one takes seconds on these 7 MB, for the same format
    compress = bz2.compress if fmt == "bz2" else functools.partial(lzma.compress, preset=0)
    body = NAN_LOG + "".join(f"step {i} | loss 2.0 | {i * 7919}\n" for i in range(200000))
    data = compress(body.encode())
    path = tmp_path / f"cut.log.{fmt}"
    path.write_bytes(data[: len(data) // 2])
    result = CliRunner().invoke(cli, ["replay", str(path), "--format", "jsonl"])
    assert result.exit_code == 2
    assert lines_and_status(result.stdout)[:2] == [(2, "firing"), (3, "resolved")]
    assert result.stderr.startswith(f"Error: {path}: damaged compressed data (")


def test_decompress_stream_hands_out_everything_before_the_cut() -> None:
    """Every byte that decompresses before a cut-off end comes out before the EOFError."""
    body = "".join(f"line {i}\n" for i in range(100000)).encode()
    data = bz2.compress(body)
    stream = DecompressStream(io.BytesIO(data[:-20]), bz2.BZ2Decompressor, chunk_bytes=4096)
    got = bytearray()
    with pytest.raises(EOFError):
        while chunk := stream.read(1000):
            got += chunk
    assert len(got) > len(body) // 2 and body.startswith(bytes(got))


def test_zstd_file_is_refused_with_the_command_that_reads_it(tmp_path: Path) -> None:
    """A .zst log is not read as garbage: exit 2 with the zstd pipe that works."""
    path = tmp_path / "train.log.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 64)
    result = CliRunner().invoke(cli, ["replay", str(path)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: {path}: zstd-compressed; decompress it: `zstd -dc {path} | logwatch replay -`\n"
    )


def test_zstd_on_standard_input_is_refused() -> None:
    """zstd bytes piped into `logwatch replay -` get the same refusal."""
    result = CliRunner().invoke(cli, ["replay", "-"], input=b"\x28\xb5\x2f\xfd" + b"\x00" * 64)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: -: zstd-compressed; decompress it: `zstd -dc ")
