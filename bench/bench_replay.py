"""Replay throughput against the tools a user would try instead, measured in one run, same file.

Usage: python bench/bench_replay.py [--mb 730] [--runs 2] [--slice-mb 100] [--markdown] [--data PATH]

Generates bench/data/dflash8.log (the spec's run: 8 GPUs per snapshot, one line in ten a
snapshot, NaN episodes, starvation, NVML-off stretches; >= --mb MB) if it is missing or smaller,
reads it once to warm the page cache, then times each of these as a subprocess (output to a file):
  grep -c loss      the floor: a literal scan
  python loop       one regex per line, counting NaN losses and their episodes (the naive tool)
  lnav              headless SQL: count(*) of lines whose text REGEXP-matches a NaN/Inf loss
  SEC               one Single rule matching NaN/Inf loss lines, one pass (--notail)
  logwatch          `replay --format jsonl`, all built-in rules
  logwatch nan-loss the same with a one-rule pack (nan-loss, copied from the training pack)
logwatch's own modules are byte-compiled first, as an install has them. Wall time is the best
of --runs (rounds interleave the commands), peak RSS from wait4, and each ratio is to grep's time
in the same run. Every command's findings are checked against the
Python loop's count (NaN lines for lnav and SEC, NaN episodes for logwatch's nan-loss firings),
so a broken run cannot pass as fast: a mismatch is marked in the table and the exit status is 1.
--slice-mb N also measures the file's first N MB (cut at a line end) for a second column.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "dflash8.log"
TRAINING_PACK = HERE.parent / "rules" / "training.toml"
NAN_LOSS = r"loss[ =:]+[-+]?(?i:nan|inf)"  # Python, PCRE (lnav) and Perl (SEC) read it alike
MISSING = "not installed: apt-get install lnav sec"
PYLOOP = r"""
import re, sys
rx = re.compile(r"loss[ =:]+(\S+)")
lines = episodes = 0
bad = False
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for line in f:
        m = rx.search(line)
        if m:
            now = m.group(1).lower().startswith(("nan", "inf", "-inf", "+inf"))
            lines += now
            episodes += now and not bad
            bad = now
print(lines, episodes)
"""
SEC_RULE = f"""type=Single
ptype=RegExp
pattern={NAN_LOSS}
desc=non-finite loss
action=write - $0
"""


@dataclass(frozen=True, slots=True)
class Tool:
    """One command to time, and how to read what it found from its standard output."""

    name: str
    cmd: list[str] | None  # None: not installed
    found: Callable[[bytes], dict[str, int]]
    env: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Result:
    """Best wall seconds, peak RSS bytes and findings of one tool on one file."""

    wall_s: float
    rss_bytes: int
    found: dict[str, int]


def run(tool: Tool, cmd: list[str]) -> Result:
    """Wall seconds, peak RSS (bytes) and findings of one subprocess."""
    # Output goes to a real file: GNU grep stops at the first match when stdout is /dev/null.
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, env=tool.env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        stdout = out.read()
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"bench: {tool.name} failed with status {status}: {' '.join(cmd)}")
    try:
        found = tool.found(stdout)
    except (IndexError, ValueError, KeyError) as exc:
        why = f"bench: cannot read what {tool.name} found ({exc!r}): {stdout[-300:]!r}"
        raise SystemExit(why) from None
    return Result(wall, usage.ru_maxrss * 1024, found)


def numbers(stdout: bytes) -> list[int]:
    """The integers in a command's output, in order."""
    return [int(n) for n in re.findall(rb"\d+", stdout)]


def events(stdout: bytes) -> dict[str, int]:
    """logwatch JSONL: events in all, and nan-loss firings."""
    counts: Counter[str] = Counter()
    for line in stdout.splitlines():
        event = json.loads(line)
        counts["events"] += 1
        if event["rule"] == "nan-loss" and event["status"] == "firing":
            counts["nan-loss firings"] += 1
    return {"events": counts["events"], "nan-loss firings": counts["nan-loss firings"]}


def nan_loss_pack(folder: Path) -> Path:
    """A pack with only the training pack's nan-loss rule, copied as written."""
    chunks = re.split(r"(?m)^(?=\[\[rule\]\]\s*$)", TRAINING_PACK.read_text(encoding="utf-8"))
    rule = next(c for c in chunks if re.search(r'(?m)^id = "nan-loss"$', c))
    ids = [r["id"] for r in tomllib.loads(rule)["rule"]]
    if ids != ["nan-loss"]:
        raise SystemExit(f"bench: could not cut nan-loss out of {TRAINING_PACK} (got {ids})")
    pack = folder / "nan-loss.toml"
    pack.write_text(rule, encoding="utf-8")
    return pack


def tools(work: Path) -> list[Tool]:
    """Every command of the comparison, in table order."""
    logwatch = str(Path(sys.executable).with_name("logwatch"))
    replay = [logwatch, "replay", "{file}", "--format", "jsonl"]
    rules = work / "nan-loss.sec"
    rules.write_text(SEC_RULE, encoding="utf-8")
    home = work / "home"  # lnav writes its config dir under $HOME: keep the user's untouched
    home.mkdir()
    query = f";SELECT count(*) FROM all_logs WHERE log_text REGEXP '{NAN_LOSS}'"
    lnav = ["lnav", "-n", "-c", query, "{file}"] if shutil.which("lnav") else None
    sec = ["sec", f"--conf={rules}", "--input={file}", "--notail"] if shutil.which("sec") else None
    return [
        Tool("grep -c loss", ["grep", "-c", "loss", "{file}"], lambda o: {"lines": numbers(o)[0]}),
        Tool(
            "python regex loop",
            [sys.executable, "-c", PYLOOP, "{file}"],
            lambda o: dict(zip(("NaN lines", "episodes"), numbers(o), strict=True)),
        ),
        Tool(
            "lnav, SQL REGEXP",
            lnav,
            lambda o: {"NaN lines": numbers(o)[-1]},
            env={**os.environ, "HOME": str(home)},
        ),
        Tool("SEC", sec, lambda o: {"NaN lines": len(o.splitlines())}),
        Tool(
            "logwatch, nan-loss rule only",
            [*replay, "--no-builtin-rules", "--rules", str(nan_loss_pack(work))],
            events,
        ),
        Tool("logwatch, all rules", replay, events),
    ]


def measure(file: Path, tools: list[Tool], runs: int, *, quiet: bool) -> dict[str, Result | None]:
    """Each installed tool's best result on `file`; grep gets at least three tries (it is short)."""
    warm(file)
    tries: dict[str, list[Result]] = {t.name: [] for t in tools}
    for round_ in range(max(runs, 3)):
        for tool in tools:
            if tool.cmd is None or (round_ >= runs and tool.name != "grep -c loss"):
                continue
            cmd = [part.replace("{file}", str(file)) for part in tool.cmd]
            tries[tool.name].append(run(tool, cmd))
            if not quiet:
                wall = tries[tool.name][-1].wall_s
                print(f"  {file.name} {tool.name}: {wall:.2f} s", file=sys.stderr)
    return {name: best(results) if results else None for name, results in tries.items()}


def best(results: list[Result]) -> Result:
    """The fastest try's wall, the largest RSS; every try must have found the same."""
    if any(r.found != results[0].found for r in results):
        raise SystemExit(f"bench: tries disagree on what they found: {[r.found for r in results]}")
    return Result(
        min(r.wall_s for r in results), max(r.rss_bytes for r in results), results[0].found
    )


def check(results: dict[str, Result | None]) -> dict[str, str]:
    """Per tool, what is wrong with its findings against the Python loop's (empty when right)."""
    truth = results["python regex loop"]
    assert truth is not None
    wrong: dict[str, str] = {}
    if truth.found["episodes"] == 0:
        wrong["python regex loop"] = "no NaN episode in this file: the checks below prove nothing"
    for name, result in results.items():
        if result is None:
            continue
        if "NaN lines" in result.found and result.found["NaN lines"] != truth.found["NaN lines"]:
            wrong[name] = (
                f"found {result.found['NaN lines']} NaN lines, expected {truth.found['NaN lines']}"
            )
        firings = result.found.get("nan-loss firings")
        if firings is not None and firings != truth.found["episodes"]:
            wrong[name] = f"{firings} nan-loss firings, expected {truth.found['episodes']} episodes"
    return wrong


def warm(file: Path) -> None:
    """Read the file once so every command starts on a warm page cache."""
    with file.open("rb") as f:
        while f.read(1 << 24):
            pass


def head_slice(file: Path, mb: int) -> Path:
    """The first `mb` MB of `file`, cut at a line end, as its own file beside it (reused)."""
    out = file.with_name(f"{file.stem}-head{mb}{file.suffix}")
    if out.exists() and out.stat().st_mtime >= file.stat().st_mtime:
        return out
    with file.open("rb") as src:
        head = src.read(mb * 1_000_000)
        head += src.readline()
    out.write_bytes(head)
    return out


def count_lines(file: Path) -> int:
    with file.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))


def table(file: Path, results: dict[str, Result | None], wrong: dict[str, str]) -> list[str]:
    """One file's markdown table: wall, x grep, MB/s, peak RSS and what each tool found."""
    size, lines = file.stat().st_size, count_lines(file)
    grep = results["grep -c loss"]
    assert grep is not None
    rows = [
        f"file {file.name}: {size / 1e6:.0f} MB, {lines:,} lines (warm page cache)",
        "",
        "| command | wall s | x grep | MB/s | peak RSS MB | found |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, r in results.items():
        if r is None:
            rows.append(f"| {name} | | | | | {MISSING} |")
            continue
        found = ", ".join(f"{v:,} {k}" for k, v in r.found.items())
        if name in wrong:
            found = f"**WRONG: {wrong[name]}**"
        rows.append(
            f"| {name} | {r.wall_s:.2f} | {r.wall_s / grep.wall_s:.1f} | {size / r.wall_s / 1e6:.0f} "
            f"| {r.rss_bytes / 1e6:.0f} | {found} |"
        )
    return rows


def summary(columns: dict[str, dict[str, Result | None]]) -> list[str]:
    """The issue's table: each tool as a multiple of grep's time, per file."""
    names = list(next(iter(columns.values())))
    rows = [
        "| | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for name in names[1:]:
        cells = []
        for results in columns.values():
            r, grep = results[name], results["grep -c loss"]
            assert grep is not None
            cells.append(MISSING if r is None else f"{r.wall_s / grep.wall_s:.1f}")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def label(file: Path, *, head: bool) -> str:
    """A summary column's title: the file's size, and whether it is the big file's head."""
    return f"{file.stat().st_size / 1e6:.0f} MB" + (" slice (head)" if head else "")


def versions() -> str:
    """Which lnav, SEC and polars the numbers are for."""
    found = []
    for cmd in (["lnav", "-V"], ["sec", "--version"]):
        if shutil.which(cmd[0]):
            out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
            found.append(out.splitlines()[0].strip() if out else cmd[0])
    import polars

    return " · ".join([*found, f"polars {polars.__version__}"])


def ensure_data(data: Path, mb: int) -> None:
    """Generate the realistic file when it is missing (the default one also when smaller than
    asked; a file given with --data is never overwritten)."""
    if data.exists() and (data != DATA or data.stat().st_size >= mb * 1_000_000):
        return
    print(f"bench: generating {data} ({mb} MB)", file=sys.stderr)
    gen = [sys.executable, str(HERE / "gen_dflash.py"), str(data), "--mb", str(mb)]
    subprocess.run(gen, check=True)


def compiled() -> None:
    """Byte-compile the logwatch package under test, as `pip install` does: a checkout run with
    PYTHONDONTWRITEBYTECODE (this machine sets it) would otherwise compile every module from
    source at each start, about 0.15 s no installed copy pays."""
    import compileall

    import logwatch

    compileall.compile_dir(Path(logwatch.__file__).parent, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=730, help="size of the generated file")
    parser.add_argument("--runs", type=int, default=2, help="tries per command (best wall)")
    parser.add_argument("--slice-mb", type=int, default=0, help="also measure the file's head")
    parser.add_argument(
        "--markdown", action="store_true", help="no progress on stderr, only the report"
    )
    parser.add_argument("--data", type=Path, default=DATA, help="the log (generated if missing)")
    args = parser.parse_args()
    ensure_data(args.data, args.mb)
    compiled()
    files = [args.data]
    if args.slice_mb:
        files.append(head_slice(args.data, args.slice_mb))
    with tempfile.TemporaryDirectory(prefix="bench_replay.") as work:
        commands = tools(Path(work))
        columns = {
            label(f, head=f != args.data): measure(f, commands, args.runs, quiet=args.markdown)
            for f in files
        }
    report = [
        f"{date.today()} · {platform.machine()} · {os.cpu_count()} cores · "
        f"Python {platform.python_version()} · {versions()}",
        "",
    ]
    problems = {}
    for file, results in zip(files, columns.values(), strict=True):
        problems[file.name] = check(results)
        report += [*table(file, results, problems[file.name]), ""]
    report += ["As multiples of `grep -c loss` on the same file, same run:", "", *summary(columns)]
    print("\n".join(report))
    if any(problems.values()):
        raise SystemExit(f"bench: wrong findings: {problems}")


if __name__ == "__main__":
    main()
