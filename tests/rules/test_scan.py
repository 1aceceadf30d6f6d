"""Gate scans find, for each gate, exactly the lines its own match selects, however the plain
gates are grouped into unions."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.rules.base import Needs, gate_rows
from logwatch.rules.gates import NEVER
from logwatch.rules.scan import UNION_ALTERNATIVES, GateScan
from tests.support.properties import examples

PLAIN = ["ab", "(?i)ab|cd", "AB", "b|c", r"a\|b", "^ab", "cd$", "|".join("ABCD")]
# lines made of the gates' pieces, so that most match some gates and not others
LINES = st.lists(
    st.sampled_from(["ab", "AB", "aB", "cd", "CD", "a|b", "bc", "x", " "]), max_size=4
).map("".join)
OWN = {"bc-rows": pl.col("text").str.contains("bc", literal=True), NEVER: pl.lit(False)}


def _rows(gates: list[str]) -> dict[str, pl.Expr]:
    rows = {gate: gate_rows(Needs(frozenset(), gate)) for gate in gates if gate != NEVER}
    rows.update({gate: expr for gate, expr in OWN.items() if gate in gates})
    return rows


@settings(max_examples=examples(80), deadline=None)
@given(
    st.lists(st.sampled_from([*PLAIN, *OWN]), min_size=1, unique=True),
    st.lists(LINES, max_size=60),
    st.none() | st.integers(0, 2**16),
)
def test_each_gate_hits_the_lines_its_own_match_selects(
    gates: list[str], lines: list[str], subset: int | None
) -> None:
    rows = _rows(gates)
    asked = None if subset is None else [g for i, g in enumerate(rows) if subset >> i & 1]
    frame = pl.DataFrame({"text": lines}, schema={"text": pl.String})
    hits = GateScan(rows).hits(frame, asked)
    assert list(hits) == [gate for gate in rows if asked is None or gate in asked]
    for gate, found in hits.items():
        want = frame.select(rows[gate].fill_null(False).arg_true()).to_series()
        assert found.to_list() == want.to_list(), gate


def test_a_line_matching_one_gate_of_a_union_is_that_gates_alone() -> None:
    frame = pl.DataFrame({"text": ["ab", "AB", "x", "xcd"]})
    hits = GateScan(_rows(["ab", "AB", "cd$"])).hits(frame)
    assert {gate: found.to_list() for gate, found in hits.items()} == {
        "ab": [0],
        "AB": [1],
        "cd$": [3],
    }


def test_plain_gates_share_passes_and_others_get_their_own() -> None:
    wide = "|".join(f"w{i:02d}" for i in range(UNION_ALTERNATIVES - 2))
    scan = GateScan(_rows([*PLAIN[:3], wide, *OWN]))
    unions = scan.unions
    assert sorted(g for union in unions for g in union) == sorted([*PLAIN[:3], wide])
    assert len(unions) == 2  # the wide gate leaves no room for the three others
    for union in unions:
        assert sum(len(g.split("|")) for g in union) <= UNION_ALTERNATIVES or len(union) == 1


def test_a_case_insensitive_gate_is_matched_in_a_union_of_its_own() -> None:
    """A gate with a `(?i:...)` group shares no union (its spellings fill the prefilter), and the
    lines each gate selects stay those of its own match."""
    folded = "Error|(?i:killed|aborted)"
    scan = GateScan(_rows(["ab", "cd$", folded]))
    assert sorted(sorted(union) for union in scan.unions) == [[folded], ["ab", "cd$"]]
    frame = pl.DataFrame({"text": ["ab", "KiLLed", "xcd", "Error", "killed ab"]})
    hits = {gate: found.to_list() for gate, found in scan.hits(frame).items()}
    assert hits == {"ab": [0, 4], "cd$": [2], folded: [1, 3, 4]}
