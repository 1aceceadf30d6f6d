"""Summary templates: `[?...]` clauses are left out when a placeholder in them has no value."""

from __future__ import annotations

from pathlib import Path

import pytest

from logwatch.template import fill, pieces

CRASHED = (
    "the run crashed[? at step {step}] (line {line})[?: rank {labels.rank} failed first]"
    "[? with {labels.exception}]"
)


def test_a_clause_with_every_value_shows_without_its_brackets() -> None:
    """Known step and rank: the clauses read as plain text."""
    got = fill(CRASHED, {"step": "80", "line": "28"}, {"rank": "3", "exception": "KeyError: 'x'"})
    assert got == "the run crashed at step 80 (line 28): rank 3 failed first with KeyError: 'x'"


def test_a_clause_with_a_missing_value_is_left_out() -> None:
    """No step (None), no rank label: neither `step ?` nor `rank ?`, the rest as written."""
    got = fill(CRASHED, {"step": None, "line": "5"}, {"exception": "KeyError: 'x'"})
    assert got == "the run crashed (line 5) with KeyError: 'x'"


def test_an_empty_value_counts_as_none_only_inside_a_clause() -> None:
    """An empty text drops a clause; outside one it shows as it is, as before."""
    assert fill("a[? b={x}] c={x}", {"x": ""}, {}) == "a c="


def test_outside_a_clause_a_missing_value_still_shows_a_question_mark() -> None:
    """A template that names a value without a clause keeps saying it is unknown."""
    assert fill("step {step}, gpu {labels.gpu}", {"step": None}, {}) == "step ?, gpu ?"


def test_brackets_that_open_no_clause_stay_literal() -> None:
    """`[rank 3]` in a user's summary is text, not a clause."""
    assert fill("[rank {labels.rank}] [x]", {}, {"rank": "3"}) == "[rank 3] [x]"


@pytest.mark.parametrize("template", ["a [?b {step}", "a [?b [?c]]", "[?a [?b] c]"])
def test_an_unclosed_or_nested_clause_is_an_error(template: str) -> None:
    """The loader reports it (ValueError with the template), instead of printing `[?`."""
    with pytest.raises(ValueError, match="optional clause"):
        pieces(template)


def test_a_count_agrees_with_its_noun() -> None:
    """`{value:count iteration}`: `1 iteration`, `2 iterations`, an irregular plural after `/`;
    inside a clause a missing count leaves the clause out, outside it shows `?` alone."""
    template = "{value:count iteration}[?: {n:count child/children}]"
    assert fill(template, {"value": "1", "n": "2"}, {}) == "1 iteration: 2 children"
    assert fill(template, {"value": "3", "n": "1"}, {}) == "3 iterations: 1 child"
    assert fill(template, {"value": None, "n": None}, {}) == "?"


def test_a_pack_may_count_but_takes_no_other_format(tmp_path: Path) -> None:
    """The loader accepts `{value:count iteration}` and refuses `{value:.2f}` with the fix."""
    from logwatch.errors import RulesError
    from logwatch.rules.loader import load_pack

    pack = tmp_path / "p.toml"
    head = '[[rule]]\nid = "x"\ntype = "match"\nseverity = "info"\npattern = "x"\n'
    pack.write_text(head + 'summary = "{line:count line}"\n')
    assert load_pack(pack)[0].summary == "{line:count line}"
    pack.write_text(head + 'summary = "{line:.2f}"\n')
    with pytest.raises(
        RulesError, match=r"placeholders take no format .* \{line:count iteration\}"
    ):
        load_pack(pack)


def test_a_clause_offers_alternatives_the_first_with_values_shown() -> None:
    """`[? at step {step}| at epoch {epoch}]`: the step when known, else the epoch (a Hugging
    Face line), else nothing: never `step ?`."""
    template = "loss is nan[? at step {step}| at epoch {epoch}] (line 8)"
    assert fill(template, {"step": "5", "epoch": "0.4"}, {}) == "loss is nan at step 5 (line 8)"
    assert fill(template, {"step": None, "epoch": "0.4"}, {}) == "loss is nan at epoch 0.4 (line 8)"
    assert fill(template, {"step": None, "epoch": None}, {}) == "loss is nan (line 8)"
