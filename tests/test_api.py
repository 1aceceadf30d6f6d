"""The library's front door: `import logwatch` and the calls the README shows."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

import logwatch
from logwatch.cli import cli
from tests.support.paths import NAN_LOG

RESTARTED = str(Path(NAN_LOG).with_name("train_restarted.log"))


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "logwatch", *args], input=stdin, capture_output=True, check=False
    )


def _printed(*args: str) -> list[str]:
    """The lines `logwatch ARGS` prints (the command in this process: what the library gives
    is compared with what the command prints; the process itself is tested above and below)."""
    result = CliRunner().invoke(cli, list(args))
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    return result.stdout.splitlines()


def test_every_public_name_is_importable_from_the_package() -> None:
    """`__all__` names exactly what `import logwatch` provides."""
    missing = [name for name in logwatch.__all__ if not hasattr(logwatch, name)]
    assert missing == []
    assert {"read_log", "scan_log", "replay", "load_rules", "Engine", "RuleSpec"} <= set(
        logwatch.__all__
    )
    assert {"AlertEvent", "Sink", "SCHEMA", "LogwatchError", "InputError", "RulesError"} <= set(
        logwatch.__all__
    )


def test_import_logwatch_stays_light() -> None:
    """`import logwatch` loads neither slack_sdk, pynvml, click, watchdog nor prometheus_client."""
    code = (
        "import sys, logwatch\n"
        "heavy = {'slack_sdk', 'pynvml', 'click', 'watchdog', 'prometheus_client'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_read_log_gives_every_line_with_the_schema() -> None:
    """read_log: one row per line, numbered from 1, with logwatch.SCHEMA and the parsed metrics."""
    frame = logwatch.read_log(NAN_LOG)
    lines = Path(NAN_LOG).read_bytes().count(b"\n")
    assert frame.schema == logwatch.SCHEMA
    assert frame.height == lines
    assert frame.get_column("line").to_list() == list(range(1, lines + 1))
    assert frame.get_column("source").unique().to_list() == [NAN_LOG]
    assert frame.get_column("loss").is_nan().any()


@pytest.mark.parametrize(
    "suffix, compress",
    [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)],
)
def test_read_log_reads_compressed_logs_as_replay_does(
    tmp_path: Path, suffix: str, compress: object
) -> None:
    """A gzip / bzip2 / xz copy reads to the same frame as the plain log (but its source name)."""
    packed = tmp_path / ("train.log" + suffix)
    packed.write_bytes(compress(Path(NAN_LOG).read_bytes()))  # type: ignore[operator]  # the parametrized compressor
    plain = logwatch.read_log(NAN_LOG).drop("source")
    assert logwatch.read_log(packed).drop("source").equals(plain)


def test_read_log_reads_utf16_with_a_bom(tmp_path: Path) -> None:
    """PowerShell's UTF-16 output gives the same rows as the UTF-8 original."""
    wide = tmp_path / "train.log"
    wide.write_bytes(b"\xff\xfe" + Path(NAN_LOG).read_text("utf-8").encode("utf-16-le"))
    assert logwatch.read_log(wide).drop("source").equals(logwatch.read_log(NAN_LOG).drop("source"))


def test_read_log_of_standard_input() -> None:
    """'-' reads standard input, compressed or not, with '-' as the source."""
    code = "import logwatch; f = logwatch.read_log('-'); print(f.height, f['source'][0], f['loss'].is_nan().sum())"
    data = gzip.compress(Path(NAN_LOG).read_bytes())
    out = subprocess.run(
        [sys.executable, "-c", code], input=data, capture_output=True, check=True
    ).stdout.decode()
    expected = logwatch.read_log(NAN_LOG)
    assert out.split() == [str(expected.height), "-", str(expected["loss"].is_nan().sum())]


def test_scan_log_yields_the_same_lines_block_by_block() -> None:
    """scan_log with small blocks yields several frames that together are read_log's frame."""
    blocks = list(logwatch.scan_log(NAN_LOG, block_bytes=4096))
    assert len(blocks) > 3
    assert all(block.schema == logwatch.SCHEMA for block in blocks)
    assert pl.concat(blocks).equals(logwatch.read_log(NAN_LOG))


def test_scan_log_applies_the_long_line_limit(tmp_path: Path) -> None:
    """A 3 MB line comes back truncated to max_line_bytes with the visible marker."""
    log = tmp_path / "long.log"
    log.write_bytes(b"step 1 loss 2.0\n" + b"x" * 3_000_000 + b"\nstep 2 loss nan\n")
    frame = logwatch.read_log(log, max_line_bytes=1024)
    assert frame.height == 3
    assert "line truncated" in frame["text"][1]
    assert len(frame["text"][1].encode()) < 1200
    assert frame["loss"].is_nan().to_list() == [False, None, True]


def test_missing_log_raises_input_error(tmp_path: Path) -> None:
    """A missing file is an InputError naming it, before anything is yielded."""
    with pytest.raises(logwatch.InputError, match="no such file"):
        next(logwatch.scan_log(tmp_path / "nope.log"))


def test_replay_events_match_the_jsonl_command() -> None:
    """replay() finds exactly what `logwatch replay --format jsonl` prints, in file order."""
    result = logwatch.replay([NAN_LOG, RESTARTED], rules=logwatch.load_rules())
    printed = _printed("replay", "--format", "jsonl", NAN_LOG, RESTARTED)
    assert [e.to_jsonl() for e in result.events] == printed
    assert len(printed) > 4


def test_events_frame_has_the_jsonl_fields() -> None:
    """events_frame(): one row per event, JSONL's field names and values (NaN kept as a float)."""
    result = logwatch.replay(NAN_LOG)
    frame = result.events_frame()
    first = result.events[0].to_json()
    assert frame.columns == list(first)
    assert frame.height == len(result.events)
    assert frame.get_column("rule").to_list() == [e.rule for e in result.events]
    assert frame.get_column("fingerprint").to_list() == [e.fingerprint for e in result.events]
    assert frame.row(0, named=True)["summary"] == first["summary"]
    fired_nan = frame.filter(pl.col("status") == "firing").get_column("value")
    assert fired_nan.is_nan().any() or fired_nan.is_infinite().any()


def test_events_frame_of_no_events_keeps_its_columns(tmp_path: Path) -> None:
    """A healthy log gives an empty events frame that still has every column."""
    log = tmp_path / "ok.log"
    log.write_text("step 1 loss 2.0\nstep 2 loss 1.9\n")
    frame = logwatch.replay(log).events_frame()
    assert frame.height == 0
    assert "fingerprint" in frame.columns


def test_stats_say_what_the_text_summary_says() -> None:
    """result.stats[path] carries the summary's numbers: lines, steps, last loss, alerts."""
    result = logwatch.replay(NAN_LOG)
    stats = result.stats[NAN_LOG]
    summary = _printed("replay", NAN_LOG)[-3]
    assert summary.startswith(f"{NAN_LOG}: {stats.lines} lines, {stats.steps_seen} step lines")
    assert f"nan-loss x{stats.fired['nan-loss']}" in summary


def test_engine_driven_by_hand_gives_replays_events() -> None:
    """Engine(rules).process(read_log(...)) then .finish(source) (the file ended: the
    RuntimeError it ends on is a crash) finds the same events as replay()."""
    rules = logwatch.load_rules()
    engine = logwatch.Engine(rules)
    events = engine.process(logwatch.read_log(NAN_LOG))
    assert "run-crashed" not in {e.rule for e in events}  # undecided until the end
    events += engine.finish(NAN_LOG)
    replayed = logwatch.replay(NAN_LOG, rules=rules).events
    # replay also places each event: the crash's traceback line (no time of its own) takes
    # the time of the line before it; nothing else differs
    placed = [replace(e, ts=r.ts, labels=r.labels) for e, r in zip(events, replayed, strict=True)]
    assert [e.to_jsonl() for e in placed] == [e.to_jsonl() for e in replayed]  # NaN != NaN
    assert [e.labels.get("ts_from_line") for e in replayed] == [None] * 5 + ["141"]
    assert events[-1].ts is None and replayed[-1].ts is not None
    assert len(events) == 6 and events[-1].rule == "run-crashed"


def test_load_rules_adds_packs_after_the_builtin_ones(tmp_path: Path) -> None:
    """load_rules(paths=[...]) adds a user's pack to the built-in ones; builtin=False only it."""
    pack = tmp_path / "mine.toml"
    pack.write_text(
        '[[rule]]\nid = "my-rule"\ntype = "match"\nseverity = "info"\n'
        'pattern = "hello"\nsummary = "said hello"\n'
    )
    builtin = {spec.id for spec in logwatch.load_rules()}
    assert "nan-loss" in builtin
    assert {spec.id for spec in logwatch.load_rules([pack])} == builtin | {"my-rule"}
    assert [spec.id for spec in logwatch.load_rules([pack], builtin=False)] == ["my-rule"]


def test_python_dash_m_logwatch_is_the_command() -> None:
    """`python -m logwatch` prints what `logwatch` prints and exits with its codes."""
    via_m = _cli("replay", "--fail-on", "critical", NAN_LOG)
    via_cli = subprocess.run(
        [
            sys.executable,
            "-c",
            "from logwatch.cli import main; main()",
            "replay",
            "--fail-on",
            "critical",
            NAN_LOG,
        ],
        capture_output=True,
        check=False,
    )
    assert via_m.returncode == via_cli.returncode == 1
    assert via_m.stdout == via_cli.stdout
    missing = _cli("replay", "/nonexistent/train.log")
    assert missing.returncode == 2
    assert missing.stderr.decode().strip() == (
        "Error: /nonexistent/train.log: no such file (check the path, or quote a glob)"
    )
    assert _cli("--help").stdout.decode().startswith("Usage: logwatch ")


_HOOKED_RUN = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write('teardown ran\\n'));"
    "from logwatch.cli import run; run()"
)


def test_a_finished_replay_ends_without_the_teardown_and_keeps_every_byte(
    tmp_path: Path,
) -> None:
    """The command ends a finished replay without the interpreter's teardown (an `atexit`
    hook does not run), with the output and exit code `main` gives with the teardown, megabytes
    of it through a buffered pipe; a replay that fails, and `main`, tear down as usual."""
    steps = [f"step {i} | loss {'nan' if i % 2 else '2.5'}\n" for i in range(1, 6001)]
    log = tmp_path / "flappy.log"
    log.write_text("".join(steps))
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    args = ["replay", "--format", "jsonl", "--fail-on", "critical", str(log)]

    def command(code: str, *argv: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-c", code, *argv], capture_output=True, check=False, env=buffered
        )

    fast = command(_HOOKED_RUN, *args)
    slow = command(_HOOKED_RUN.replace("import run; run()", "import main; main()"), *args)
    assert b"teardown ran" not in fast.stderr
    assert b"teardown ran" in slow.stderr
    assert len(fast.stdout) > 1 << 20
    assert fast.stdout.count(b"\n") == len(logwatch.replay(str(log)).events)
    assert (fast.returncode, fast.stdout) == (slow.returncode, slow.stdout) == (1, slow.stdout)
    failed = command(_HOOKED_RUN, "replay", str(tmp_path / "missing.log"))
    assert failed.returncode == 2
    assert b"teardown ran" in failed.stderr


def test_events_jsonl_round_trips_through_json() -> None:
    """Every event's JSON is strict JSON (no NaN literal), as the frame's source."""
    for event in logwatch.replay(NAN_LOG).events:
        json.loads(event.to_jsonl())


def test_replay_hands_each_data_warning_to_on_warning(tmp_path: Path) -> None:
    """`logwatch.replay(..., on_warning=...)` gets the value read as missing as a
    `DataWarning` with its source and line, once, and no rule is switched off."""
    log = tmp_path / "train.log"
    log.write_text(
        "2026-11-28 14:00:00,000 INFO [wandb] snapshot step=1 gpu/0/mem_total_gb=inf\n"
        "2026-11-28 14:00:01,000 INFO [wandb] snapshot step=2 gpu/0/mem_total_gb=nan\n"
    )
    warnings: list[Any] = []
    errors: list[str] = []
    logwatch.replay(log, on_warning=warnings.append, on_error=lambda rule, *_: errors.append(rule))
    assert [(w.source, w.line, w.message.split(";")[0]) for w in warnings] == [
        (str(log), 1, "snapshot value gpu/0/mem_total_gb=inf is not a number a GPU column can hold")
    ]
    assert errors == []


MY_PACK = (
    '[[rule]]\nid = "my-rule"\ntype = "match"\nseverity = "info"\n'
    'pattern = "hello"\nsummary = "said hello"\n'
)


def test_load_config_and_rules_without_a_config_is_load_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No config anywhere: the defaults, and the rules `load_rules` gives (built-ins unless
    `builtin=False`, then the extra packs)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOGWATCH_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    pack = tmp_path / "mine.toml"
    pack.write_text(MY_PACK)
    config, specs = logwatch.load_config_and_rules(None, [pack])
    assert config.path is None
    assert [s.id for s in specs] == [s.id for s in logwatch.load_rules([pack])]
    _, only_mine = logwatch.load_config_and_rules(None, [pack], builtin=False)
    assert [s.id for s in only_mine] == ["my-rule"]


def test_load_config_and_rules_reads_the_config_its_packs_and_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config found ($LOGWATCH_CONFIG here) names a pack and turns a rule off; the extra
    packs come after; `builtin=False` leaves the built-ins out although the config keeps them."""
    pack = tmp_path / "mine.toml"
    pack.write_text(MY_PACK)
    config_file = tmp_path / "logwatch.toml"
    config_file.write_text(f'rule_packs = ["{pack}"]\n\n[rules.nan-grad]\nenabled = false\n')
    monkeypatch.setenv("LOGWATCH_CONFIG", str(config_file))
    config, specs = logwatch.load_config_and_rules()
    ids = [s.id for s in specs]
    assert config.path == config_file
    assert "nan-loss" in ids and "nan-grad" not in ids and ids[-1] == "my-rule"
    config_file.write_text(f'rule_packs = ["{pack}"]\n')
    config, specs = logwatch.load_config_and_rules(builtin=False)
    assert not config.builtin_rules
    assert [s.id for s in specs] == ["my-rule"]


def test_fired_says_whether_an_alert_this_bad_fired(tmp_path: Path) -> None:
    """`ReplayResult.fired(severity)` (`replay --fail-on`): a critical NaN loss counts for
    critical and warning; a log whose alerts are all warnings fires nothing critical; a healthy
    log fires nothing."""
    nan = logwatch.replay(NAN_LOG)
    assert nan.fired(logwatch.Severity.CRITICAL) and nan.fired(logwatch.Severity.WARNING)
    starved = logwatch.replay(str(Path(NAN_LOG).with_name("train_starved.log")))
    assert {e.severity for e in starved.events} == {logwatch.Severity.WARNING}
    assert starved.fired(logwatch.Severity.WARNING)
    assert not starved.fired(logwatch.Severity.CRITICAL)
    healthy = logwatch.replay(str(Path(NAN_LOG).with_name("train_healthy.log")))
    assert not healthy.fired(logwatch.Severity.INFO)


@pytest.mark.parametrize(
    "since, until, options",
    [
        (1406, None, ["--since", "1406"]),
        ("1406", None, ["--since", "1406"]),
        (None, datetime(2026, 11, 28, 14, 9), ["--until", "2026-11-28 14:09"]),
        (
            "2026-11-28T14:09:00",
            "2026-11-28 14:10:30",
            ["--since", "2026-11-28 14:09", "--until", "2026-11-28 14:10:30"],
        ),
    ],
)
def test_replay_since_until_gives_what_the_command_prints(
    since: object, until: object, options: list[str]
) -> None:
    """`logwatch.replay(since=, until=)` finds exactly what `replay --since/--until --format
    jsonl` prints: steps and times, as text (the options' forms) or as int / datetime."""
    result = logwatch.replay(NAN_LOG, since=since, until=until)  # type: ignore[arg-type]  # the parametrized bound
    printed = _printed("replay", "--format", "jsonl", *options, NAN_LOG)
    assert [e.to_jsonl() for e in result.events] == printed
    assert 0 < len(printed) < len(logwatch.replay(NAN_LOG).events)


def test_replay_since_of_neither_step_nor_time_is_one_input_error() -> None:
    """Text that is neither a step nor a time: the one-line InputError naming the argument."""
    with pytest.raises(logwatch.InputError, match=r"^since 'soon': not a step or a time"):
        logwatch.replay(NAN_LOG, since="soon")
