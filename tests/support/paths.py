"""Where things are: the repository root, the samples, the bundled logs the tests name."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
NAN_LOG = str(SAMPLES / "dflash" / "train_nan.log")
