"""Typed rule parameters: one validation per kind, and errors that name the parameter and file:line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from logwatch.errors import RulesError
from logwatch.rules.anomaly import ANOMALY_RULE_TYPES
from logwatch.rules.classify import CLASSIFY_RULE_TYPES
from logwatch.rules.crash import CRASH_RULE_TYPES
from logwatch.rules.gpu import GPU_RULE_TYPES
from logwatch.rules.loader import load_rules
from logwatch.rules.log import LOG_RULE_TYPES, MatchRule, StallRule, StreakRule
from logwatch.rules.params import Kind, Param, ParamError, WrongType, polars_accepts
from logwatch.rules.registry import RULE_TYPES, duration_params
from logwatch.rules.scale import SCALE_RULE_TYPES


def test_an_integer_is_accepted_for_a_float() -> None:
    """6 for a float parameter is 6.0, a float."""
    value = Param("ratio", Kind.FLOAT).validate(6)
    assert value == 6.0 and isinstance(value, float)


@pytest.mark.parametrize("kind", [Kind.INT, Kind.FLOAT])
def test_a_bool_is_never_a_number(kind: Kind) -> None:
    """true is refused for an int or float parameter, with the type it needs."""
    with pytest.raises(WrongType, match=rf"'count' must be of type {kind.toml}, got True"):
        Param("count", kind).validate(True)


def test_a_duration_is_parsed_to_seconds() -> None:
    """ "10m" is 600.0 seconds; a bad duration says what is accepted, naming the parameter."""
    param = Param("hold", Kind.DURATION)
    assert param.validate("10m") == 600.0
    with pytest.raises(
        ParamError,
        match=r"^hold: invalid duration '10 min' \(expected a number with a unit: ms, s, m, h, d, w",
    ):
        param.validate("10 min")


def test_choices_minimum_and_positive_are_enforced() -> None:
    """A string outside its choices, an int under its minimum and a zero positive duration fail."""
    with pytest.raises(ParamError, match=r"^scope must be one of: gpu, run; got 'node'$"):
        Param("scope", Kind.STRING, choices=("gpu", "run")).validate("node")
    with pytest.raises(ParamError, match=r"^count must be at least 1, got 0$"):
        Param("count", Kind.INT, minimum=1).validate(0)
    with pytest.raises(ParamError, match=r"^stall_after must be positive, got '0s'$"):
        Param("stall_after", Kind.DURATION, positive=True).validate("0s")


def test_sql_and_regex_are_compiled_once() -> None:
    """An SQL parameter becomes a polars expression, a regex parameter a compiled pattern."""
    assert isinstance(Param("condition", Kind.SQL).validate("loss > 1"), pl.Expr)
    assert Param("pattern", Kind.REGEX).validate("(?P<rank>\\d+)").groupindex == {"rank": 1}


def test_a_regex_polars_cannot_run_is_refused() -> None:
    """A pattern Python accepts but polars' regex dialect does not (a look-ahead) is refused."""
    with pytest.raises(ParamError, match=r"^pattern 'a\(\?=b\)' is not a valid regex"):
        Param("pattern", Kind.REGEX).validate("a(?=b)")


def test_registry_assembles_every_rule_type() -> None:
    """RULE_TYPES is every rule-type module's types together, and the duration parameters come
    from it."""
    modules = (
        LOG_RULE_TYPES,
        GPU_RULE_TYPES,
        CLASSIFY_RULE_TYPES,
        ANOMALY_RULE_TYPES,
        SCALE_RULE_TYPES,
        CRASH_RULE_TYPES,
    )
    assert set(RULE_TYPES) == {name for types in modules for name in types}
    assert len(RULE_TYPES) == sum(len(types) for types in modules)
    for types in modules:  # each name's type is its own module's (imported when looked up)
        for name, rule_type in types.items():
            assert name in RULE_TYPES and RULE_TYPES[name] is rule_type
    assert "no-such-type" not in RULE_TYPES
    with pytest.raises(KeyError):
        RULE_TYPES["no-such-type"]
    assert sorted(RULE_TYPES) == [
        "classify",
        "crash",
        "drop",
        "gpu-hold",
        "gpu-rise",
        "halving",
        "match",
        "nonfinite",
        "spike",
        "stalled",
        "streak",
    ]
    assert sorted(duration_params()) == ["hold", "quiet_after", "stall_after"]


def test_a_pack_loads_only_the_modules_of_the_rule_types_it_names(tmp_path: Path) -> None:
    """Loading a pack of one `nonfinite` rule imports none of the other rule types' modules
    (each costs every command's start-up time), and those types still load after."""
    pack = tmp_path / "nl.toml"
    pack.write_text(
        '[[rule]]\nid = "nan-loss"\ntype = "nonfinite"\nseverity = "critical"\n'
        'column = "loss"\nsummary = "loss is {value}"\n'
    )
    others = ["logwatch.rules.anomaly", "logwatch.rules.classify", "logwatch.rules.crash"]
    others.append("logwatch.rules.scale")
    code = (
        "import sys; from pathlib import Path; from logwatch.rules.loader import load_rules; "
        f"specs = load_rules([Path({str(pack)!r})]); "
        f"print([m for m in {others!r} if m in sys.modules], [s.type for s in specs])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[0] == "[] ['nonfinite']"


def write_pack(tmp_path: Path, body: str) -> Path:
    """A rule pack with one rule of `body`'s type and parameters."""
    pack = tmp_path / "pack.toml"
    pack.write_text(f'[[rule]]\nid = "x"\nseverity = "warning"\nsummary = "s"\n{body}')
    return pack


def test_builders_get_typed_values(tmp_path: Path) -> None:
    """Rules are built from typed values: seconds for a duration (its default too), expressions,
    the regex's group names."""
    (stall,) = load_rules([write_pack(tmp_path, 'type = "stalled"\n')])
    assert stall.rule == StallRule(stall_after_s=600.0) and stall.params == {}
    (match,) = load_rules(
        [write_pack(tmp_path, 'type = "match"\npattern = "rank(?P<rank>\\\\d)"\n')]
    )
    assert isinstance(match.rule, MatchRule) and match.rule.label_names == ("rank",)
    streak_pack = 'type = "streak"\napplies = "snapshot"\ncondition = "gpu_keys = 0"\ncount = 3\n'
    (streak,) = load_rules([write_pack(tmp_path, streak_pack)])
    assert isinstance(streak.rule, StreakRule) and isinstance(streak.rule.condition, pl.Expr)
    assert streak.params["count"] == 3


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'type = "streak"\napplies = "snapshot"\ncondition = "gpu_keys = = 0"\ncount = 3\n',
            ":1: rule 'x': condition 'gpu_keys = = 0' is not a valid SQL expression: ",
        ),
        (
            'type = "streak"\napplies = "snapshotz"\ncondition = "gpu_keys = 0"\ncount = 3\n',
            ":1: rule 'x': applies 'snapshotz': expression refers to something the frame lacks: ",
        ),
        (
            'type = "match"\npattern = "(unclosed"\n',
            ":1: rule 'x': pattern '(unclosed' is not a valid regex: ",
        ),
        (
            'type = "gpu-hold"\ncondition = "util_gpu < 5"\nhold = "2m"\nvalue = "nope + 1"\n',
            ":1: rule 'x': value 'nope + 1' is not a valid SQL expression over GPU columns (ts, gpu, ",
        ),
        (
            'type = "stalled"\nstall_after = 600\n',
            ":6: 'stall_after' must be of type str (a duration string such as '30s' or '10m'), got 600",
        ),
    ],
)
def test_bad_values_name_the_parameter_and_file_line(
    tmp_path: Path, body: str, message: str
) -> None:
    """A bad SQL expression, regex or duration in a pack is `file:line:` plus the parameter's name."""
    pack = write_pack(tmp_path, body)
    with pytest.raises(RulesError, match="^" + re.escape(f"{pack}{message}")):
        load_rules([pack])


def _pack(tmp_path: Path, *rules: str) -> Path:
    path = tmp_path / "pack.toml"
    path.write_text(
        "".join(
            f'[[rule]]\nid = "{rule_id}"\ntype = "match"\nseverity = "warning"\n'
            f'pattern = "{pattern}"\nsummary = "s"\n\n'
            for rule_id, pattern in (rule.split("=", 1) for rule in rules)
        )
    )
    return path


def test_polars_checks_a_packs_regexes_together_and_blames_the_one_it_refuses(
    tmp_path: Path,
) -> None:
    """A pack's regexes go to polars in one query; when polars refuses one (a look-ahead),
    the problems are exactly those checking each regex alone gives, in file order: the refused
    regex at its own line, then a later rule's problem; load_rules raises the first."""
    from logwatch.rules.catalog import check_packs
    from logwatch.rules.loader import _compile_pack, compile_pack

    path = _pack(tmp_path, "a=loss", "b=a(?=b)", "c=(unclosed", "d=fine")
    problems = [str(p) for p in compile_pack(path).problems]
    assert problems == [
        str(p) for p in _compile_pack(path, path.read_bytes(), None).problems
    ]  # one by one
    assert [p.split(": ")[1] for p in problems] == ["rule 'b'", "rule 'c'"]
    assert "look-around" in problems[0] and "missing )" in problems[1]
    with pytest.raises(RulesError) as raised:
        load_rules([path])
    assert str(raised.value) == problems[0]
    assert check_packs([path]).rules == 2
    assert [spec.id for spec in load_rules([_pack(tmp_path, "a=loss", "d=fin(e)")])] == ["a", "d"]


def test_a_valid_packs_regexes_reach_polars_in_one_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading a valid pack asks polars about all its regexes at once, not one query each."""
    import logwatch.rules.loader as loader

    asked: list[list[str]] = []

    def spy(regexes: list[str]) -> bool:
        asked.append(list(regexes))
        return polars_accepts(regexes)

    monkeypatch.setattr(loader, "polars_accepts", spy)
    specs = load_rules([_pack(tmp_path, "a=loss", "b=grad (?P<g>\\\\d+)", "c=x|y")])
    assert [spec.id for spec in specs] == ["a", "b", "c"]
    assert asked == [["loss", "grad (?P<g>\\d+)", "x|y"]]
    assert not polars_accepts(["ok", "a(?=b)"]) and polars_accepts([])


def test_a_pack_is_compiled_once_for_its_name_and_bytes(tmp_path: Path) -> None:
    """Loading a pack again gives the rules compiled the first time; a pack rewritten in place
    is compiled again, and a broken pack's problem is raised at every load."""
    pack = tmp_path / "p.toml"
    pack.write_text(
        '[[rule]]\nid = "a"\ntype = "match"\nseverity = "warning"\nsummary = "s"\npattern = "x"\n'
    )
    first, again = load_rules([pack]), load_rules([pack])
    assert first == again and first[0].rule is again[0].rule
    pack.write_text(pack.read_text().replace('pattern = "x"', 'pattern = "y"'))
    rewritten = load_rules([pack])
    assert rewritten[0].rule is not first[0].rule and rewritten[0].params["pattern"] == "y"
    pack.write_text(pack.read_text().replace('pattern = "y"', 'pattern = "(y"'))
    for _ in range(2):
        with pytest.raises(RulesError, match=r"p\.toml:\d+: .*pattern"):
            load_rules([pack])
