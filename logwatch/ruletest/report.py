"""`logwatch test` results as promtool-style text and as JUnit XML for CI."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from logwatch.atomic import write_atomic
from logwatch.errors import RuleTestError
from logwatch.redact import visible
from logwatch.ruletest.run import RuleTestResult
from logwatch.words import counted

_NOT_XML = re.compile("[\ufffe\uffff]")  # valid UTF-8, but no XML 1.0 document may hold them


def failure_lines(result: RuleTestResult) -> list[str]:
    """What is wrong with one failed test, indented under its header: the diff of expected (-)
    against got (+), each block size whose events differ, rule errors."""
    lines: list[str] = []
    if any(line.mark != " " for line in result.diff):
        lines.append("  expected (-) vs got (+):")
        lines.extend(f"    {line.mark} {visible(line.text)}" for line in result.diff)
    for block in result.block_diffs:
        lines.append(
            f"  blocks={block.block_bytes}: whole-file replay (-) vs in blocks of "
            f"{counted(block.block_bytes, 'byte')} (+):"
        )
        if all(line.mark == " " for line in block.diff):
            lines.append("    the same events, in a different order")
        lines.extend(f"    {line.mark} {visible(line.text)}" for line in block.diff)
    lines.extend(f"  error: {visible(error)}" for error in result.errors)
    return lines


def report_lines(results: Sequence[RuleTestResult]) -> list[str]:
    """Each failed test (`FAILED: file:line: name` and what is wrong), then `N tests, M failed`."""
    lines: list[str] = []
    failed = [result for result in results if not result.passed]
    for result in failed:
        lines.append(f"FAILED: {visible(result.test.where)}: {visible(result.test.name)}")
        lines.extend(failure_lines(result))
        lines.append("")
    lines.append(f"{counted(len(results), 'test')}, {len(failed)} failed")
    return lines


def junit_xml(results: Sequence[RuleTestResult]) -> bytes:
    """A JUnit XML document: one <testsuite> per test file, one <testcase> per test, a
    <failure> holding the diff for each failed one."""
    root = ET.Element("testsuites", name="logwatch test")
    files: dict[Path, list[RuleTestResult]] = {}
    for result in results:
        files.setdefault(result.file, []).append(result)
    for file, group in files.items():
        suite = ET.SubElement(root, "testsuite", name=_xml(str(file)))
        for result in group:
            case = ET.SubElement(
                suite, "testcase", name=_xml(result.test.name), classname=_xml(str(file))
            )
            if not result.passed:
                failure = ET.SubElement(
                    case, "failure", message=f"{_xml(result.test.name)}: events not as expected"
                )
                failure.text = _NOT_XML.sub("\ufffd", "\n".join(failure_lines(result)))
        _counts(suite, group)
    _counts(root, results)
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document + b"\n"


def write_junit(path: Path, results: Sequence[RuleTestResult]) -> None:
    """Write the JUnit XML report to `path` atomically (a CI reader never sees half a file)."""
    try:
        write_atomic(path, junit_xml(results), mode=0o644)
    except OSError as exc:
        raise RuleTestError(
            f"{path}: cannot write the JUnit report: {exc.strerror or exc} (check the folder exists and is writable)"
        ) from None


def _counts(element: ET.Element, results: Sequence[RuleTestResult]) -> None:
    element.set("tests", str(len(results)))
    element.set("failures", str(sum(not r.passed for r in results)))
    element.set("errors", "0")


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", visible(text))
