"""`replay` of a file that is mostly not text says so once, with the shares of invalid UTF-8 and
NUL bytes (as `file` would say data), besides its `N lines, no step lines` summary; text logs,
Latin-1 ones included, say nothing."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

from click.testing import CliRunner

from logwatch.cli import cli
from tests.support.paths import NAN_LOG


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def binary(path: Path) -> Path:
    """A checkpoint-like file: a NUL-padded header, then random bytes (seeded)."""
    rng = random.Random(7)
    path.write_bytes(b"\x00" * 8192 + bytes(rng.randrange(256) for _ in range(120_000)))
    return path


def test_a_binary_file_is_said_once_to_be_mostly_not_text(tmp_path: Path) -> None:
    """A 128 KiB binary: one stderr line with the shares over its first 64 KiB; the summary
    still comes, and the exit code is 0 (it was read)."""
    model = binary(tmp_path / "model.bin")
    code, out, err = run("replay", str(model))
    assert code == 0
    assert err.splitlines() == [
        f"logwatch: {model}:1: mostly not text: of its first 64 KiB, 37% invalid UTF-8, 13% NUL "
        "bytes, 9% other control bytes (`file` would say data, not text); read as lines "
        "anyway, so expect few rules to match. Check that this is the log you meant"
    ]
    assert f"{model}: " in out and "no step lines" in out


def test_a_compressed_binary_is_judged_by_what_it_holds(tmp_path: Path) -> None:
    """A gzip of the binary is decompressed first: said the same way; a gzip of a text log
    is not."""
    raw = binary(tmp_path / "model.bin").read_bytes()
    packed = tmp_path / "model.bin.gz"
    packed.write_bytes(gzip.compress(raw))
    text = tmp_path / "train.log.gz"
    text.write_bytes(gzip.compress(Path(NAN_LOG).read_bytes()))
    code, _, err = run("replay", str(packed), str(text))
    assert code == 0
    assert [line.split(": mostly")[0] for line in err.splitlines()] == [f"logwatch: {packed}:1"]


def test_text_logs_with_some_latin1_or_colours_say_nothing(tmp_path: Path) -> None:
    """A log with Latin-1 accents (invalid UTF-8, a few %), ANSI colours and tabs is text."""
    log = tmp_path / "train.log"
    line = "step=%d\tloss=1.0 \x1b[32mok\x1b[0m r\xe9sum\xe9 \n"
    log.write_bytes(b"".join((line % n).encode("latin-1") for n in range(2000)))
    code, _, err = run("replay", str(log))
    assert code == 0 and err == ""
