"""`logwatch test`: unit tests for rule packs, in TOML (an input log and the alerts it must give),
run through the replay driver and reported promtool-style or as JUnit XML."""

from logwatch.ruletest.report import junit_xml, report_lines, write_junit
from logwatch.ruletest.run import RuleTestResult, run_rule_test, run_test_files
from logwatch.ruletest.spec import (
    Expectation,
    RuleTest,
    RuleTestFile,
    load_test_file,
    load_test_files,
)

__all__ = [
    "Expectation",
    "RuleTest",
    "RuleTestFile",
    "RuleTestResult",
    "junit_xml",
    "load_test_file",
    "load_test_files",
    "report_lines",
    "run_rule_test",
    "run_test_files",
    "write_junit",
]
