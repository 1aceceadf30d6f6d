"""bench/gen_dflash.py writes the files issue 30's benchmark claims to measure."""

from __future__ import annotations

import hashlib
import itertools
import random
import re
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

import logwatch
from tests.support.paths import load_bench

BENCH = Path(__file__).resolve().parents[2] / "bench"
NONFINITE = re.compile(r"\bloss'?[ =:]+[-+]?(?i:nan|inf)")  # the bench's NAN_LOSS


gen = load_bench("gen_dflash")


@pytest.fixture
def short_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of about 3 000 lines instead of 30 000, so that a few MB hold a dozen runs."""
    monkeypatch.setattr(gen, "RUN_LINES", 3000)


def _family(line: str) -> str:
    for family, marker in (
        ("step", "INFO [train] step "),
        ("hsq", "INFO [hsq] q_hsb="),
        ("data", " [data] "),
        ("snapshot", "INFO [wandb] snapshot "),
        ("warning", "WARNING [train] grad clipping active: norm "),
    ):
        if marker in line:
            return family
    return "header"


def _runs(count: int) -> list[list[str]]:
    chunks = itertools.islice(gen.realistic(random.Random(42)), count)
    return [chunk.splitlines() for chunk in chunks]


@pytest.mark.usefixtures("short_runs")
def test_realistic_dflash_mix() -> None:
    """By lines 55/20/12/10/3 % step, queue, data, snapshot and warning lines; snapshots about
    40 % of the bytes; a `run start:` header opening each run; one run in ten without gpu/ keys."""
    runs = _runs(12)
    lines = [line for run in runs for line in run]
    share = {k: v / len(lines) for k, v in Counter(map(_family, lines)).items()}
    for family, want in {"step": 0.55, "hsq": 0.20, "data": 0.12, "snapshot": 0.10}.items():
        assert share[family] == pytest.approx(want, abs=0.015), family
    assert share["warning"] == pytest.approx(0.03, abs=0.005)
    snapshot_bytes = sum(len(line) + 1 for line in lines if _family(line) == "snapshot")
    assert 0.35 <= snapshot_bytes / sum(len(line) + 1 for line in lines) <= 0.45
    assert [run[0].split(" INFO ")[1][:18] for run in runs] == ["[train] run start:"] * 12
    without_gpus = [i for i, run in enumerate(runs) if not any("gpu/0/util=" in x for x in run)]
    assert without_gpus == [6]
    assert any("NVML unavailable" in line for line in runs[6][:4])


@pytest.mark.usefixtures("short_runs")
def test_realistic_dflash_nan_episodes() -> None:
    """About 20 % of the step lines carry a non-finite loss, in one long episode per diverged
    run (one in four), which lasts until the restart; healthy runs have none."""
    runs = _runs(12)
    steps = [[x for x in run if _family(x) == "step"] for run in runs]
    bad = [[bool(NONFINITE.search(x)) for x in run] for run in steps]
    assert sum(map(sum, bad)) / sum(map(len, bad)) == pytest.approx(0.20, abs=0.04)
    diverged = [i for i, flags in enumerate(bad) if any(flags)]
    assert diverged == [1, 5, 9]
    for i in diverged:
        first = bad[i].index(True)
        assert all(bad[i][first:]) and first > 0  # one episode, to the end of the run
        assert len(bad[i]) - first > 1000


@pytest.mark.usefixtures("short_runs")
def test_realistic_dflash_starvation_streaks() -> None:
    """Each run has a streak of queue reports with only the longest bucket filled."""
    for run in _runs(4):
        queue = [x for x in run if _family(x) == "hsq"]
        starved = [bool(re.search(r"q_hsb=\[0,0,0,0,0,\d+\]", x)) for x in queue]
        longest = max(len(list(g)) for k, g in itertools.groupby(starved) if k)
        assert longest >= 20


@pytest.mark.usefixtures("short_runs")
def test_generated_files_are_deterministic_and_sized(tmp_path: Path) -> None:
    """The same bytes each time, at least the size asked, ending at a line end."""
    for trainer in ("dflash", "hf", "megatron"):
        a, b = tmp_path / f"{trainer}-a.log", tmp_path / f"{trainer}-b.log"
        size = gen.write(a, 1, trainer)
        gen.write(b, 1, trainer)
        data = a.read_bytes()
        assert data == b.read_bytes() and len(data) == size >= 1_000_000
        assert data.endswith(b"\n")


def test_simple_kind_is_the_earlier_file() -> None:
    """`--kind simple` still writes the benchmark file the earlier measurements used."""
    text = "\n".join(gen.lines(random.Random(42), datetime(2026, 11, 1), 3000))
    digest = "3893ea09e2c3327c4bdbdce458a3b2caea8aa7222976e3689a58e1590540ac06"
    assert hashlib.sha256(text.encode()).hexdigest() == digest


@pytest.mark.parametrize(
    ("trainer", "key", "nonfinite"),
    [
        ("hf", r"\{'loss': ([^,]+),", {"nan", "inf"}),
        ("megatron", r"lm loss: (\S+)", {"NAN", "INF"}),
    ],
)
def test_trainer_logs_have_two_nan_stretches(
    tmp_path: Path, trainer: str, key: str, nonfinite: set[str]
) -> None:
    """The HF and Megatron logs hold two NaN stretches in the trainer's own spelling, and
    logwatch's nan-loss rule fires once for each."""
    log = tmp_path / f"{trainer}.log"
    gen.write(log, 2, trainer)
    losses = re.findall(key, log.read_text(encoding="utf-8"))
    stretches = [k for k, _ in itertools.groupby(loss in nonfinite for loss in losses) if k]
    assert len(stretches) == 2
    events = logwatch.replay(log).events
    firings = [e for e in events if e.rule == "nan-loss" and e.status.value == "firing"]
    assert len(firings) == 2


def test_trainer_logs_forms() -> None:
    """HF dicts come after ten tqdm `\\r` redraws; Megatron skips iterations (no `lm loss`)."""
    hf = next(itertools.islice(gen.hf(random.Random(42), 10**9), 1, None))
    first = hf.split("\n")[0]
    assert first.count("\r") == 12 and re.search(r"\r\{'loss': [\d.]+, 'grad_norm': ", first)
    megatron = next(itertools.islice(gen.megatron(random.Random(42), 10**9), 1, None))
    skipped = [x for x in megatron.split("\n") if "skipped iterations:  10" in x]
    assert skipped and not any("lm loss" in x for x in skipped)


replay_bench = load_bench("bench_replay")
POSITIVE = [
    "2026-11-28 14:31:44,902 INFO [train] step 1403/200000 | loss nan | acc 0.000 | grad_norm inf",
    "2026-11-28 14:31:45,902 INFO [train] step 1404/200000 | loss -nan | acc 0.000",
    "2026-11-28 14:31:46,902 INFO [train] step 1405/200000 | loss=NaN | acc 0.000",
    "2026-11-28 14:31:47,902 INFO [train] step 1406/200000 | loss: inf | acc 0.000",
    "\r 14%|█▍        | 380/2724 [14:02<86:01, 132.12s/it]\r    \r{'loss': nan, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 0.1}",
    " iteration     4200/  500000 | lm loss: NAN | loss scale: 65536.0 | grad norm: 3.214 |",
]
NEGATIVE = [
    "2026-11-28 14:09:05,117 INFO [train] step 120/200000 | loss 3.4812 | acc 0.271 | grad_norm nan",
    "{'eval_loss': nan, 'eval_runtime': 41.2113, 'epoch': 1.0}",
    " iteration     4210/  500000 | loss scale: 32768.0 | number of skipped iterations:  10 |",
    " validation loss at iteration 100 | lm loss value: NAN | lm loss PPL: NAN | ",
    "2026-11-28 14:09:00,732 WARNING [train] non-finite loss, skipping optimizer step",
]


def test_bench_nan_pattern_reads_each_trainers_loss() -> None:
    """The pattern lnav and SEC are given matches a non-finite training loss in each file's
    spelling, and not a held-out loss, a loss scale or a finite loss."""
    rx = re.compile(replay_bench.NAN_LOSS)
    assert [bool(rx.search(x)) for x in POSITIVE] == [True] * len(POSITIVE)
    assert [bool(rx.search(x)) for x in NEGATIVE] == [False] * len(NEGATIVE)


def test_bench_truth_counts_episodes_as_the_rule_does(tmp_path: Path) -> None:
    """The Python loop the bench checks every tool against: NaN lines, and episodes that a
    finite loss or a `run start:` ends, while lines without a loss (skipped iterations, held-out
    losses) leave an episode open."""
    restart = "2026-11-28 15:00:00,000 INFO [train] run start: run_id=x pid=1 gpus=8"
    lines = [*POSITIVE[:2], *NEGATIVE[1:4], POSITIVE[2], restart, *POSITIVE[3:], NEGATIVE[0]]
    log = tmp_path / "mixed.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    loop = [sys.executable, "-c", replay_bench.PYLOOP, str(log)]
    out = subprocess.run(loop, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["6", "2"]


def test_gen_ranks_writes_a_seeded_torchrun_fleet(tmp_path: Path) -> None:
    """bench/gen_ranks.py writes each rank's stdout and stderr under `node/attempt_0/LOCAL/`, a
    launcher log per node and the job's output, with DFlash lines logwatch reads; the same
    bytes every time."""
    ranks = load_bench("gen_ranks")
    first, second = tmp_path / "a", tmp_path / "b"
    count = ranks.write(first, 16, 0.2)
    ranks.write(second, 16, 0.2)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert count == len(files) == 16 * 2 + 2 + 1
    assert Path("node-001/attempt_0/7/stderr.log") in files
    assert Path("node-000/torchrun.log") in files
    for name in files:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    size = sum((first / name).stat().st_size for name in files)
    assert 150_000 < size < 300_000
    frame = logwatch.read_log(first / "node-000/attempt_0/0/stdout.log")
    assert frame.get_column("step").drop_nulls().len() > 10
