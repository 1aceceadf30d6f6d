"""Paths of bundled samples the CLI tests use."""

from pathlib import Path

NAN_LOG = str(Path(__file__).resolve().parent.parent / "samples" / "dflash" / "train_nan.log")
