"""State files read back are checked field by field at load: valid JSON of the wrong types is set
aside like a corrupt file (said once), never a traceback on every start, and the next NaN is
still reported."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from logwatch.testing import running
from tests.support.tailkit import BUILTIN, Tail


def nan_log(first: int, last: int, nan_at: int | None = None) -> bytes:
    """Step lines with a finite loss, a NaN one at step `nan_at`."""
    return "".join(
        f"step={i} loss={'nan' if i == nan_at else '2.5'}\n" for i in range(first, last + 1)
    ).encode()


Edit = Callable[[dict[str, Any]], None]


def _source(data: dict[str, Any]) -> dict[str, Any]:
    (state,) = data["sources"].values()
    return state  # type: ignore[no-any-return]  # JSON


def _set_stat(name: str, value: object) -> Edit:
    return lambda data: _source(data)["stats"].__setitem__(name, value)


def _set_rule_state(rule: str, name: str, value: object) -> Edit:
    return lambda data: _source(data)["rule_states"][rule].__setitem__(name, value)


def _set_active(name: str, value: object) -> Edit:
    return lambda data: _source(data)["active"][0].__setitem__(name, value)


def _set_state(name: str, value: object) -> Edit:
    return lambda data: _source(data).__setitem__(name, value)


def _set_top(name: str, value: object) -> Edit:
    return lambda data: data.__setitem__(name, value)


WRONG = {
    "stats.lines-string": _set_stat("lines", "5"),  # the reported crash: str + int
    "stats.runs-float": _set_stat("runs", 1.5),
    "stats.first_step-string": _set_stat("first_step", "1"),
    "stats.last_loss-string": _set_stat("last_loss", "2.5"),
    "stats.fired-count-string": _set_stat("fired", {"nan-loss": "1"}),
    "stats.last_ts-not-a-time": _set_stat("last_ts", "yesterday"),
    "last_step-string": _set_state("last_step", "12"),
    "run_id-number": _set_state("run_id", 7),
    "rule_states-list": _set_state("rule_states", []),
    "rule-state-field-string": _set_rule_state("nan-loss", "bad", "not an object"),
    "active-line-string": _set_active("line", "12"),
    "active-labels-number": _set_active("labels", {"gpu": 0}),
    "active-value-word": _set_active("value", "lots"),
    "seq-string": _set_top("seq", "3"),
}


@pytest.mark.parametrize("edit", WRONG.values(), ids=WRONG.keys())
def test_a_checkpoint_of_wrong_typed_values_is_set_aside_and_the_next_nan_reported(
    tmp_path: Path, edit: Edit
) -> None:
    """A checkpoint whose values have the wrong types is moved aside with one message; tail goes
    on from the files' ends and reports the NaN that comes next."""
    log = tmp_path / "a.log"
    log.write_bytes(nan_log(1, 10, nan_at=10))
    first = Tail(tmp_path, rules=BUILTIN)
    with running(first.driver) as driver:
        driver.sync()
    assert first.alerts() == [(10, "nan-loss", "firing")]
    checkpoint = tmp_path / "state" / "checkpoint.json"
    data = json.loads(checkpoint.read_text(encoding="utf-8"))
    edit(data)
    checkpoint.write_text(json.dumps(data), encoding="utf-8")

    second = Tail(tmp_path, rules=BUILTIN, start="end")
    with running(second.driver) as driver:
        driver.sync()
        with open(log, "ab") as out:
            out.write(nan_log(11, 14) + nan_log(15, 15, nan_at=15))
        driver.sync()
    assert second.said("corrupt checkpoint") == 1
    assert len(list(checkpoint.parent.glob("checkpoint.json.corrupt-*"))) == 1
    assert second.alerts()[-1] == (15, "nan-loss", "firing")
    assert not any("Traceback" in message for message in second.status)


def test_a_delta_line_of_wrong_types_is_skipped_not_a_crash(tmp_path: Path) -> None:
    """A delta line whose `gone` lists are not names (valid JSON, wrong types) is not applied;
    the checkpoint before it still counts, and tail resumes after the lines it covers."""
    log = tmp_path / "a.log"
    log.write_bytes(nan_log(1, 5))
    first = Tail(tmp_path, rules=BUILTIN)
    with running(first.driver) as driver:
        driver.sync()
    bad = {"seq": 99, "files": {}, "gone": [["a"]], "sources": {}, "gone_sources": [{}]}
    with open(tmp_path / "state" / "checkpoint.delta", "a", encoding="utf-8") as out:
        out.write(json.dumps(bad) + "\n")
    with open(log, "ab") as out:
        out.write(nan_log(6, 6, nan_at=6))
    second = Tail(tmp_path, rules=BUILTIN)
    with running(second.driver) as driver:
        driver.sync()
    assert second.said("corrupt checkpoint") == 0
    assert second.alerts() == [(6, "nan-loss", "firing")]


def test_a_good_checkpoint_still_resumes(tmp_path: Path) -> None:
    """The schema accepts what tail itself wrote: the second run resumes, nothing set aside."""
    log = tmp_path / "a.log"
    log.write_bytes(nan_log(1, 10, nan_at=10))
    first = Tail(tmp_path, rules=BUILTIN)
    with running(first.driver) as driver:
        driver.sync()
    with open(log, "ab") as out:
        out.write(nan_log(11, 12))
    second = Tail(tmp_path, rules=BUILTIN)
    with running(second.driver) as driver:
        driver.sync()
    assert second.said("corrupt checkpoint") == 0
    assert second.alerts() == [(11, "nan-loss", "resolved")]
