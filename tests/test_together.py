"""tests/support/together.py: logs replayed together give each file the events its own replay
gives, and a set of logs that failed as a crowd is refused, not mixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from logwatch.drivers.replay import replay
from logwatch.rules.loader import builtin_rules_dir, load_rules, pack_files
from tests.support.paths import load_bench
from tests.support.together import replay_each

RULES = load_rules(pack_files(builtin_rules_dir()))
TEXTS = [
    "2026-11-28 14:00:01,000 INFO [train] step 1/10 | loss nan | grad_norm 1.0\n",
    "[rank1]:Traceback (most recent call last):\n[rank1]:RuntimeError: CUDA error: an illegal"
    " memory access was encountered\n",
    "step 5 | loss 2.0\n",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n",
]


def test_each_file_gets_the_events_of_its_own_replay(tmp_path: Path) -> None:
    """Every file's events (their JSON, its source included) are those of replaying it alone,
    in the order of the texts; some fire, some do not."""
    logs = replay_each(tmp_path, TEXTS, RULES)
    assert [log.path.read_text(encoding="utf-8") for log in logs] == TEXTS
    alone = [[e.to_json() for e in replay([str(log.path)], RULES).events] for log in logs]
    assert [[e.to_json() for e in log.events] for log in logs] == alone
    assert [bool(events) for events in alone] == [True, True, False, True]


def test_logs_that_failed_as_a_crowd_are_refused(tmp_path: Path) -> None:
    """A fleet's rank logs together give a fleet verdict, which is no one file's: refused."""
    gen = load_bench("gen_fleet")
    run = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=16, steps=4, cause="oom", seed=1))
    texts = [path.read_text(encoding="utf-8") for path in run.files]
    with pytest.raises(AssertionError, match="gave a fleet verdict: replay each alone"):
        replay_each(tmp_path / "together", texts, RULES)
