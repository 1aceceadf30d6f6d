"""The classify rule type: summary-only details, ordered cases with their own fix and severity,
messages wrapped over two lines in any batch split, and load errors at file:line."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from logwatch.alerts import AlertEvent, Severity
from logwatch.engine import Engine
from logwatch.errors import RulesError
from logwatch.parse import parse_lines
from logwatch.rules.loader import builtin_rules_dir, load_rules

RULES = load_rules([builtin_rules_dir()])


def run(lines: list[str], *, split: int | None = None) -> list[AlertEvent]:
    """The events of the built-in rules over `lines`, in one batch or cut before `split`."""
    frame = parse_lines(pl.Series(lines), source="t.log", first_line=1, default_year=2026)
    engine = Engine(RULES)
    if split is None:
        return engine.process(frame)
    return engine.process(frame.slice(0, split)) + engine.process(frame.slice(split))


OOM = (
    "RuntimeError: CUDA out of memory. Tried to allocate {} (GPU 0; 15.78 GiB total capacity; "
    "14.21 GiB already allocated; 3.06 MiB free; 14.51 GiB reserved in total by PyTorch)"
)


def test_details_fill_the_summary_but_are_not_the_identity() -> None:
    """Two OOMs asking for different sizes are one alert (no labels); its summary names the
    first one's GPU, size requested and memory free."""
    events = run([OOM.format("20.00 MiB"), OOM.format("1.50 GiB")])
    assert [(e.rule, e.line, dict(e.labels)) for e in events] == [("cuda-oom", 1, {})]
    assert "on GPU 0: tried to allocate 20.00 MiB with 3.06 MiB free of 15.78 GiB" in (
        events[0].summary
    )


def test_each_case_has_its_own_severity_and_fix() -> None:
    """Xid 13 is a warning about the application, Xid 48 a critical hardware error; the same
    code on the same GPU again is the same alert, another code another one."""
    lines = [
        "NVRM: Xid (PCI:0000:44:00): 13, pid=60880, name=python, Graphics Exception on GPC 0",
        "NVRM: Xid (PCI:0000:44:00): 13, pid=60880, name=python, Graphics Exception on GPC 1",
        "NVRM: Xid (PCI:0000:44:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
        "NVRM: Xid (PCI:0000:45:00): 999, a code with no case",
    ]
    events = run(lines)
    got = [(e.line, e.labels["code"], e.severity) for e in events]
    assert got == [
        (1, "13", Severity.WARNING),
        (3, "48", Severity.CRITICAL),
        (4, "999", Severity.WARNING),
    ]
    assert "compute-sanitizer" in events[0].fix and "RMA" in events[1].fix
    assert events[2].summary.startswith("Xid 999 on GPU 0000:45:00")
    assert "Xid catalog" in events[2].fix


def test_an_nvml_version_mismatch_is_not_told_to_pip_install() -> None:
    """The driver/library mismatch gets a reboot / module reload, not `pip install`."""
    (event,) = run(["Failed to initialize NVML: Driver/library version mismatch"])
    assert event.rule == "nvml-disabled" and "reboot" in event.fix
    assert "Installing nvidia-ml-py does not help" in event.fix


@pytest.mark.parametrize("split", [1, 2])
def test_a_wrapped_message_fires_once_in_any_batch_split(split: int) -> None:
    """`CUDA out of` / `memory. Tried to allocate` fires at the second line with its details,
    whether the two lines come in one batch or two."""
    lines = [
        "step 10 | loss 2.1",
        "[rank1]: RuntimeError: CUDA out of",
        "[rank1]: memory. Tried to allocate 20.00 MiB (GPU 1; 15.78 GiB total capacity)",
    ]
    whole = [e.to_json() for e in run(lines)]
    assert [(e["line"], e["rule"]) for e in whole] == [(3, "cuda-oom")]
    assert "GPU 1: tried to allocate 20.00 MiB" in whole[0]["summary"]
    assert [e.to_json() for e in run(lines, split=split)] == whole


def test_a_line_after_a_hit_is_not_joined_into_a_second_event() -> None:
    """A self-contained match followed by a continuation line fires once, at its own line."""
    events = run([OOM.format("20.00 MiB"), " memory. Tried to allocate 2.00 GiB"])
    assert [(e.rule, e.line) for e in events] == [("cuda-oom", 1)]


def write_pack(tmp_path: Path, body: str) -> Path:
    """A rule pack with one classify rule whose extra keys are `body`."""
    pack = tmp_path / "pack.toml"
    pack.write_text(
        '[[rule]]\nid = "x"\ntype = "classify"\nseverity = "warning"\nsummary = "s"\n'
        f"pattern = 'Xid (?P<code>\\d+)'\n{body}"
    )
    return pack


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '[[rule.cases]]\nlabels = { code = "13" }\nsumary = "typo"\n',
            ":1: rule 'x': cases item 1: unknown key 'sumary' (expected: pattern, labels, summary, fix, severity, ignore)",
        ),
        (
            '[[rule.cases]]\nlabels = { gpu = "0" }\n',
            ":1: rule 'x': cases item 1: labels gpu are not named groups of 'pattern' (it has: code)",
        ),
        (
            '[[rule.cases]]\nfix = "no way to say which lines"\n',
            ":1: rule 'x': cases item 1: needs a 'pattern' or 'labels' to say which lines it is",
        ),
        (
            '[[rule.cases]]\nlabels = { code = "13" }\nseverity = "fatal"\n',
            ":1: rule 'x': cases item 1: unknown severity 'fatal' (expected one of: info, warning, critical)",
        ),
        (
            '[[rule.cases]]\nlabels = { code = "13" }\nsummary = "Xid {cod}"\n',
            ":1: cases item 1: unknown placeholder {cod} in summary",
        ),
        (
            "details = ['pid=(?P<line>\\d+)']\n",
            ":1: rule 'x': details group 'line' is a placeholder of its own: rename it",
        ),
        (
            "details = ['pid=\\d+']\n",
            ":1: rule 'x': details item 1: 'pid=\\\\d+' has no named group (?P<name>...) to fill a placeholder",
        ),
    ],
)
def test_bad_cases_and_details_are_file_line_errors(
    tmp_path: Path, body: str, message: str
) -> None:
    """A broken case or detail is one `file:line:` error naming the rule and what is wrong."""
    pack = write_pack(tmp_path, body)
    with pytest.raises(RulesError, match="^" + re.escape(f"{pack}{message}")):
        load_rules([pack])


def test_a_detail_placeholder_is_accepted_in_summaries(tmp_path: Path) -> None:
    """A summary may name a detail's group; a line without it shows '?'."""
    pack = write_pack(tmp_path, "details = ['pid=(?P<pid>\\d+)']\n").read_text()
    path = tmp_path / "pack.toml"
    path.write_text(pack.replace('summary = "s"', 'summary = "Xid {labels.code} pid {pid}"'))
    rules = load_rules([path])
    frame = parse_lines(pl.Series(["Xid 13 pid=42", "Xid 14 no pid"]), source="t.log", first_line=1)
    assert [e.summary for e in Engine(rules).process(frame)] == ["Xid 13 pid 42", "Xid 14 pid ?"]
