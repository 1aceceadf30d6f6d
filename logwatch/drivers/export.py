"""`replay --export`: the parsed frames as Parquet, in bounded memory.

Each block goes to a part file as it passes; at the end the parts are streamed into one file (or
one file per source in a folder), so a 700 MB log never sits in memory whole.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import polars as pl

from logwatch.errors import InputError
from logwatch.parse import SCHEMA


def exports_to_folder(target: str) -> bool:
    """`--export DIR/` or an existing folder: one file per source."""
    return target.endswith(("/", "\\")) or Path(target).is_dir()


class FrameExport:
    """Collects a replay's frames (call it per block) and writes them on `close()`."""

    def __init__(self, target: str) -> None:
        self.target = Path(target)
        self.per_source = exports_to_folder(target)
        parent = self.target if self.per_source else self.target.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self._parts = Path(tempfile.mkdtemp(prefix=".logwatch-export-", dir=parent))
        except OSError as exc:
            raise InputError(
                f"--export {target}: cannot write there: {exc.strerror or exc} "
                "(choose a writable path)"
            ) from None
        self._files: dict[str, list[Path]] = {}

    def __call__(self, frame: pl.DataFrame) -> None:
        if frame.is_empty():
            return
        source = str(frame.item(0, "source"))
        parts = self._files.setdefault(source if self.per_source else "", [])
        part = self._parts / f"{len(self._files):06d}-{len(parts):09d}.parquet"
        frame.select(list(SCHEMA)).write_parquet(part)
        parts.append(part)

    def close(self) -> list[Path]:
        """Write the export (one file, or one per source); the paths written."""
        try:
            if not self.per_source:
                _join(self._files.get("", []), self.target)
                return [self.target]
            written: list[Path] = []
            for source, parts in self._files.items():
                out = self.target / _file_name(source, {p.name for p in written})
                _join(parts, out)
                written.append(out)
            return written
        finally:
            shutil.rmtree(self._parts, ignore_errors=True)

    def abort(self) -> None:
        """Drop the parts written so far (the replay failed)."""
        shutil.rmtree(self._parts, ignore_errors=True)


def _join(parts: list[Path], out: Path) -> None:
    if not parts:
        pl.DataFrame(schema=SCHEMA).write_parquet(out)
        return
    pl.scan_parquet(parts).sink_parquet(out)


def _file_name(source: str, taken: set[str]) -> str:
    """`runs/a/train.log` -> `train.log.parquet`; a second `train.log` -> `train.log-2.parquet`."""
    base = re.sub(r"[^\w.-]+", "_", Path(source).name) or "stdin"
    base = "stdin" if source == "-" else base
    name, n = f"{base}.parquet", 1
    while name in taken:
        n += 1
        name = f"{base}-{n}.parquet"
    return name


def write_events(frame: pl.DataFrame, target: str) -> None:
    """`--export-events FILE`: the alert events (`ReplayResult.events_frame()`) as Parquet."""
    try:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(target)
    except OSError as exc:
        raise InputError(
            f"--export-events {target}: cannot write: {exc.strerror or exc} (choose a writable path)"
        ) from None
