"""Where replay's time goes: CPU seconds per stage on a slice of the realistic log.

Usage: python bench/bench_stages.py [--mb 100] [--runs 3] [--data PATH] [--rules PACK]...
                                    [--no-builtin-rules]

Takes the first --mb MB of bench/data/dflash8.log (the file bench_replay.py writes; when it is
missing, a file of --mb MB is generated instead) and times, with `time.process_time()` (CPU of
every thread of this process, polars' pool included), best of --runs:
  framing      `read_blocks` over the file (bytes to blocks of lines)
  parse        `parse_block` of every block, as `replay --format jsonl` calls it (the columns
               its rules read)
  engine       `Engine.process` of every frame, then `finish`, split into: each rule's step as
               the engine runs it (`Engine._guarded`), the GPU frame the GPU rules share
               (`log_gpu_frame`, built once per batch inside the first GPU rule's step), and the
               rest (stats, run splits, events)
Only public-ish entry points are used; where an internal has moved, its row says n/a.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

import logwatch
import logwatch.engine as engine_module
from logwatch.parse import parse_block
from logwatch.sources.framing import read_blocks

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_replay import DATA, ensure_data, head_slice  # noqa: E402 - bench/ is not a package

NA = "n/a"


class Clock:
    """CPU seconds spent inside named sections, nested ones taken out of the outer."""

    def __init__(self) -> None:
        self.spent: defaultdict[str, float] = defaultdict(float)
        self._inner: list[float] = []

    @contextmanager
    def section(self, name: str) -> Iterator[None]:
        """Add the CPU time of the block (less its inner sections) to `name`."""
        self._inner.append(0.0)
        start = time.process_time()
        try:
            yield
        finally:
            elapsed = time.process_time() - start
            inner = self._inner.pop()
            self.spent[name] += elapsed - inner
            if self._inner:
                self._inner[-1] += elapsed


def framing(path: Path) -> list[Any]:
    """The file's blocks, as replay reads them."""
    with path.open("rb") as stream:
        return list(read_blocks(stream))


def parse_all(blocks: list[Any], source: str, year: int, columns: Any) -> list[pl.DataFrame]:
    """Every block's parsed frame, with the arguments `replay --format jsonl` gives
    `parse_block` (those it takes): the columns its engine's rules read."""
    wanted: dict[str, Any] = {
        "source": source,
        "default_year": year,
        "metrics": False,
        "columns": columns,
    }
    accepted = inspect.signature(parse_block).parameters
    kwargs = {k: v for k, v in wanted.items() if k in accepted}
    frames = []
    for block in blocks:
        parsed = parse_block(block.text, first_line=block.first_line, **kwargs)
        frames.append(parsed if isinstance(parsed, pl.DataFrame) else parsed.frame)
    return frames


PARSE = "parse (parse_block, the rules' columns)"
ENGINE_REST = "engine: rest (run splits, columns a gate asks for, events)"


class TimedEngine(logwatch.Engine):
    """The engine, charging each rule step to its rule id."""

    clock: Clock

    def _guarded(self, spec: Any, source: str, state: Any, step: Any) -> Any:
        with self.clock.section(f"rule {spec.id}"):
            return super()._guarded(spec, source, state, step)


@contextmanager
def timed_gpu_frame(clock: Clock) -> Iterator[bool]:
    """Charge the engine's GPU-frame builds to their own section; yields whether it could."""
    build: Callable[..., Any] | None = getattr(engine_module, "log_gpu_frame", None)
    if build is None:
        yield False
        return

    def timed(*args: Any, **kwargs: Any) -> Any:
        with clock.section("GPU frame (log_gpu_frame, in the engine)"):
            return build(*args, **kwargs)

    engine_module.log_gpu_frame = timed  # type: ignore[attr-defined]  # restored below; it exists
    try:
        yield True
    finally:
        engine_module.log_gpu_frame = build  # type: ignore[attr-defined]  # as it was


def new_engine(rules: list[Any]) -> TimedEngine:
    """The engine `replay --format jsonl` runs (no per-source stats), where it takes that."""
    try:
        return TimedEngine(rules, stats=False)  # type: ignore[call-arg,unused-ignore]
    except TypeError:
        return TimedEngine(rules)


def run_engine(frames: list[pl.DataFrame], engine: TimedEngine, source: str, clock: Clock) -> bool:
    """All frames through the engine; whether per-rule times could be taken."""
    engine.clock = clock
    columns = getattr(engine, "columns", None)
    with clock.section(ENGINE_REST):
        for frame in frames:
            engine.process(frame, columns)
        engine.finish(source)
    return hasattr(logwatch.Engine, "_guarded")  # else the override above is never called


def one_run(path: Path, rules: list[Any]) -> tuple[dict[str, float], set[str], int]:
    """CPU seconds per stage of one pass over the file, the stages that could not be
    separated, and the number of lines."""
    clock = Clock()
    with clock.section("framing (read_blocks)"):
        blocks = framing(path)
    engine = new_engine(rules)
    columns = getattr(engine, "columns", None)
    with clock.section(PARSE):
        year = datetime.fromtimestamp(path.stat().st_mtime).year
        frames = parse_all(blocks, str(path), year, columns)
    missing = set()
    with timed_gpu_frame(clock) as gpu_ok:
        if not run_engine(frames, engine, str(path), clock):
            missing.add("rules")
    if not gpu_ok:
        missing.add("gpu")
    return clock.spent, missing, sum(f.height for f in frames)


def slice_of(data: Path, mb: int) -> Path:
    """The first `mb` MB of the realistic file, or a generated file of that size."""
    if data.exists():
        return head_slice(data, mb)
    small = data.with_name(f"{data.stem}-{mb}mb{data.suffix}")
    ensure_data(small, mb)
    return small


def report(path: Path, runs: list[tuple[dict[str, float], set[str], int]]) -> list[str]:
    """The markdown table: each stage's best CPU seconds, rules sorted by cost."""
    best: dict[str, float] = {}
    for spent, _, _ in runs:
        for name, seconds in spent.items():
            best[name] = min(best.get(name, seconds), seconds)
    missing, lines = runs[0][1], runs[0][2]
    rules = sorted((k for k in best if k.startswith("rule ")), key=lambda k: -best[k])
    rows = [
        f"{path.name}: {path.stat().st_size / 1e6:.0f} MB, {lines:,} lines; "
        f"CPU seconds (all threads), best of {len(runs)}",
        "",
        "| stage | CPU s |",
        "|---|---:|",
    ]
    for name in ("framing (read_blocks)", PARSE):
        rows.append(f"| {name} | {best[name]:.2f} |")
    gpu = "GPU frame (log_gpu_frame, in the engine)"
    if "gpu" in missing:
        rows.append(f"| {gpu} | {NA} (moved; counted in the GPU rules) |")
    else:
        rows.append(f"| {gpu} | {best.get(gpu, 0.0):.2f} |")
    rest = ENGINE_REST
    if "rules" in missing:
        rows.append(f"| rules, each | {NA} (Engine._guarded has moved; counted in the next row) |")
        rest, best["engine, all of it"] = "engine, all of it", best.pop(rest)
    else:
        rows.append(f"| rules, all {len(rules)} | {sum(best[k] for k in rules):.2f} |")
        rows += [f"| &nbsp;&nbsp;{k} | {best[k]:.2f} |" for k in rules]
    rows.append(f"| {rest} | {best[rest]:.2f} |")
    rows.append(f"| total (sum of bests) | {sum(best.values()):.2f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="size of the slice")
    parser.add_argument("--runs", type=int, default=3, help="passes (best CPU per stage)")
    parser.add_argument("--data", type=Path, default=DATA, help="the big file to slice")
    parser.add_argument("--rules", type=Path, action="append", default=[], help="a rule pack")
    parser.add_argument("--no-builtin-rules", action="store_true", help="only the --rules packs")
    args = parser.parse_args()
    path = slice_of(args.data, args.mb)
    rules = logwatch.load_rules(args.rules, builtin=not args.no_builtin_rules)
    runs = [one_run(path, rules) for _ in range(args.runs)]
    print("\n".join(report(path, runs)))


if __name__ == "__main__":
    main()
