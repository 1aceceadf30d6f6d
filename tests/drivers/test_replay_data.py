"""The replay data side: Parquet exports, --since/--until, --format json, the fuller summary."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
from click.testing import CliRunner

import logwatch
from logwatch.cli import cli
from logwatch.drivers.window import Window, parse_bound

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "dflash"
NAN_LOG = str(SAMPLES / "train_nan.log")
RESTARTED = str(SAMPLES / "train_restarted.log")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_export_one_file_reads_back_equal_to_read_log(tmp_path: Path) -> None:
    """--export FILE.parquet holds exactly what logwatch.read_log gives, NaN and lists kept."""
    out = tmp_path / "frames.parquet"
    code, _, err = run("replay", NAN_LOG, "--export", str(out), "--format", "jsonl")
    assert (code, err) == (0, "")
    back = pl.read_parquet(out)
    assert back.schema == pl.Schema(logwatch.SCHEMA)
    assert back.equals(logwatch.read_log(NAN_LOG))
    assert back.filter(pl.col("loss").is_nan()).height > 0


def test_export_folder_gets_one_file_per_source(tmp_path: Path) -> None:
    """--export DIR/ writes one Parquet file per source, each equal to that file's read_log."""
    gz = tmp_path / "train.log.1.gz"
    gz.write_bytes(gzip.compress(Path(RESTARTED).read_bytes()))
    out = tmp_path / "frames"
    code, _, _ = run("replay", NAN_LOG, str(gz), "--export", f"{out}/", "--format", "jsonl")
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "train.log.1.gz.parquet",
        "train_nan.log.parquet",
    ]
    assert pl.read_parquet(out / "train.log.1.gz.parquet").equals(logwatch.read_log(gz))
    assert pl.read_parquet(out / "train_nan.log.parquet").equals(logwatch.read_log(NAN_LOG))


def test_export_events_matches_events_frame(tmp_path: Path) -> None:
    """--export-events writes the alert events with JSONL's field names; NaN values kept."""
    out = tmp_path / "events.parquet"
    code, _, _ = run("replay", NAN_LOG, "--export-events", str(out), "--format", "jsonl")
    assert code == 0
    back = pl.read_parquet(out)
    assert back.equals(logwatch.replay(NAN_LOG).events_frame())
    assert back.select("line", "rule", "status").rows() == [
        (111, "nan-loss", "firing"),
        (111, "nan-grad", "firing"),
        (116, "nan-loss", "resolved"),
        (116, "nan-grad", "resolved"),
        (140, "nan-loss", "firing"),
        (145, "run-crashed", "firing"),
    ]


def test_since_until_steps_keep_only_that_part() -> None:
    """--since/--until as steps: only the alerts of lines in the window, counted in the summary."""
    code, out, _ = run("replay", NAN_LOG, "--since", "1420", "--format", "jsonl")
    assert code == 0
    assert [json.loads(x)["line"] for x in out.splitlines()] == [140, 145]
    code, out, _ = run("replay", NAN_LOG, "--until", "1402", "--format", "jsonl")
    assert (code, out) == (0, "")


def test_since_until_times_carry_across_blocks() -> None:
    """A time window gives the same rows whatever the block size."""
    window = Window(parse_bound("2026-11-28 14:08:50"), parse_bound("2026-11-28T14:09:10"))
    whole = window.select(logwatch.read_log(NAN_LOG))
    split = Window(window.since, window.until)
    parts = [split.select(f) for f in logwatch.scan_log(NAN_LOG, block_bytes=1024)]
    assert pl.concat(parts).equals(whole)
    assert whole.get_column("line").to_list() == list(range(110, 117))


def test_since_bad_value_is_one_line() -> None:
    """A --since that is neither a step nor a time is one line naming what is accepted, exit 2."""
    code, _, err = run("replay", NAN_LOG, "--since", "yesterday")
    assert code == 2
    assert err == (
        "Error: --since 'yesterday': not a step or a time (expected a step such as 1400, or a "
        "time such as '2026-11-28 14:05' or 2026-11-28T14:05:00)\n"
    )


def test_format_json_is_one_document() -> None:
    """--format json prints one strict JSON document: the events and each source's stats."""
    code, out, _ = run("replay", NAN_LOG, RESTARTED, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert [e["line"] for e in doc["events"] if e["source"] == NAN_LOG] == [
        111,
        111,
        116,
        116,
        140,
        145,
    ]
    nan, restarted = doc["stats"][NAN_LOG], doc["stats"][RESTARTED]
    assert (nan["lines"], nan["first_step"], nan["last_step"], nan["last_loss"]) == (
        145,
        1300,
        1430,
        "inf",
    )
    assert nan["first_ts"] == "2026-11-28T14:02:03.118000"
    assert nan["still_firing"] == ["nan-loss", "run-crashed"]
    assert restarted["restarts"] == 1
    assert restarted["still_firing"] == ["nccl-timeout", "gpu-lost"]


def test_text_summary_has_a_header_per_file_and_says_no_step_plainly(write_log) -> None:  # type: ignore[no-untyped-def]
    """With several files each summary gets a header; span, restarts, throughput and what is
    still firing are said, and a file without steps says so instead of `?`."""
    chatter = write_log(b"hello\nworld\n", name="chatter.log")
    code, out, _ = run("replay", RESTARTED, chatter)
    assert code == 0
    tail = out.splitlines()[-8:]
    assert tail == [
        f"== {RESTARTED} ==",
        f"{RESTARTED}: 23 lines, 14 step lines (10..50), last loss 2.75, q_hs 19..42; "
        "alerts: cuda-oom x1, gpu-lost x1, nccl-timeout x2",
        "  2026-11-30 06:00:00 .. 2026-11-30 06:31:40 (31m40s), restarted once, "
        "throughput median 50,754/s",
        "  still firing: nccl-timeout (line 21), nccl-timeout (line 22), gpu-lost (line 23)",
        f"== {chatter} ==",
        f"{chatter}: 2 lines, no step lines, no loss; alerts: none",
        "  no timestamps, no restarts, no throughput",
        "  still firing: none",
    ]
    assert "?" not in "\n".join(tail)
