"""`logwatch tail -`: standard input followed live (a real pipe into a real process)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from tests.drivers.test_tail_cli import PACK
from tests.support.paths import ROOT
from tests.support.tailkit import wait_until


def test_tail_follows_standard_input_live_and_exits_0_at_its_end(tmp_path: Path) -> None:
    """Lines piped in are alerted on while the pipe is still open; at EOF (an unfinished last
    line included) tail exits 0, and the checkpoint has no entry for the pipe."""
    pack = tmp_path / "pack.toml"
    pack.write_text(PACK, encoding="utf-8")
    args = ["-", "--format", "jsonl", "--no-builtin-rules", "--gpu", "off", "--rules", str(pack)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "logwatch.cli", "tail", *args, "--state-dir", str(tmp_path / "s")],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out: list[str] = []
    pump = threading.Thread(target=lambda: out.extend(iter(proc.stdout.readline, b"")))  # type: ignore[union-attr]
    pump.start()
    try:
        proc.stdin.write(b"seq=1 ALERT\nchatter\n")
        proc.stdin.flush()
        wait_until(lambda: len(out) == 1)  # alerted before the pipe ends
        proc.stdin.write(b"seq=2 ALERT\nseq=3 ALERT")
        proc.stdin.close()
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        pump.join(timeout=10)
    err = proc.stderr.read().decode()
    proc.stdout.close()
    proc.stderr.close()
    assert code == 0, err
    events = [json.loads(line) for line in out]
    assert [(e["source"], e["line"], e["labels"]["seq"]) for e in events] == [
        ("<stdin>", 1, "1"),
        ("<stdin>", 3, "2"),
        ("<stdin>", 4, "3"),
    ]
    assert "logwatch: watching standard input" in err
    assert "<stdin>: input ended (4 lines); closed" in err
    checkpoint = json.loads((tmp_path / "s" / "checkpoint.json").read_text())
    assert "<stdin>" not in json.dumps(checkpoint)
