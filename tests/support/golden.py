"""Golden replay outputs: what `logwatch replay` printed, before the speed work, for every sample
log and a seeded randomized corpus (tests/support/corpus.py). tests/test_identical.py checks that today's
code prints exactly the same bytes.

Regenerate them only when a rule or the parser changes its output on purpose:

    python tests/support/golden.py --write            # goldens from the stored corpus, clean tree only
    python tests/support/golden.py --write --corpus   # new corpus files too (after editing tests/support/corpus.py)
    python tests/support/golden.py --check            # compare only, as the test does (default)

`--write` refuses on a dirty tree (the goldens must come from a commit, named in the manifest)
unless `--force`. Files are replayed from a staging copy whose mtime is fixed (yearless
timestamps take their year from it) and under their relative names (the `source` field).

Layout of tests/data/golden/: `corpus/seed-N.log.gz` (the corpus inputs), `<file>.jsonl`
(`--format jsonl`, gzipped for the corpus), `<file>.stats.json` (`--format json`'s `stats`
for that file alone, indented), and `manifest.json`: per file the block sizes and worker
counts it is also replayed with, and the sha256 of the JSONL each gave.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: `python tests/support/golden.py`
    sys.path.insert(0, str(ROOT))

import logwatch  # noqa: E402  (after the path fix above, for script use)
from logwatch.drivers.replay import ReplayOptions  # noqa: E402
from logwatch.drivers.replay import replay as replay_paths  # noqa: E402
from logwatch.rules.loader import RuleSpec  # noqa: E402
from tests.support.corpus import corpus  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden"
MANIFEST = GOLDEN / "manifest.json"
CORPUS_SEEDS = (1, 2, 3)
CORPUS_LINES = 1500
MTIME = 1_780_000_000  # 2026-05-28: the year yearless lines take when no dated line came before
DEFAULT = "default"  # the command's own options: one 8 MiB block, workers as on this machine
ONE_LINE = 1  # block_bytes=1: every block is one line
ONE_LINE_FILES = ("samples/dflash/train_restarted.log",)  # 23 lines: 23 blocks


@dataclass(frozen=True, slots=True)
class Variant:
    """One way to replay a file: its block size and parse threads."""

    block_bytes: int
    workers: int

    @property
    def label(self) -> str:
        return f"block={self.block_bytes},workers={self.workers}"

    @property
    def options(self) -> ReplayOptions:
        return ReplayOptions(block_bytes=self.block_bytes, workers=self.workers)


def sample_names() -> list[str]:
    """Every sample log, as a path relative to the repository root."""
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "samples").rglob("*.log"))


def corpus_names() -> list[str]:
    return [f"corpus/seed-{seed}.log" for seed in CORPUS_SEEDS]


def golden_path(name: str, suffix: str) -> Path:
    """Where a file's golden output lives; the corpus's JSONL is gzipped (it is the big one)."""
    gz = ".gz" if name.startswith("corpus/") and suffix == ".jsonl" else ""
    return GOLDEN / f"{name}{suffix}{gz}"


def read_bytes(path: Path) -> bytes:
    """A golden file's bytes, gunzipped when it is a `.gz`."""
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def read_text(path: Path) -> str:
    return read_bytes(path).decode("utf-8")


def write_corpus() -> None:
    """The corpus inputs, regenerated from their seeds (gzip with no name or time: stable bytes)."""
    for seed, name in zip(CORPUS_SEEDS, corpus_names(), strict=True):
        path = GOLDEN / f"{name}.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(corpus(seed, CORPUS_LINES), 9, mtime=0))


def stage(tree: Path) -> None:
    """Copy every input under `tree` by its relative name, with a fixed mtime."""
    for name in sample_names():
        dest = tree / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, dest)
        os.utime(dest, (MTIME, MTIME))
    for name in corpus_names():
        dest = tree / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(read_bytes(GOLDEN / f"{name}.gz"))
        os.utime(dest, (MTIME, MTIME))


def variants(name: str, size: int) -> list[Variant]:
    """Block sizes a file is replayed with besides the default, seeded by the file's name (stable
    cuts): a sample gets one random cut into 2 to 4 blocks (split in Python, as a live tail's
    are), on 1 or 2 workers, and 1-line blocks when it is in ONE_LINE_FILES; a corpus file a
    random cut into 3 to 5 blocks on 1 worker and one over 64 KiB (split by polars' reader) on 2.
    A block costs the rules tens of milliseconds whatever its size: this keeps the test short."""
    rng = random.Random(name)
    if not name.startswith("corpus/"):
        out = [Variant(rng.randint(max(size // 4, 64), max(size // 2, 128)), rng.choice((1, 2)))]
        return [*out, Variant(ONE_LINE, 2)] if name in ONE_LINE_FILES else out
    small = min(rng.randint(size // 5, size // 3), 60 << 10)
    return [Variant(small, 1), Variant(rng.randint(65 << 10, max(size // 2, 66 << 10)), 2)]


def replay_jsonl(
    name: str, variant: Variant, rules: list[RuleSpec], *, shapes: bool = True, stats: bool = True
) -> str:
    """The JSONL `replay --format jsonl` prints, from the library with `variant`'s options
    (`shapes=False`: the general parse path alone; `stats=False`: no per-source summary, as
    the command itself runs it)."""
    options = dataclasses.replace(variant.options, shapes=shapes, stats=stats)
    result = replay_paths([name], rules, options=options)
    return "".join(event.to_jsonl() + "\n" for event in result.events)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cli(name: str, fmt: str, tree: Path) -> str:
    """`logwatch replay NAME --format FMT` in `tree`, as a user runs it (no config file read)."""
    env = {k: v for k, v in os.environ.items() if k != "LOGWATCH_CONFIG"}
    env["XDG_CONFIG_HOME"] = str(tree / ".config")
    command = [sys.executable, "-m", "logwatch", "replay", name, "--format", fmt]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def write(*, force: bool, new_corpus: bool) -> None:
    """Every golden from this tree's code."""
    dirty = _git("status", "--porcelain", "--", ".", ":!tests/data/golden")  # all but the outputs
    if dirty and not force:
        raise SystemExit(
            "tests/support/golden.py --write: the tree has uncommitted changes, so the goldens would come "
            "from no commit: commit (or use --force, and say why in the commit)\n" + dirty
        )
    if new_corpus:
        write_corpus()
    rules = logwatch.load_rules()
    manifest: dict[str, object] = {
        "commit": _git("rev-parse", "HEAD") + (" (dirty)" if dirty else ""),
        "logwatch_tree": _git("rev-parse", "HEAD:logwatch"),  # the code the goldens came from
        "corpus": {"seeds": list(CORPUS_SEEDS), "lines": CORPUS_LINES},
        "files": {},
    }
    files: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="logwatch-golden-") as tmp:
        tree = Path(tmp)
        stage(tree)
        cwd = Path.cwd()
        os.chdir(tree)
        try:
            for name in sample_names() + corpus_names():
                jsonl = cli(name, "jsonl", tree)
                stats = json.loads(cli(name, "json", tree))["stats"]
                _write(golden_path(name, ".jsonl"), jsonl)
                _write(golden_path(name, ".stats.json"), json.dumps(stats, indent=2) + "\n")
                rows = []
                for variant in variants(name, (tree / name).stat().st_size):
                    out = replay_jsonl(name, variant, rules)
                    rows.append(
                        {
                            "block_bytes": variant.block_bytes,
                            "workers": variant.workers,
                            "sha256": digest(out),
                            "same_as_default": out == jsonl,
                        }
                    )
                files[name] = {"events": jsonl.count("\n"), "variants": rows}
                print(f"{name}: {jsonl.count(chr(10))} events", file=sys.stderr)
        finally:
            os.chdir(cwd)
    manifest["files"] = files
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data, 9, mtime=0) if path.suffix == ".gz" else data)


def check() -> int:
    """Compare today's output with the goldens; the number of files that differ."""
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    rules = logwatch.load_rules()
    bad = 0
    with tempfile.TemporaryDirectory(prefix="logwatch-golden-") as tmp:
        tree = Path(tmp)
        stage(tree)
        cwd = Path.cwd()
        os.chdir(tree)
        try:
            for name, entry in manifest["files"].items():
                want = read_text(golden_path(name, ".jsonl"))
                got = [replay_jsonl(name, Variant(8 << 20, 2), rules)]
                got += [
                    replay_jsonl(name, Variant(v["block_bytes"], v["workers"]), rules)
                    for v in entry["variants"]
                ]
                wanted = [digest(want)] + [v["sha256"] for v in entry["variants"]]
                if [digest(g) for g in got] != wanted:
                    bad += 1
                    print(f"{name}: differs from the golden", file=sys.stderr)
        finally:
            os.chdir(cwd)
    count = len(manifest["files"])
    print(f"{count - bad} of {count} files replay as their goldens", file=sys.stderr)
    return bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the goldens")
    mode.add_argument("--check", action="store_true", help="compare only (the default)")
    parser.add_argument("--corpus", action="store_true", help="with --write: new corpus files")
    parser.add_argument("--force", action="store_true", help="with --write: allow a dirty tree")
    args = parser.parse_args()
    if args.write:
        write(force=args.force, new_corpus=args.corpus)
    else:
        sys.exit(1 if check() else 0)


if __name__ == "__main__":
    main()
