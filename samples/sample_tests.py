"""Annotated samples as `logwatch test` files: `X.log` beside `X.test.toml`, the alerts replay must
give for it and nothing else (`strict = true`), the same in every block size.

`render()` is what the sample generators write; run this file to convert any old-style
`X.log.expect` (`LINE RULE STATUS  # why` lines) left beside a sample:
    python samples/sample_tests.py
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
BLOCKS = [1, 4096]


def render(log_name: str, expect: Sequence[tuple[int, str, str, str]], notes: Sequence[str] = ()) -> str:
    """The test file of one sample: `expect` holds (line, rule, status, why) in file order."""
    head = [f"# Alerts `logwatch replay {log_name}` must give, and nothing else (strict).", *notes]
    lines = [f"# {note}" if not note.startswith("#") else note for note in head]
    lines += [
        "",
        "[[test]]",
        f"name = {json.dumps(log_name)}",
        f"input_file = {json.dumps(log_name)}",
        "strict = true",
        f"blocks = {json.dumps(BLOCKS)}",
    ]
    for line, rule, status, why in expect:
        comment = f"  # {why}" if why else ""
        lines += ["", f"[[test.expect]]{comment}", f'rule = "{rule}"', f'status = "{status}"', f"line = {line}"]
    return "\n".join(lines) + "\n"


def convert(expect_file: Path) -> Path:
    """Write `X.test.toml` from `X.log.expect` and remove the old file."""
    notes, expect = [], []
    for raw in expect_file.read_text(encoding="utf-8").splitlines():
        body, _, why = raw.partition("#")
        if not body.strip():
            if raw.strip() and "LINE RULE STATUS" not in raw and "must produce" not in raw:
                notes.append(raw.strip())
            continue
        line, rule, status = body.split()[:3]
        expect.append((int(line), rule, status, why.strip()))
    log_name = expect_file.name.removesuffix(".expect")
    target = expect_file.with_name(log_name.removesuffix(".log") + ".test.toml")
    target.write_text(render(log_name, expect, notes), encoding="utf-8")
    expect_file.unlink()
    return target


if __name__ == "__main__":
    for old in sorted(HERE.rglob("*.log.expect")):
        print(f"{old} -> {convert(old)}")
