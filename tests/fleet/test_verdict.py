"""The fleet post-mortem names the first failing rank: every generated cause, layout, torch line
form and culprit mode (bench/gen_fleet.py), skewed clocks, a silent culprit."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from logwatch.drivers.replay import ReplayOptions, replay
from logwatch.drivers.verdict import analyse
from logwatch.rules.loader import builtin_rules_dir, load_rules, pack_files
from logwatch.sources.expand import expand_inputs
from tests.support.paths import load_bench

BENCH = Path(__file__).resolve().parents[2] / "bench"


gen = load_bench("gen_fleet")
RULES = load_rules(pack_files(builtin_rules_dir()))


def _verdicts(tmp_path: Path, **spec: object) -> tuple[object, list[dict[str, str]]]:
    run = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=16, steps=4, **spec))
    result = replay(expand_inputs([str(run.root)]).files, RULES)
    # replay's own analysis (`analyse` of its facts, the default skew): its root-cause events
    assert result.fleet is not None
    return run, [dict(event.labels) for event in result.fleet.verdicts]


CASES = list(itertools.product(gen.LAYOUTS, gen.CAUSES, ("exits", "hangs"), gen.TORCH))


@pytest.mark.parametrize(("layout", "cause", "mode", "torch"), CASES)
def test_the_culprit_that_printed_its_error_is_the_verdict(
    tmp_path: Path, layout: str, cause: str, mode: str, torch: str
) -> None:
    """Exactly one root-cause: the culprit's global rank and host, its cause, first-error."""
    run, verdicts = _verdicts(
        tmp_path, layout=layout, cause=cause, mode=mode, torch=torch, seed=len(cause)
    )
    assert verdicts == [
        {
            "rank": str(run.culprit_rank),
            "host": run.culprit_host,
            "cause": run.expected_cause,
            "basis": "first-error",
            "victims": verdicts[0]["victims"],
        }
    ]
    assert int(verdicts[0]["victims"]) >= 8  # the other node's ranks at least; never the culprit


@pytest.mark.parametrize(("layout", "torch"), list(itertools.product(gen.LAYOUTS, gen.TORCH)))
def test_a_silent_culprit_is_named_as_likely(tmp_path: Path, layout: str, torch: str) -> None:
    """A culprit that printed nothing (no dmesg, hung): named, basis not first-error."""
    run, verdicts = _verdicts(tmp_path, layout=layout, mode="silent", torch=torch, seed=3)
    assert len(verdicts) == 1
    assert verdicts[0]["rank"] == str(run.culprit_rank)
    assert verdicts[0]["host"] == run.culprit_host
    assert verdicts[0]["cause"] == "none"
    assert verdicts[0]["basis"] == "missing-from-collective"
    assert verdicts[0]["victims"] == "15"


@pytest.mark.parametrize("skew_s", [20.0, -20.0])
@pytest.mark.parametrize("culprit_host", [True, False])
@pytest.mark.parametrize("layout", ["torchrun", "slurm-default"])
def test_a_clock_20_s_off_keeps_the_verdict(
    tmp_path: Path, skew_s: float, culprit_host: bool, layout: str
) -> None:
    """A host whose clock runs 20 s ahead or behind (the culprit's or another) changes nothing."""
    run, verdicts = _verdicts(
        tmp_path, layout=layout, cause="xid79", skew_s=skew_s, skew_culprit=culprit_host, seed=5
    )
    assert [(v["rank"], v["host"], v["basis"]) for v in verdicts] == [
        (str(run.culprit_rank), run.culprit_host, "first-error")
    ]


def test_one_rank_alone_gets_no_verdict(tmp_path: Path) -> None:
    """A replay of one rank's log is no fleet: no root-cause event."""
    run = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=8, steps=4))
    one = next(p for p in run.files if p.name == "stderr.log")
    result = replay([str(one)], RULES)
    assert result.facts is not None
    assert analyse(result.facts).verdicts == []


def test_each_torchrun_attempt_is_its_own_failure(tmp_path: Path) -> None:
    """A run that restarted (attempt_0, attempt_1) and failed twice: two root-cause events,
    each naming that attempt's culprit."""
    first = gen.generate(tmp_path / "a", gen.FleetSpec(ranks=16, steps=4, cause="oom", seed=1))
    second = gen.generate(tmp_path / "b", gen.FleetSpec(ranks=16, steps=4, cause="nan", seed=2))
    assert first.culprit_rank != second.culprit_rank
    for path in second.files:
        rel = path.relative_to(second.root)
        if "attempt_0" in rel.parts:
            parts = [p if p != "attempt_0" else "attempt_1" for p in rel.parts]
            target = first.root.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    result = replay(expand_inputs([str(first.root)]).files, RULES)
    assert result.facts is not None
    verdicts = analyse(result.facts).verdicts
    assert [(v.labels["rank"], v.labels["cause"]) for v in verdicts] == [
        (str(first.culprit_rank), "cuda-oom"),
        (str(second.culprit_rank), "nan-loss"),
    ]


def test_labels_and_verdict_are_the_same_whichever_path_a_file_takes(tmp_path: Path) -> None:
    """A fleet's small rank logs are parsed in groups (`replay_many`); each file alone, or some
    grouped and some alone, gives the same events, labels (rank, host) and
    verdict."""
    run = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=16, steps=4, seed=3))
    files = expand_inputs([str(run.root)]).files
    sizes = sorted(Path(f).stat().st_size for f in files)
    results = [
        replay(files, RULES, options=ReplayOptions(small_file_bytes=limit))
        for limit in (0, sizes[len(sizes) // 2], sizes[-1])
    ]
    alone = [e.to_json() for e in results[0].events]
    assert any("rank" in e["labels"] and "host" in e["labels"] for e in alone)
    assert [e["rule"] for e in alone].count("root-cause") == 1
    for other in results[1:]:
        assert [e.to_json() for e in other.events] == alone
        assert other.to_json() == results[0].to_json()
