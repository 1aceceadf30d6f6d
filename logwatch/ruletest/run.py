"""Running `logwatch test` files: each input through the replay driver, the events compared with
what the test expects, and again in small blocks, which must not change a single event."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from logwatch.alerts import AlertEvent
from logwatch.drivers.replay import ReplayOptions, replay_file
from logwatch.engine import Engine
from logwatch.rules.loader import RuleSpec
from logwatch.ruletest.spec import Expectation, RuleTest, RuleTestFile
from logwatch.sources.streams import check_readable

INLINE_SOURCE = "input"
"""The source name of a test's inline `input` (a summary's `{source}` shows it)."""


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of a diff: `mark` is " " (as expected), "-" (expected, missing) or "+" (got,
    not expected)."""

    mark: str
    text: str


@dataclass(frozen=True, slots=True)
class BlockDiff:
    """The events of a replay in blocks of `block_bytes` that differ from the whole replay."""

    block_bytes: int
    diff: tuple[DiffLine, ...]


@dataclass(frozen=True, slots=True)
class RuleTestResult:
    """What one test found: the diff against its expectations, block-size differences, rule
    errors."""

    test: RuleTest
    file: Path
    diff: tuple[DiffLine, ...]
    block_diffs: tuple[BlockDiff, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """Every expectation met, nothing unexpected, the same events in every block size."""
        return (
            all(line.mark == " " for line in self.diff) and not self.block_diffs and not self.errors
        )


def run_test_files(
    files: Sequence[RuleTestFile], *, progress: Callable[[int, int, str], None] | None = None
) -> list[RuleTestResult]:
    """Run every test of every file, in order; `progress(done, total, name)` before each test
    and once at the end."""
    tests = [(test, file) for file in files for test in file.tests]
    results = []
    for done, (test, file) in enumerate(tests):
        if progress is not None:
            progress(done, len(tests), test.name)
        results.append(run_rule_test(test, file.rules, file.path))
    if progress is not None:
        progress(len(tests), len(tests), "")
    return results


def run_rule_test(test: RuleTest, rules: Sequence[RuleSpec], file: Path) -> RuleTestResult:
    """Replay one test's input through `rules` (whole, then in each of its block sizes) and
    compare the events with its expectations."""
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="logwatch-test-") as tmp:
        path, source = _input_path(test, Path(tmp))
        events = _replay(path, source, rules, ReplayOptions(), errors)
        block_diffs = []
        for block_bytes in test.blocks:
            options = ReplayOptions(block_bytes=block_bytes)
            chunked = _replay(path, source, rules, options, errors)
            if [_identity(e) for e in chunked] != [_identity(e) for e in events]:
                block_diffs.append(BlockDiff(block_bytes, block_diff(events, chunked)))
    return RuleTestResult(
        test,
        file,
        expectation_diff(test.expect, events, strict=test.strict),
        tuple(block_diffs),
        tuple(dict.fromkeys(errors)),
    )


def _input_path(test: RuleTest, tmp: Path) -> tuple[str, str]:
    """The file to replay and its source name: the test's `input_file`, or its inline input
    written to a temporary file (read exactly as a log on disk is)."""
    if test.input_file is not None:
        return str(test.input_file), str(test.input_file)
    path = tmp / "input.log"
    path.write_text(test.input_text or "", encoding="utf-8")
    return str(path), INLINE_SOURCE


def _replay(
    path: str, source: str, rules: Sequence[RuleSpec], options: ReplayOptions, errors: list[str]
) -> list[AlertEvent]:
    def on_error(rule: str, where: str, exc: Exception) -> None:
        errors.append(f"rule {rule!r} failed on {where}: {type(exc).__name__}: {exc}")

    check_readable([path])
    return list(replay_file(path, Engine(rules, on_error=on_error), options=options, source=source))


def expectation_diff(
    expect: Sequence[Expectation], events: Sequence[AlertEvent], *, strict: bool
) -> tuple[DiffLine, ...]:
    """Expected against got, in line order: every expectation must match an event, and every
    event of a rule the expectations name (of any rule when `strict`) must be expected."""
    named = {e.rule for e in expect}
    unmatched = [event for event in events if strict or event.rule in named]
    rows: list[tuple[tuple[int, str, str, str], DiffLine]] = []
    for wanted in expect:
        hit = next((i for i, event in enumerate(unmatched) if _matches(wanted, event)), None)
        if hit is None:
            key = (wanted.line, wanted.rule, wanted.status, "-")
            rows.append((key, DiffLine("-", expectation_text(wanted))))
        else:
            event = unmatched.pop(hit)
            rows.append((_order(event, " "), DiffLine(" ", event_text(event))))
    rows.extend((_order(event, "+"), DiffLine("+", event_text(event))) for event in unmatched)
    return tuple(line for _, line in sorted(rows, key=lambda row: row[0]))


def block_diff(whole: Sequence[AlertEvent], chunked: Sequence[AlertEvent]) -> tuple[DiffLine, ...]:
    """The events only the whole replay gave ("-") and only the replay in blocks gave ("+"),
    those both gave (" ") between them, in line order."""
    pool = {i: _identity(event) for i, event in enumerate(chunked)}
    rows: list[tuple[tuple[int, str, str, str], DiffLine]] = []
    for event in whole:
        same = next((i for i, key in pool.items() if key == _identity(event)), None)
        if same is not None:
            del pool[same]
            rows.append((_order(event, " "), DiffLine(" ", event_text(event))))
        else:
            rows.append((_order(event, "-"), DiffLine("-", event_text(event, detail=True))))
    for i in pool:
        event = chunked[i]
        rows.append((_order(event, "+"), DiffLine("+", event_text(event, detail=True))))
    return tuple(line for _, line in sorted(rows, key=lambda row: row[0]))


def _identity(event: AlertEvent) -> str:
    return json.dumps(event.to_json(), sort_keys=True)


def _matches(wanted: Expectation, event: AlertEvent) -> bool:
    return (
        event.rule == wanted.rule
        and event.status == wanted.status
        and event.line == wanted.line
        and (wanted.summary_contains is None or wanted.summary_contains in event.summary)
        and all(event.labels.get(k) == v for k, v in wanted.labels.items())
    )


def _order(event: AlertEvent, mark: str) -> tuple[int, str, str, str]:
    return (event.line, event.rule, event.status, mark)


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return " {" + ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items())) + "}"


def event_text(event: AlertEvent, *, detail: bool = False) -> str:
    """`rule status line=N {labels} summary`: one event as a diff shows it (with `detail`, also
    the step, value and reason, which can differ where the rest is the same)."""
    text = f"{event.rule} {event.status} line={event.line}{_labels(dict(event.labels))} {event.summary}"
    if detail:
        data = event.to_json()
        text += f" (step={data['step']}, value={data['value']}, reason={data['reason']})"
    return text


def expectation_text(wanted: Expectation) -> str:
    """An expectation as a diff shows it: `rule status line=N {labels} summary contains "..."`."""
    text = f"{wanted.rule} {wanted.status} line={wanted.line}{_labels(dict(wanted.labels))}"
    if wanted.summary_contains is not None:
        text += f" summary contains {json.dumps(wanted.summary_contains)}"
    return text
