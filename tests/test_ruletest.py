"""`logwatch test`: rule tests in TOML, their diff, exit codes, block sizes, JUnit, broken files."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from logwatch.alerts import FIRING, RESOLVED
from logwatch.cli import cli
from logwatch.rules.base import Transition
from logwatch.ruletest import RuleTest, report_lines, run_rule_test
from logwatch.testing import recording_spec

LOG = """
2026-11-28 14:05:01,000 INFO [train] step 1/10 | loss 2.0 | grad_norm 1.0
2026-11-28 14:05:02,000 INFO [train] step 2/10 | loss nan | grad_norm inf
2026-11-28 14:05:03,000 INFO [train] step 3/10 | loss 1.9 | grad_norm 1.0
"""


def _file(tmp_path: Path, body: str, name: str = "tests.toml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def _test(expects: str, *, head: str = "", log: str = LOG) -> str:
    return f'[[test]]\nname = "t"\n{head}input = """{log}"""\n{expects}'


def _expect(rule: str, status: str, line: int, extra: str = "") -> str:
    return f'\n[[test.expect]]\nrule = "{rule}"\nstatus = "{status}"\nline = {line}\n{extra}'


def _run(*args: str) -> Any:
    return CliRunner().invoke(cli, ["test", *args])


NAN_LOSS = _expect("nan-loss", "firing", 2) + _expect("nan-loss", "resolved", 3)


def test_passing_tests_exit_0_with_the_count(tmp_path: Path) -> None:
    """Expectations that match every event of the named rule pass: exit 0, one summary line."""
    path = _file(tmp_path, _test(NAN_LOSS + 'summary_contains = "finite again (1.9)"\n'))
    result = _run(str(path))
    assert (result.exit_code, result.output) == (0, "1 test, 0 failed\n")


def test_a_failing_expectation_prints_the_diff_and_exits_1(tmp_path: Path) -> None:
    """An expectation at the wrong line is `-`, the event replay gave is `+`, matched ones are
    shown plain, under the test's name and file:line."""
    path = _file(
        tmp_path, _test(_expect("nan-loss", "firing", 2) + _expect("nan-loss", "resolved", 4))
    )
    result = _run(str(path))
    assert result.exit_code == 1
    assert result.output == (
        f"FAILED: {path}:1: t\n"
        "  expected (-) vs got (+):\n"
        "      nan-loss firing line=2 loss is nan at step 2 (line 2)\n"
        "    + nan-loss resolved line=3 loss is finite again (1.9) at step 3 (line 3) (firing for 1s, since line 2)\n"
        "    - nan-loss resolved line=4\n"
        "\n"
        "1 test, 1 failed\n"
    )


def test_summary_contains_and_labels_must_match(tmp_path: Path) -> None:
    """A summary part the event lacks, or a label it does not carry, fails the expectation."""
    extra = 'summary_contains = "step 7"\n'
    path = _file(tmp_path, _test(_expect("nan-loss", "firing", 2, extra)))
    assert _run(str(path)).exit_code == 1
    labelled = _expect("nan-loss", "firing", 2, 'labels = { rank = "3" }\n')
    path = _file(tmp_path, _test(labelled + _expect("nan-loss", "resolved", 3)))
    result = _run(str(path))
    assert result.exit_code == 1
    assert '    - nan-loss firing line=2 {rank="3"}\n' in result.output


def test_an_unlisted_firing_of_a_named_rule_fails(tmp_path: Path) -> None:
    """Naming a rule means listing all its events: its resolve left out is a `+` line."""
    path = _file(tmp_path, _test(_expect("nan-loss", "firing", 2)))
    result = _run(str(path))
    assert result.exit_code == 1
    assert "    + nan-loss resolved line=3 " in result.output


def test_rules_not_named_are_not_checked_unless_strict(tmp_path: Path) -> None:
    """nan-grad fires too but the test names only nan-loss: it passes; with strict = true every
    rule's events must be listed, so the same test fails on nan-grad's."""
    assert _run(str(_file(tmp_path, _test(NAN_LOSS)))).exit_code == 0
    result = _run(str(_file(tmp_path, _test(NAN_LOSS, head="strict = true\n"))))
    assert result.exit_code == 1
    assert "    + nan-grad firing line=2 gradient norm is inf at step 2 (line 2)\n" in result.output
    assert "    + nan-grad resolved line=3 " in result.output


def test_input_file_and_rule_packs_are_relative_to_the_test_file(tmp_path: Path) -> None:
    """A user's own pack and log beside the test file: only that pack's rules run."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "mine.toml").write_text(
        '[[rule]]\nid = "loader-crash"\ntype = "match"\nseverity = "critical"\n'
        "pattern = 'DataLoader worker \\(pid \\d+\\) is killed'\nsummary = \"loader died\"\n",
        encoding="utf-8",
    )
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "run.log").write_text(
        "step 1 loss nan\nRuntimeError: DataLoader worker (pid 4242) is killed by signal\n",
        encoding="utf-8",
    )
    body = (
        'rule_packs = ["rules/mine.toml"]\n[[test]]\nname = "own pack"\nstrict = true\n'
        'input_file = "logs/run.log"\n' + _expect("loader-crash", "firing", 2)
    )
    result = _run(str(_file(tmp_path, body)))
    assert (result.exit_code, result.output) == (0, "1 test, 0 failed\n")


class FirstRowOfEachBatch:
    """A rule that depends on how the log is cut: fires at each batch's first row and resolves
    at its second (a whole file fires and resolves; line-sized batches only fire)."""

    def initial_state(self) -> dict[str, Any]:
        return {}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        found = [Transition(0, FIRING, None)]
        if frame.height > 1:
            found.append(Transition(1, RESOLVED, None))
        return found, state


def test_events_that_change_with_the_block_size_fail() -> None:
    """With `blocks`, a rule whose events depend on the batch cut fails the test, and the report
    shows which events the whole replay gave and the replay in blocks did not."""
    test = RuleTest("cut", "x.toml:1", LOG.lstrip("\n"), None, (), blocks=(4096, 1), strict=False)
    spec = recording_spec(FirstRowOfEachBatch(), "cut-sensitive")
    result = run_rule_test(test, [spec], Path("x.toml"))
    assert not result.passed
    assert [b.block_bytes for b in result.block_diffs] == [1]  # 4096 holds the whole input
    assert report_lines([result]) == [
        "FAILED: x.toml:1: cut",
        "  blocks=1: whole-file replay (-) vs in blocks of 1 byte (+):",
        "      cut-sensitive firing line=1 cut-sensitive at line 1",
        "    - cut-sensitive resolved line=2 cut-sensitive resolved at line 2 (firing for 1s, "
        "since line 1) (step=2, value=None, reason=recovered)",
        "",
        "1 test, 1 failed",
    ]


def test_the_builtin_rules_give_the_same_events_in_every_block_size(tmp_path: Path) -> None:
    """A real log with `\\r` redraws and no final newline, in 1-, 7- and 4096-byte blocks."""
    log = LOG.replace("loss 1.9", "loss 5.0\\rstep 3/10 | loss 1.9").rstrip("\n")
    path = _file(tmp_path, _test(NAN_LOSS, head="blocks = [1, 7, 4096]\n", log=log))
    assert _run(str(path)).output == "1 test, 0 failed\n"


def test_junit_report_counts_tests_and_holds_the_diff(tmp_path: Path) -> None:
    """--junit writes valid JUnit XML: a suite per file with its counts, a failure per failed
    test holding the diff; the exit code is still 1."""
    good = _file(tmp_path, _test(NAN_LOSS), "good.toml")
    bad = _file(
        tmp_path,
        _test(NAN_LOSS).replace('name = "t"', 'name = "a <b> & c"')
        + _expect("nan-grad", "firing", 9),
        "bad.toml",
    )
    report = tmp_path / "junit.xml"
    result = _run(str(good), str(bad), "--junit", str(report))
    assert result.exit_code == 1
    root = ET.parse(report).getroot()
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "2", "1")
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in suites] == [
        (str(good), "1", "0"),
        (str(bad), "1", "1"),
    ]
    (case,) = suites[1].findall("testcase")
    assert case.get("name") == "a <b> & c"
    failure = case.find("failure")
    assert failure is not None and failure.text is not None
    assert "    - nan-grad firing line=9" in failure.text
    assert "    + nan-grad firing line=2 " in failure.text
    assert suites[0].find("testcase/failure") is None
    assert not list(tmp_path.glob("*.tmp"))


def test_junit_stays_valid_xml_with_control_characters_in_the_log(tmp_path: Path) -> None:
    """A log line's BEL and U+FFFF reach the report escaped, so it still parses."""
    log = "\nWARNING GPU telemetry disabled \\u0007 \\uFFFF\n"  # TOML escapes
    path = _file(tmp_path, _test(_expect("nvml-disabled", "firing", 9), log=log))
    report = tmp_path / "junit.xml"
    assert _run(str(path), "--junit", str(report)).exit_code == 1
    failure = ET.parse(report).getroot().find("testsuite/testcase/failure")
    assert failure is not None and failure.text is not None
    assert "telemetry disabled \\x07 \ufffd" in failure.text


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ('[[test]\nname = "x"\n', 1, "invalid TOML: "),
        (
            'rule_pack = ["x.toml"]\n[[test]]\nname = "t"\n',
            1,
            "unknown key 'rule_pack' at the top of a test file (expected: rule_packs, test)",
        ),
        (_test(NAN_LOSS, head="strikt = true\n"), 3, "unknown key 'strikt' in a [[test]]"),
        (
            _test(_expect("nan-loss", "firing", 2, 'sumary_contains = "x"\n')),
            13,
            "unknown key 'sumary_contains' in a [[test.expect]]",
        ),
        (
            '[[test]]\nname = "t"\ninput_file = "gone.log"\n' + NAN_LOSS,
            3,
            "input_file 'gone.log' not found (",
        ),
        (_test(_expect("nan-los", "firing", 2)), 10, "unknown rule 'nan-los' (loaded: "),
        (
            _test(_expect("nan-loss", "fired", 2)),
            11,
            'status must be "firing" or "resolved", not \'fired\'',
        ),
        (_test(_expect("nan-loss", "firing", 0)), 12, "line must be a line number (1 or more)"),
        (
            _test(NAN_LOSS, head="blocks = [0]\n"),
            3,
            "blocks must be a list of block sizes in bytes",
        ),
        (_test(""), 1, "test 't' checks nothing; add [[test.expect]] tables, or strict = true"),
        ('rule_packs = ["nope.toml"]\n' + _test(NAN_LOSS), 1, "rule pack 'nope.toml' not found"),
        (_test(NAN_LOSS) + _test(NAN_LOSS), 18, "a second test named 't'; rename one"),
    ],
)
def test_a_broken_test_file_is_one_line_and_exit_2(
    tmp_path: Path, body: str, line: int, message: str
) -> None:
    """Typos and wrong values never pass silently: one `Error: file:line: ...` line, exit 2."""
    path = _file(tmp_path, body)
    result = _run(str(path))
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"Error: {path}:{line}: {message}")
    assert result.output.count("\n") == 1
    assert "Traceback" not in result.output


def test_a_folder_runs_every_test_file_in_it(tmp_path: Path) -> None:
    """`logwatch test FOLDER` runs each `*.test.toml` under it, subfolders too, and no other
    file (a pack beside its tests is no test file); their tests count together."""
    (tmp_path / "deeper").mkdir()
    _file(tmp_path, _test(NAN_LOSS), "a.test.toml")
    _file(tmp_path / "deeper", _test(NAN_LOSS), "b.test.toml")
    _file(tmp_path, '[[rule]]\nid = "x"\n', "a.toml")  # a pack: not read as tests
    result = _run(str(tmp_path))
    assert (result.exit_code, result.output) == (0, "2 tests, 0 failed\n")


def test_a_folder_without_test_files_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A folder with no `*.test.toml` in it says so in one line (how to fix it too), exit 2."""
    _file(tmp_path, '[[rule]]\nid = "x"\n', "pack.toml")
    result = _run(str(tmp_path))
    assert result.exit_code == 2
    assert result.output == (
        f"Error: {tmp_path}: no *.test.toml test files in this folder; name a test file, or "
        "put each pack's tests beside it as PACK.test.toml\n"
    )
