"""The Hypothesis profiles: the suite runs a quarter of each property's examples by default, all of
them with `HYPOTHESIS_PROFILE=deep`, and a misspelt profile stops the run with a line saying so."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support import properties


@pytest.fixture
def restore_profile() -> Iterator[None]:
    """Put back the profile this run loaded once the test is done."""
    loaded = settings.get_current_profile_name()
    yield
    settings.load_profile(loaded)


def test_the_run_loads_the_profile_the_environment_names(pytestconfig: pytest.Config) -> None:
    """conftest loaded `HYPOTHESIS_PROFILE`'s profile (dev when unset) before the test modules
    computed their counts, unless `--hypothesis-profile` chose one."""
    wanted = pytestconfig.getoption("hypothesis_profile", None) or properties.chosen()
    assert settings.get_current_profile_name() == wanted


@pytest.mark.usefixtures("restore_profile")
def test_dev_runs_a_quarter_of_each_count_and_deep_all_of_it() -> None:
    """dev: a quarter, rounded (300 -> 75, 150 -> 38, 6 -> 2), at least one; deep: the counts
    as written."""
    settings.load_profile("dev")
    assert [properties.examples(n) for n in (500, 300, 150, 60, 40, 6, 1)] == [
        125,
        75,
        38,
        15,
        10,
        2,
        1,
    ]
    settings.load_profile("deep")
    assert [properties.examples(n) for n in (500, 300, 150, 60, 40, 6)] == [
        500,
        300,
        150,
        60,
        40,
        6,
    ]
    assert settings().max_examples == 100  # a property without a count: Hypothesis's own 100


def test_the_environment_chooses_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset or empty: dev; `deep`: deep; a name no profile has: an error naming the fix."""
    monkeypatch.delenv(properties.ENV, raising=False)
    assert properties.chosen() == "dev"
    monkeypatch.setenv(properties.ENV, "deep")
    assert properties.chosen() == "deep"
    monkeypatch.setenv(properties.ENV, "Deep")
    with pytest.raises(ValueError) as raised:
        properties.chosen()
    assert str(raised.value) == (
        "HYPOTHESIS_PROFILE='Deep' is not a Hypothesis profile of this suite; "
        "fix: set it to one of dev, deep (or unset it for dev)"
    )


def test_every_property_count_scales_with_the_profile() -> None:
    """No test writes a bare `max_examples=N` (it would override the profile and run N examples
    at every change): each count goes through `examples(N)`."""
    tests = Path(__file__).resolve().parent
    bare = [
        f"{path.relative_to(tests)}:{number}: {line.strip()}"
        for path in sorted(tests.rglob("*.py"))
        if path.name != "properties.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"max_examples\s*=\s*\d", line)
    ]
    assert bare == [], (
        "write max_examples=examples(N) (tests/support/properties.py):\n" + "\n".join(bare)
    )
