"""Shared test helpers: sample discovery and expectation parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def sample_logs() -> list[Path]:
    """Every annotated sample log (one with an `.expect` file beside it)."""
    return sorted(p for p in SAMPLES.rglob("*.log") if p.with_name(p.name + ".expect").exists())


def expected_alerts(log: Path) -> list[tuple[int, str, str]]:
    """The (line, rule, status) triples a sample's `.expect` file lists, in file order."""
    out = []
    for raw in log.with_name(log.name + ".expect").read_text(encoding="utf-8").splitlines():
        body = raw.split("#", 1)[0].strip()
        if body:
            line, rule, status = body.split()[:3]
            out.append((int(line), rule, status))
    return out


@pytest.fixture
def write_log(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write bytes to a log file in a temp folder and return its path as a string."""

    def write(data: bytes, name: str = "train.log") -> str:
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)

    return write
