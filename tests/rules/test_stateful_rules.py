"""The stateful rules (run-crashed, loss-spike, throughput-drop, loss-scale-overflow) fire on real
pasted logs, stay quiet on look-alikes, and give the same events for any split of a file."""

from __future__ import annotations

import json
import statistics
import tomllib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from logwatch.alerts import AlertEvent
from logwatch.cli import cli
from logwatch.drivers.replay import ReplayOptions, replay
from logwatch.engine import Engine
from logwatch.parse import parse_lines
from logwatch.rules.loader import builtin_rules_dir, load_rules
from tests.support.paths import SAMPLES
from tests.support.together import Replayed, replay_each
from tests.test_words import PLACEHOLDER

RULES = load_rules([builtin_rules_dir()])
CORPUS: list[dict[str, Any]] = tomllib.loads(
    (Path(__file__).parent.parent / "data" / "stateful.toml").read_text("utf-8")
)["case"]
STATEFUL = ("run-crashed", "loss-spike", "throughput-drop", "loss-scale-overflow")
# 1-byte reads: one line a block (the live shape); 300-byte reads: a few lines a block, each
# read cutting a line. 7-byte reads (before) gave the engine the very blocks of 1-byte reads
# wherever every line is over 7 bytes (the samples, the interleaved log, 23 of 26 excerpts).
SPLITS = (1, 300)
# The splits each corpus excerpt is replayed in too, by its rule (a run-crashed excerpt that
# expects no event: whole only); each is compared with the whole file's events.
EXCERPT_SPLITS = {"run-crashed": SPLITS, "loss-spike": (1,), "throughput-drop": (1,)}


def events_of(path: Path | str, rule: str, block_bytes: int | None = None) -> list[AlertEvent]:
    """The events of one rule when replaying a file (optionally in blocks of this many bytes)."""
    options = ReplayOptions(block_bytes=block_bytes) if block_bytes else ReplayOptions()
    return [e for e in replay([str(path)], RULES, options=options).events if e.rule == rule]


def write(tmp_path: Path, lines: list[str], name: str = "train.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def excerpts(tmp_path_factory: pytest.TempPathFactory) -> list[Replayed]:
    """Each corpus excerpt's file and events, as replaying it alone gives them (replayed
    together, each its own source: one replay's fixed cost, not one per excerpt)."""
    texts = ["\n".join(case["input"].strip("\n").split("\n")) + "\n" for case in CORPUS]
    return replay_each(tmp_path_factory.mktemp("excerpts"), texts, RULES)


@pytest.mark.parametrize(
    "number", range(len(CORPUS)), ids=lambda n: f"{CORPUS[n]['rule']}:{CORPUS[n]['source'][:50]}"
)
def test_real_excerpts(number: int, excerpts: list[Replayed]) -> None:
    """Each corpus excerpt gives exactly its expected events of the rule, with its labels, and
    no summary says `?` for what the excerpt does not tell (`rank ?`, `step ?`); it gives the
    same events in the splits of `EXCERPT_SPLITS` (a loss-spike or throughput-drop excerpt a
    line at a time, as the live batches come; a crash excerpt in blocks of 1 and 300 bytes)."""
    case, path = CORPUS[number], excerpts[number].path
    got = [e for e in excerpts[number].events if e.rule == case["rule"]]
    splits = EXCERPT_SPLITS.get(case["rule"], ())
    if case["rule"] == "run-crashed" and not case["expect"]:
        splits = ()
    for block_bytes in splits:
        split = [e.to_json() for e in events_of(path, case["rule"], block_bytes)]
        assert split == [e.to_json() for e in got], f"in blocks of {block_bytes} bytes"
    assert [f"{e.line} {e.status}" for e in got] == case["expect"]
    for key, value in case.get("labels", {}).items():
        assert got[0].labels.get(key) == value
    for key in case.get("no_labels", []):
        assert key not in got[0].labels
    if "summary" in case:
        assert got[0].summary == case["summary"]
    assert [e.summary for e in got if PLACEHOLDER.search(e.summary)] == []


@pytest.mark.parametrize(
    "sample", ["trainers/crash.log", "trainers/anomaly.log", "trainers/deepspeed.log"]
)
@pytest.mark.parametrize("block_bytes", [300])
def test_any_split_gives_the_same_events(sample: str, block_bytes: int) -> None:
    """Replaying in blocks of 300 bytes gives exactly the whole file's events (1- and 4096-byte
    blocks: each sample's `logwatch test` file, strict, `blocks = [1, 4096]`, run by
    tests/test_samples.py, which compares the same event JSON with the whole replay's)."""
    whole = replay([str(SAMPLES / sample)], RULES).events
    split = replay(
        [str(SAMPLES / sample)], RULES, options=ReplayOptions(block_bytes=block_bytes)
    ).events
    assert [e.to_json() for e in split] == [e.to_json() for e in whole]
    assert any(e.rule in STATEFUL for e in whole)


def test_crash_names_first_failing_rank_and_exception() -> None:
    """The elastic agent's line decides; the alert names rank 2's FileNotFoundError, not the
    caught JSONDecodeError rank 0 survived."""
    (event,) = events_of(SAMPLES / "trainers/crash.log", "run-crashed")
    assert event.line == 28 and event.value == 1.0
    assert event.labels == {
        "rank": "2",
        "exception": "FileNotFoundError: [Errno 2] No such file or directory: "
        "'/data/shards/shard_00412.arrow'",
    }
    assert "rank 2 failed first with FileNotFoundError" in event.summary


def test_traceback_that_ends_the_log_fires_at_its_exception_line(tmp_path: Path) -> None:
    """With no launcher line after it, a traceback the file ends on fires at the exception line."""
    lines = [
        "[rank1]:step 5 | loss 2.0",
        "[rank1]:Traceback (most recent call last):",
        '[rank1]:  File "train.py", line 3, in <module>',
        "[rank1]:RuntimeError: shapes cannot be multiplied (4x3 and 5x6)",
        "[rank0]:step 6 | loss 2.0",  # another rank's progress does not save rank 1
    ]
    (event,) = events_of(write(tmp_path, lines), "run-crashed")
    assert (event.line, event.step, event.labels["rank"]) == (4, 5, "1")
    assert event.text == lines[3]
    assert event.labels["exception"] == "RuntimeError: shapes cannot be multiplied (4x3 and 5x6)"


def test_traceback_then_progress_of_same_rank_does_not_fire(tmp_path: Path) -> None:
    """A traceback the rank survives (more progress from it) is no crash, in any split."""
    lines = [
        "[rank1]:Traceback (most recent call last):",
        '[rank1]:  File "train.py", line 3, in <module>',
        "[rank1]:ValueError: a warning printed with its traceback",
        "[rank1]:step 6 | loss 2.0",
    ]
    path = write(tmp_path, lines)
    for block in (None, 1, 7):
        assert events_of(path, "run-crashed", block) == []


def test_crash_fires_once_per_run_and_again_after_a_restart(tmp_path: Path) -> None:
    """One alert per run: a second launcher line repeats nothing; a new run can crash again.
    The launcher's `local_rank: N` is a local rank, labelled so (never `rank`)."""
    failed = "E0302 09:18:41.402000 7110 api.py:869] failed (exitcode: -9) local_rank: {r} (pid: 7) of binary: python"
    lines = [
        "run start: pid=1",
        failed.format(r=0),
        failed.format(r=1),
        "run start: pid=2",
        failed.format(r=3),
    ]
    got = [
        (e.line, e.status, e.labels.get("local_rank"))
        for e in events_of(write(tmp_path, lines), "run-crashed")
        if "rank" not in e.labels
    ]
    assert [g for g in got if g[1] == "firing"] == [(2, "firing", "0"), (5, "firing", "3")]


def test_live_crash_fires_after_quiet_after_without_new_lines() -> None:
    """Live, the end of the log is `quiet_after` (2m) of silence after the exception line."""
    lines = ["step 5 | loss 2.0", "Traceback (most recent call last):", "KeyError: 'labels'"]
    frame = parse_lines(pl.Series(lines), source="t.log", first_line=1, default_year=2026)
    engine = Engine(RULES)
    assert [e.rule for e in engine.process(frame) if e.rule == "run-crashed"] == []
    start = datetime(2026, 1, 1, 12, 0, 0)
    for seconds, arrived in ((0, True), (60, False)):
        now = start + timedelta(seconds=seconds)
        assert engine.tick("t.log", now, arrived=arrived, line=3) == []
    fired = engine.tick("t.log", start + timedelta(seconds=121), arrived=False, line=3)
    assert [(e.rule, e.line, e.labels["exception"]) for e in fired] == [
        ("run-crashed", 3, "KeyError: 'labels'")
    ]


def _live(lines: list[str]) -> tuple[Engine, list[AlertEvent]]:
    """An engine fed `lines` as one live batch, and the run-crashed events of that batch."""
    frame = parse_lines(pl.Series(lines), source="t.log", first_line=1, default_year=2026)
    engine = Engine(RULES)
    return engine, [e for e in engine.process(frame) if e.rule == "run-crashed"]


def test_live_log_cut_inside_a_traceback_fires_after_quiet_after() -> None:
    """Live, a traceback with no exception line yet is undecided until `quiet_after` (2m) of
    silence; then it fires at its header, naming its last frame."""
    lines = [
        "step 5 | loss 2.0",
        "Traceback (most recent call last):",
        '  File "train.py", line 88, in <module>',
    ]
    engine, batch = _live(lines)
    assert batch == []
    start = datetime(2026, 1, 1, 12, 0, 0)
    assert engine.tick("t.log", start, arrived=True, line=3) == []
    assert engine.tick("t.log", start + timedelta(seconds=119), arrived=False, line=3) == []
    fired = engine.tick("t.log", start + timedelta(seconds=121), arrived=False, line=3)
    assert [(e.rule, e.line, e.step) for e in fired] == [("run-crashed", 2, 5)]
    assert fired[0].labels == {
        "ended": 'the log ends inside a traceback, at File "train.py", line 88, in <module>'
    }


def test_live_traceback_that_goes_on_is_not_decided_by_a_pause() -> None:
    """The exception line arriving after a pause shorter than quiet_after replaces the cut."""
    engine, _ = _live(["step 5 | loss 2.0", "Traceback (most recent call last):"])
    start = datetime(2026, 1, 1, 12, 0, 0)
    engine.tick("t.log", start, arrived=True, line=2)
    assert engine.tick("t.log", start + timedelta(seconds=60), arrived=False, line=2) == []
    more = ['  File "train.py", line 88, in <module>', "KeyError: 'labels'"]
    frame = parse_lines(pl.Series(more), source="t.log", first_line=3, default_year=2026)
    assert [e for e in engine.process(frame) if e.rule == "run-crashed"] == []
    engine.tick("t.log", start + timedelta(seconds=61), arrived=True, line=4)
    fired = engine.tick("t.log", start + timedelta(seconds=182), arrived=False, line=4)
    assert [(e.line, e.labels) for e in fired] == [(4, {"exception": "KeyError: 'labels'"})]


def test_live_killed_fires_at_its_line_without_waiting() -> None:
    """The shell's `Killed` says the process is gone: live, it fires at once, no tick needed."""
    _, batch = _live(["step 5 | loss 2.0", "./run.sh: line 5: 4242 Killed    python train.py"])
    assert [(e.line, e.value, e.labels) for e in batch] == [
        (2, 137.0, {"ended": "killed (SIGKILL: the OOM killer?)"})
    ]


def test_loss_spike_fires_and_resolves_on_the_sample() -> None:
    """The spike at step 60 fires with the median and band in its summary and resolves at 61."""
    got = events_of(SAMPLES / "trainers/anomaly.log", "loss-spike")
    assert [(e.line, e.status, e.step) for e in got] == [(66, "firing", 60), (67, "resolved", 61)]
    losses = [
        float(line.split("loss:")[1].split()[0])
        for line in (SAMPLES / "trainers/anomaly.log").read_text("utf-8").splitlines()
        if "loss:" in line and "validation" not in line
    ]
    median, band = reference_band(losses, at=59)  # step 60 is the 60th loss
    assert f"median {median:.6g}, limit {band:.6g}" in got[0].summary


def reference_band(
    values: list[float], at: int, window: int = 30, k: float = 6.0
) -> tuple[float, float]:
    """The spike band at `values[at]`, computed the slow way: the median of the `window` values
    before it, plus k x the median of their deviations from the median before each of them."""

    def median_before(series: list[float | None], i: int) -> float | None:
        known = [v for v in series[max(0, i - window) : i] if v is not None]
        return statistics.median(known) if len(known) >= 5 else None

    deviations: list[float | None] = []
    for i, v in enumerate(values):
        m = median_before(list(values), i)
        deviations.append(None if m is None else abs(v - m))
    median = median_before(list(values), at)
    mad = median_before(deviations, at)
    assert median is not None and mad is not None
    return median, median + max(k * mad, 0.1 * abs(median))


def test_flat_loss_needs_min_rise(tmp_path: Path) -> None:
    """A constant loss has a MAD of 0: a 5% bump is inside the band, a 50% one is not."""
    lines = [f"step {i} | loss 2.0" for i in range(1, 41)]
    lines += ["step 41 | loss 2.1", "step 42 | loss 3.0", "step 43 | loss 2.0"]
    got = events_of(write(tmp_path, lines), "loss-spike")
    assert [(e.step, e.status) for e in got] == [(42, "firing"), (43, "resolved")]


def test_no_subtle_spike_before_a_full_window(tmp_path: Path) -> None:
    """Before a full window only an extreme jump fires: 25x the median at step 20 does not."""
    lines = [f"step {i} | loss 2.0" for i in range(1, 20)] + ["step 20 | loss 50.0"]
    assert events_of(write(tmp_path, lines), "loss-spike") == []


@pytest.mark.parametrize("block_bytes", [None, 1])
def test_extreme_jump_fires_with_three_losses_before_it(
    tmp_path: Path, block_bytes: int | None
) -> None:
    """0.06 -> 5e19 after three steps fires at once (replay and line by line), says the
    extreme limit in its summary, and resolves when the loss is back; a long flat tail after it
    (the replay's calm path) changes nothing."""
    lines = ["step 1 | loss 0.061", "step 2 | loss 0.060", "step 3 | loss 0.058"]
    lines += ["step 4 | loss 5.2e19", "step 5 | loss 0.057"]
    lines += [f"step {i} | loss 0.057" for i in range(6, 80)]
    got = events_of(write(tmp_path, lines), "loss-spike", block_bytes)
    assert [(e.line, e.status) for e in got] == [(4, "firing"), (5, "resolved")]
    assert "leapt to over 100 x the median" in got[0].summary
    assert "median 0.06, limit 6;" in got[0].summary


def test_run_start_and_a_loss_huge_from_the_start_never_fire(tmp_path: Path) -> None:
    """A loss falling fast from 10 (the first steps), one huge from its first step on, and a
    jump with only two losses before it are no extreme jumps."""
    falling = [f"step {i} | loss {v}" for i, v in enumerate([10.0, 6.0, 2.0, 0.05, 0.04], 1)]
    assert events_of(write(tmp_path, falling, "a.log"), "loss-spike") == []
    huge = [f"step {i} | loss {3e9 + i * 1e7}" for i in range(1, 40)]
    assert events_of(write(tmp_path, huge, "b.log"), "loss-spike") == []
    early = ["step 1 | loss 0.05", "step 2 | loss 0.05", "step 3 | loss 900.0"]
    assert events_of(write(tmp_path, early, "c.log"), "loss-spike") == []


def test_noisy_decreasing_loss_never_spikes(tmp_path: Path) -> None:
    """A loss falling from 3 to 0.3 with +-15% noise over 300 steps fires nothing."""
    noise = [1.0, 1.15, 0.9, 1.1, 0.85, 1.05, 0.95, 1.12, 0.88, 1.0, 1.08]
    losses = [(3.0 * 0.9925**i) * noise[i % len(noise)] for i in range(300)]
    lines = [f"step {i} | loss {v:.4f}" for i, v in enumerate(losses, 1)]
    assert events_of(write(tmp_path, lines), "loss-spike") == []


@pytest.mark.parametrize("block_bytes", [None, *SPLITS])
def test_one_rank_spike_in_an_interleaved_log_fires(
    tmp_path: Path, block_bytes: int | None
) -> None:
    """Eight ranks print their own losses in turn; rank 5's leaps 10x at step 31, its first
    with a full window (30) of its own losses before it (a spike the others' losses, four
    times as many, would average away), and fires on its line, in any split; it resolves when
    rank 5 is back."""
    lines = []
    for step in range(1, 35):  # each line is a block in the 1-byte split: no more than needed
        for rank in range(8):
            loss = 2.0 + 0.01 * ((step * 7 + rank * 3) % 5)
            if rank == 5 and step in (31, 32):
                loss = 20.0
            lines.append(f"[rank{rank}]:step {step} | loss {loss:.3f}")
    got = events_of(write(tmp_path, lines), "loss-spike", block_bytes)
    spike_line = 30 * 8 + 5 + 1
    assert [(e.line, e.status) for e in got] == [
        (spike_line, "firing"),
        (spike_line + 16, "resolved"),
    ]
    assert got[0].text.startswith("[rank5]:step 31")


def test_one_slow_rank_in_an_interleaved_log_is_a_drop(tmp_path: Path) -> None:
    """Four ranks report their own tok/s; rank 2 falls to a third for the last reports and
    fires (the median of all ranks together would barely move)."""
    lines = []
    for step in range(1, 31):
        for rank in range(4):
            tps = 3000 if rank == 2 and step > 26 else 9000 + 10 * rank
            lines.append(f"[rank{rank}]:step {step} | loss 2.0 | {tps} tok/s")
    got = events_of(write(tmp_path, lines), "throughput-drop")
    assert [(e.line, e.status, e.value) for e in got] == [(28 * 4 + 3, "firing", 3000.0)]


def test_warmup_with_rising_throughput_is_no_drop(tmp_path: Path) -> None:
    """Throughput that climbs 40x over the first reports (warmup, compilation) never fires."""
    tps = [200, 900, 2500, 5000, 7000, 8000] + [8000 + (i % 3) * 50 for i in range(30)]
    lines = [f"step {i} | loss 2.0 | {t} tok/s" for i, t in enumerate(tps, 1)]
    assert events_of(write(tmp_path, lines), "throughput-drop") == []


def test_throughput_drop_ignores_checkpoint_and_eval_pauses() -> None:
    """Steps 41 and 51 (after a save, after an eval) are slow but not alerts; 70-74 are."""
    got = events_of(SAMPLES / "trainers/anomaly.log", "throughput-drop")
    assert [(e.line, e.status, e.step) for e in got] == [(78, "firing", 72), (81, "resolved", 75)]
    assert got[0].value == 2073.0


def test_throughput_drop_counts_only_consecutive_reports(tmp_path: Path) -> None:
    """Two slow reports, one normal, two slow: never 3 in a row, no alert."""
    tps = [1000] * 25 + [300, 300, 1000, 300, 300, 1000]
    lines = [f"step {i} | loss 2.0 | {t} tok/s" for i, t in enumerate(tps, 1)]
    assert events_of(write(tmp_path, lines), "throughput-drop") == []


def test_tqdm_seconds_per_iteration_counts_as_a_drop(tmp_path: Path) -> None:
    """tqdm switching from it/s to s/it when slow is a drop (1/s/it), not a missing value."""
    bars = [f"{i}/900 [00:{i:02d}<10:00,  2.50it/s]" for i in range(1, 26)]
    bars += [f"{i}/900 [00:{i:02d}<50:00,  4.00s/it]" for i in range(26, 30)]
    got = events_of(write(tmp_path, bars), "throughput-drop")
    assert [(e.line, e.status) for e in got] == [(28, "firing")]
    assert got[0].value == 0.25


def test_parameters_are_overridable_from_the_config(tmp_path: Path) -> None:
    """`[rules.loss-scale-overflow] halvings = 3` makes three halvings in a row enough."""
    lines = ["step 1 | loss 2.0"] + [
        f"OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2**k}, reducing to {2 ** (k - 1)}"
        for k in (16, 15, 14)
    ]
    log = write(tmp_path, lines)
    config = tmp_path / "logwatch.toml"
    config.write_text("[rules.loss-scale-overflow]\nhalvings = 3\n", encoding="utf-8")
    args = ["replay", str(log), "--format", "jsonl", "--config", str(config)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines()]
    assert [(e["rule"], e["line"], e["value"]) for e in events] == [
        ("loss-scale-overflow", 4, 8192.0)
    ]
    assert events_of(log, "loss-scale-overflow") == []  # the default (8) needs more


def test_repeated_reports_of_one_overflow_do_not_break_the_streak(tmp_path: Path) -> None:
    """Ranks that each report the same halving count once and do not reset the streak."""
    lines = ["step 1 | loss 2.0"]
    for k in range(16, 7, -1):
        for rank in (0, 1):
            lines.append(
                f"[deepspeed] OVERFLOW! Rank {rank} Skipping step. Attempted loss scale: {2**k}, reducing to {2 ** (k - 1)}"
            )
    got = events_of(write(tmp_path, lines), "loss-scale-overflow")
    assert [(e.line, e.status, e.value) for e in got] == [(16, "firing", 256.0)]


def test_calibration_before_first_progress_does_not_count(tmp_path: Path) -> None:
    """DeepSpeed halving its start scale before the first step line is calibration."""
    lines = [
        f"OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2**k}, reducing to {2 ** (k - 1)}"
        for k in range(32, 16, -1)
    ] + ["steps: 10 loss: 2.29"]
    assert events_of(write(tmp_path, lines), "loss-scale-overflow") == []


def test_an_extreme_factor_of_one_or_less_is_refused(tmp_path: Path) -> None:
    """`extreme = 0.5` would fire on every loss: a one-line error naming the rule and the fix."""
    log = write(tmp_path, ["step 1 | loss 2.0"])
    config = tmp_path / "logwatch.toml"
    config.write_text("[rules.loss-spike]\nextreme = 0.5\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["replay", str(log), "--config", str(config)])
    assert result.exit_code == 2
    assert result.output.endswith(
        "rule 'loss-spike': extreme must be over 1 (x the median) or 0 to turn it off, got 0.5\n"
    )
    assert len(result.output.splitlines()) == 1


PROMPT_AFTER_PROGRESS = [
    "iter 1640: loss 3.6782, time 562.18ms",
    "iter 1641: loss 3.9748, time 567.31ms",
    "",
    "user@host:~/nanoGPT$ ",
    "",
    "",
]


@pytest.mark.parametrize("block_bytes", [None, 1, 7, 4096])
def test_prompt_after_progress_fires_at_the_prompt_for_any_split(
    tmp_path: Path, block_bytes: int | None
) -> None:
    """A pasted terminal ending in a prompt right after progress (blank lines between and after
    them) fires once at the prompt, whatever blocks the file is read in."""
    path = write(tmp_path, PROMPT_AFTER_PROGRESS)
    got = events_of(path, "run-crashed", block_bytes)
    assert [(e.line, e.status, e.step) for e in got] == [(4, "firing", 1641)]
    assert "with no word from the run" in got[0].labels["ended"]


def test_prompt_before_more_progress_does_not_fire(tmp_path: Path) -> None:
    """Only the end of the input decides: a prompt with progress after it (a paste that starts
    at the command) is no crash."""
    lines = ["user@host:~/nanoGPT$ python train.py", *PROMPT_AFTER_PROGRESS[:2]]
    for block in (None, 1, 7):
        assert events_of(write(tmp_path, lines), "run-crashed", block) == []


def test_live_prompt_after_progress_does_not_fire() -> None:
    """Live (`tail`), a prompt line is left alone: no program writes one into its log file, and
    silence after it is no traceback's."""
    engine, fired = _live([line for line in PROMPT_AFTER_PROGRESS if line])
    start = datetime(2026, 1, 1, 12, 0, 0)
    for seconds, arrived in ((0, True), (600, False)):
        now = start + timedelta(seconds=seconds)
        fired += [e for e in engine.tick("t.log", now, arrived=arrived, line=3)]
    assert [e for e in fired if e.rule == "run-crashed"] == []
