"""What logwatch says, in words a user reads: no `?` placeholder in any summary, counts that
agree with their nouns, and one timeline entry per incident (the alerts of one line)."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.drivers.replay import replay
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.words import counted, plural
from tests.support import golden
from tests.support.paths import ROOT, SAMPLES

PLACEHOLDER = re.compile(r"(?:^|[\s(\[=:,])\?(?:$|[\s),\]:;%.])")
"""A `?` standing for a value no one knew: `step ?`, `rank ?`, `(? free)`, `: ?`."""

SINGULAR_PLURAL = re.compile(
    r"(?<![\d.,])\b1 (?:rules|tests|alert events|events|iterations|lines|step lines|files|"
    r"sources|records|alerts|oom-kill events)\b"
)
"""A count of one with a plural noun: `1 rules OK`, `1 tests`, `1 iterations`."""

MEGATRON = SAMPLES / "trainers" / "megatron.log"


def _golden_events() -> list[dict[str, object]]:
    events = []
    for path in sorted(golden.GOLDEN.rglob("*.jsonl*")):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        events += [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    return events


def test_plural_and_counted() -> None:
    """Regular, -es, -ies and irregular plurals; one is singular, zero and many plural."""
    assert [plural(n) for n in ("rule", "batch", "retry", "day", "alert event", "was")] == [
        "rules",
        "batches",
        "retries",
        "days",
        "alert events",
        "were",
    ]
    assert [counted(n, "test") for n in (0, 1, 2)] == ["0 tests", "1 test", "2 tests"]
    assert counted("1", "iteration") == "1 iteration"
    assert counted(3, "child", "children") == "3 children"


def test_no_summary_of_any_sample_or_corpus_holds_a_placeholder() -> None:
    """Every event of every sample log and of the seeded corpus (the goldens, which
    tests/test_identical.py holds equal to today's replay) says no `?` for an unknown value."""
    events = _golden_events()
    assert len(events) > 100  # the goldens were read
    bad = [(e["source"], e["line"], e["summary"]) for e in events]
    assert [b for b in bad if PLACEHOLDER.search(str(b[2]))] == []
    assert [b for b in bad if SINGULAR_PLURAL.search(str(b[2]))] == []


def test_no_summary_of_the_parser_corpus_holds_a_placeholder(tmp_path: Path) -> None:
    """The real lines of tests/data/dialects.toml, replayed as one log, say no `?` either."""
    corpus = tomllib.loads((ROOT / "tests" / "data" / "dialects.toml").read_text("utf-8"))
    log = tmp_path / "dialects.log"
    log.write_text("".join(case["text"] + "\n" for case in corpus["line"]), encoding="utf-8")
    events = replay([str(log)], load_rules([builtin_rules_dir()])).events
    assert events
    assert [e.summary for e in events if PLACEHOLDER.search(e.summary)] == []


def test_a_line_without_a_step_says_its_epoch(tmp_path: Path) -> None:
    """Hugging Face's `{'loss': nan, ..., 'epoch': 0.4}` has no step: the summary says the epoch
    (was `loss is nan (line 1)`, and `at step ?` before the optional clauses)."""
    log = tmp_path / "hf.log"
    log.write_text("{'loss': nan, 'grad_norm': 1.5, 'learning_rate': 2e-05, 'epoch': 0.4}\n")
    events = replay([str(log)], load_rules([builtin_rules_dir()])).events
    assert [e.summary for e in events] == ["loss is nan at epoch 0.4 (line 1)"]


def test_the_epoch_fallback_costs_replay_no_parse_pass() -> None:
    """Only gated rules show the epoch (computed on their event rows): the columns replay parses
    on every line for the built-in rules stay without `epoch`."""
    from logwatch.engine import Engine

    engine = Engine(load_rules([builtin_rules_dir()]))
    assert "epoch" not in engine.columns
    assert "epoch" in engine.every_column  # tail's few-line batches parse it


def test_the_slurm_out_of_memory_line_without_a_count_says_no_placeholder(tmp_path: Path) -> None:
    """`task 0: Out Of Memory` names no oom-kill count: the clause is left out (was `? oom-kill
    event(s)`), and a count of one is singular."""
    rules = load_rules([builtin_rules_dir()])
    said = []
    for name, line in (
        ("a.log", "srun: error: sdumont6156: task 0: Out Of Memory"),
        ("b.log", "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup."),
        ("c.log", "slurmstepd: error: Detected 2 oom_kill events in StepId=JOBID.13."),
    ):
        (tmp_path / name).write_text(line + "\n")
        said += [e.summary for e in replay([str(tmp_path / name)], rules).events]
    assert said == [
        "SLURM killed the job for memory (line 1)",
        "SLURM killed the job for memory: 1 oom-kill event in step 191.batch (line 1)",
        "SLURM killed the job for memory: 2 oom-kill events in step JOBID.13 (line 1)",
    ]


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_counts_of_one_are_singular_in_the_commands_output(tmp_path: Path) -> None:
    """replay's summary, `rules check`, `logwatch test`, the nan-iterations summary and report
    over one of each say `1 line`, `1 step line`, `1 rule OK`, `1 test`, `1 iteration`,
    `1 file`."""
    log = tmp_path / "one.log"
    log.write_text("step 1 loss 2.5\n")
    code, out, _ = _run("replay", str(log))
    assert code == 0 and f"{log}: 1 line, 1 step line (1..1)" in out
    pack = tmp_path / "one.toml"
    pack.write_text(
        '[[rule]]\nid = "my-oom"\ntype = "match"\nseverity = "warning"\n'
        'pattern = "CUDA out of memory"\nsummary = "OOM at line {line}"\n'
    )
    assert _run("rules", "check", str(pack)) == (0, "1 rule OK\n", "")
    test = tmp_path / "one.test.toml"
    test.write_text(
        'rule_packs = ["one.toml"]\n[[test]]\nname = "oom"\ninput = "CUDA out of memory\\n"\n'
        '[[test.expect]]\nrule = "my-oom"\nstatus = "firing"\nline = 1\n'
    )
    assert _run("test", str(test))[:2] == (0, "1 test, 0 failed\n")
    code, out, _ = _run("replay", str(MEGATRON))
    assert "1 iteration with a NaN loss" in out
    assert not SINGULAR_PLURAL.search(out)
    code, out, _ = _run("report", str(log), "-o", str(tmp_path / "one.html"))
    assert code == 0 and " KiB: 1 file, " in out and out.endswith(", 0 alert events)\n")


def _entries(timeline: str) -> list[str]:
    """The first row of each timeline entry (continuation rows are indented)."""
    return [row for row in timeline.splitlines() if row[:1] not in ("", " ")]


def test_alerts_of_one_line_are_one_timeline_entry_in_replay() -> None:
    """Megatron's NaN line fires nan-loss, nan-grad and nan-iterations: one entry naming the
    three rules with each summary (was three); their resolutions on lines 16 and 18 are two
    more (was three). JSONL keeps every event. (The pasted multi-rank log's root-cause verdict,
    on line 15 too, is its own entry, first.)"""
    code, out, _ = _run("replay", str(MEGATRON))
    assert code == 0
    assert "CRIT  root-cause " in _entries(out)[0]
    rows = [
        row
        for row in _entries(out)[1:]
        if ":1" in row and "megatron.log:" in row and "root-cause" not in row
    ]
    assert [row.split("megatron.log:")[1].split()[0] for row in rows[:3]] == ["15", "16", "18"]
    assert "CRIT  nan-loss, nan-grad, nan-iterations megatron.log:15" in rows[0].replace(
        str(MEGATRON), "megatron.log"
    )
    entry = out[out.index(rows[0]) : out.index(rows[1])]
    assert "gradient norm is nan at step 60" in entry and "1 iteration with a NaN loss" in entry
    assert entry.count("fix: ") == 3
    assert "OK    nan-loss, nan-grad " in rows[2]
    code, jsonl, _ = _run("replay", str(MEGATRON), "--format", "jsonl")
    lines = [json.loads(line) for line in jsonl.splitlines()]
    assert sum(e["line"] in (15, 16, 18) and e["rule"] != "root-cause" for e in lines) == 6


@pytest.mark.slow
def test_alerts_of_one_line_are_one_timeline_entry_in_tail(tmp_path: Path) -> None:
    """`tail` (a real process reading the Megatron log from a pipe) prints the NaN line's three
    alerts as one entry too, and says at start which built-in rule a `replace = true` pack
    replaces."""
    pack = tmp_path / "mine.toml"
    pack.write_text(
        '[[rule]]\nid = "nccl-timeout"\ntype = "match"\nseverity = "warning"\n'
        'pattern = "Watchdog caught collective operation timeout"\nsummary = "mine (line {line})"\n'
        "replace = true\n"
    )
    args = ["tail", "-", "--gpu", "off", "--rules", str(pack), "--state-dir", str(tmp_path / "s")]
    done = subprocess.run(
        [sys.executable, "-m", "logwatch.cli", *args],
        cwd=ROOT,
        input=MEGATRON.read_bytes(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, err
    rows = [row for row in _entries(out) if "<stdin>:" in row]
    assert [row.split("<stdin>:")[1].split()[0] for row in rows[:3]] == ["15", "16", "18"]
    assert "nan-loss, nan-grad, nan-iterations <stdin>:15" in rows[0]
    assert f"{pack}:1: rule 'nccl-timeout' replaces the built-in rule at " in err
    assert str(builtin_rules_dir() / "training.toml") in err


def test_the_terminal_sink_writes_an_incident_when_its_round_ends() -> None:
    """tail's sink holds the alerts of one line until the round's tick, then writes one entry;
    a silenced member is marked alone; an event of another line starts the next entry."""
    import io
    from datetime import datetime

    from logwatch.alerts import FIRING, AlertEvent, Severity
    from logwatch.sinks.terminal import TerminalSink

    class Muted:
        def muting(self, rule: str, source: str, now: datetime) -> object | None:
            return object() if rule == "nan-grad" else None

    def event(rule: str, line: int, severity: Severity = Severity.CRITICAL) -> AlertEvent:
        return AlertEvent(rule, severity, FIRING, "a.log", line, None, 7, None, f"{rule} says")

    out = io.StringIO()
    sink = TerminalSink(out, silences=Muted(), now=lambda: datetime(2026, 1, 1, 9, 30, 5))
    sink.emit(event("nan-loss", 3, Severity.WARNING))
    sink.emit(event("nan-grad", 3))
    assert out.getvalue() == ""
    sink.tick(datetime(2026, 1, 1))
    assert out.getvalue() == (
        "09:30:05 (arrived)   CRIT  nan-loss, nan-grad   a.log:3  nan-loss says\n"
        "                           nan-grad: nan-grad says (silenced)\n"
    )
    sink.emit(event("nan-loss", 4))
    sink.emit(event("nan-grad", 5))
    sink.close()
    places = [re.findall(r"a\.log:\d+", row) for row in _entries(out.getvalue())]
    assert places == [["a.log:3"], ["a.log:4"], ["a.log:5"]]
    assert sink.count == 4
