"""Replay output is byte-identical to the goldens made before the speed work (tests/support/golden.py):
every sample log and a seeded randomized corpus, through the command and through the library at
several block sizes (random cuts, 1-line blocks) on 1 and 2 parse threads.

A failure here means replay's output changed. If the change is meant (a rule or the parser
changed on purpose), regenerate the goldens from a clean commit: `python tests/support/golden.py --write`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import logwatch
import logwatch.parse
from logwatch.cli import cli
from tests.support import corpus, golden

MANIFEST: dict[str, Any] = json.loads(golden.MANIFEST.read_text(encoding="utf-8"))
NAMES: list[str] = list(MANIFEST["files"])

# Fast vs reference: every cut check runs with the line shapes (the default) and with the general
# per-key path alone (`ReplayOptions(shapes=False)`), against the same goldens.
PARSE_MODES = ("shapes", "general")


@pytest.fixture(params=PARSE_MODES)
def parse_mode(request: pytest.FixtureRequest) -> str:
    """Which parse path the replay takes."""
    return str(request.param)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The inputs staged as the goldens were made (relative names, fixed mtime), as the cwd."""
    root = tmp_path_factory.mktemp("golden")
    golden.stage(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.delenv("LOGWATCH_CONFIG", raising=False)
        patch.setenv("XDG_CONFIG_HOME", str(root / ".config"))
        yield root


def _want(name: str) -> str:
    return golden.read_text(golden.golden_path(name, ".jsonl"))


def _rules_only(jsonl: str) -> str:
    """A golden without its fleet verdict: the verdict is the whole replay's (one per failure
    across the files given), so unrelated files replayed together have none of their own."""
    return "".join(line for line in jsonl.splitlines(keepends=True) if '"root-cause"' not in line)


def _diff(want: str, got: str, name: str) -> str:
    """The first differing lines, for the failure message."""
    lines = difflib.unified_diff(
        want.splitlines(), got.splitlines(), f"golden/{name}", "now", n=0, lineterm=""
    )
    return "\n".join(line[:400] for line in list(lines)[:12])


def _by_source(jsonl: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in jsonl.splitlines(keepends=True):
        source = json.loads(line)["source"]
        out[source] = out.get(source, "") + line
    return out


def test_replay_jsonl_is_golden(tree: Path) -> None:
    """`logwatch replay FILES --format jsonl` prints exactly the goldens' bytes, file after file."""
    result = CliRunner().invoke(cli, ["replay", *NAMES, "--format", "jsonl"])
    assert (result.exit_code, result.stderr) == (0, "")
    got = _by_source(result.stdout)
    want = {name: _rules_only(_want(name)) for name in NAMES}
    changed = [name for name in NAMES if got.get(name, "") != want[name]]
    assert not changed, "\n\n".join(_diff(want[n], got.get(n, ""), n) for n in changed)
    assert result.stdout == "".join(want[name] for name in NAMES)


def test_replay_json_is_golden(tree: Path) -> None:
    """`--format json` prints exactly the document the goldens give: their events in order and
    each file's stats (lines, steps, losses, queue, runs, times, throughput, alert counts)."""
    result = CliRunner().invoke(cli, ["replay", *NAMES, "--format", "json"])
    assert (result.exit_code, result.stderr) == (0, "")
    doc = json.loads(result.stdout)
    stats: dict[str, Any] = {}
    for name in NAMES:
        want = golden.golden_path(name, ".stats.json").read_text(encoding="utf-8")
        assert json.dumps({name: doc["stats"][name]}, indent=2) + "\n" == want, name
        stats |= json.loads(want)
    events = [json.loads(line) for name in NAMES for line in _rules_only(_want(name)).splitlines()]
    expected = json.dumps({"events": events, "stats": stats}, allow_nan=False, indent=2) + "\n"
    assert result.stdout == expected


@pytest.mark.parametrize("name", NAMES)
def test_any_cut_is_golden(tree: Path, name: str, parse_mode: str) -> None:
    """The library's replay at the manifest's random cuts (1-line blocks for a small file) on 1
    and 2 workers gives the bytes today's main gave at that cut."""
    rules = logwatch.load_rules()
    want = _want(name)  # the default block: test_replay_jsonl_is_golden
    for row in MANIFEST["files"][name]["variants"]:
        variant = golden.Variant(row["block_bytes"], row["workers"])
        got = golden.replay_jsonl(name, variant, rules, shapes=parse_mode == "shapes")
        # Where today's main gave the default's bytes at this cut, show what moved; elsewhere
        # (event order at one line, hold rules over backward time jumps) only the digest is kept.
        detail = _diff(want, got, name) if row["same_as_default"] else "digest differs"
        assert golden.digest(got) == row["sha256"], f"{variant.label} ({parse_mode}): {detail}"


NONFINITE = ("nan-loss", "nan-grad")


@pytest.mark.parametrize("name", NAMES)
def test_a_pack_of_gated_rules_gives_their_golden_events(tree: Path, name: str) -> None:
    """With only the nonfinite rules loaded, replay parses the loss, grad norm, rank and step
    only where a gate or an event asks for them: their events are the goldens' own, at every
    cut the manifest lists."""
    rules = [spec for spec in logwatch.load_rules() if spec.id in NONFINITE]
    want = "".join(
        line
        for line in _want(name).splitlines(keepends=True)
        if json.loads(line)["rule"] in NONFINITE
    )
    for row in MANIFEST["files"][name]["variants"][:3]:
        variant = golden.Variant(row["block_bytes"], row["workers"])
        got = _rules_only(golden.replay_jsonl(name, variant, rules, stats=False))
        assert got == want, f"{variant.label}: {_diff(want, got, name)}"


def test_corpus_has_every_shape() -> None:
    """The stored corpus carries every non-finite spelling and every framing hazard it claims:
    CRLF, `\\r` redraws, ANSI colours, rsyslog escapes, NULs, invalid UTF-8, rank prefixes,
    yearless timestamps and restarts."""
    data = b"".join(
        golden.read_bytes(golden.GOLDEN / f"{name}.gz") for name in golden.corpus_names()
    )
    for spelling in corpus.NONFINITE:
        assert f" {spelling} ".encode() in data or f"={spelling}".encode() in data, spelling
    for mark in [b"\r\n", b"it/s, loss=", b"]\r ", b"\x1b[32m", b"#015", b"\x00", b"\xff\xfe"]:
        assert mark in data, mark
    for mark in [b"[rank", b"[default", b"mpirank:", b"] NVRM", b" run start: ", b"d2.utils"]:
        assert mark in data, mark


def test_corpus_is_seeded() -> None:
    """The generator gives the same bytes for a seed and other bytes for another."""
    assert corpus.corpus(7, 300) == corpus.corpus(7, 300)
    assert corpus.corpus(7, 300) != corpus.corpus(8, 300)


def _events_by_cut(path: str) -> list[list[tuple[int, str, str]]]:
    """(line, rule, status) of each event, with the whole file as one block and one line a block."""
    rules = logwatch.load_rules()
    return [
        [
            (e.line, e.rule, str(e.status))
            for e in golden.replay_paths([path], rules, options=variant.options).events
        ]
        for variant in (golden.Variant(8 << 20, 1), golden.Variant(golden.ONE_LINE, 1))
    ]


# Two ways the code at 31b85c6 was not cut-invariant, found by the corpus; both fixed since (a
# restart ends alerts in firing order, hold rules follow file order), these keep them fixed.
def test_restart_ends_alerts_in_the_same_order_whatever_the_cut(write_log) -> None:  # type: ignore[no-untyped-def]
    """A restart ends what fires in one order, whether the alerts fired in its block or before."""
    path = write_log(
        b"2026-11-28 14:00:00,000 INFO [train] run start: run_id=a pid=1 gpus=8\n"
        b"2026-11-28 14:00:01,000 INFO [train] step 1/10 | loss nan | grad_norm 1.0\n"
        b"2026-11-28 14:00:02,000 torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        b"2.00 GiB. GPU 3 has a total capacity of 139.80 GiB of which 1.12 GiB is free.\n"
        b"2026-11-28 14:00:03,000 INFO [train] step 2/10 | loss nan | grad_norm nan\n"
        b"2026-11-28 14:00:04,000 INFO [train] run start: run_id=b pid=2 gpus=8\n"
    )
    whole, lines = _events_by_cut(path)
    assert whole == lines


def test_hold_over_a_backward_time_jump_is_the_same_whatever_the_cut(write_log) -> None:  # type: ignore[no-untyped-def]
    """A busy snapshot stamped earlier than the idle ones around it counts the same in any cut."""

    def snapshot(hms: str, util: int) -> bytes:
        return (
            f"2026-11-28 {hms},000 INFO [wandb] snapshot step=1 gpu/0/util={util} "
            "gpu/0/mem_gb=10.0 gpu/0/mem_total_gb=80.0 gpu/0/temp_c=60\n"
        ).encode()

    times = [("14:00:10", 0), ("14:02:10", 0), ("14:04:10", 0), ("13:50:00", 90), ("14:06:10", 0)]
    start = b"2026-11-28 14:00:00,000 INFO [train] run start: run_id=a pid=1 gpus=8\n"
    path = write_log(start + b"".join(snapshot(t, u) for t, u in times))
    whole, lines = _events_by_cut(path)
    assert whole == lines
