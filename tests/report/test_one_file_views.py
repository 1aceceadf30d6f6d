"""A one-file report with no `--x` feeds only the step view once its file shows a step line
(the step axis is then the one drawn, `build._kind`): the page is the same as when every view
is fed, and the time view stops growing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import logwatch.report.build as build
from logwatch.drivers.replay import ReplayOptions
from logwatch.report.build import build_report
from logwatch.report.collect import Collector
from logwatch.rules.loader import builtin_rules_dir, load_rules, pack_files
from tests.support.paths import SAMPLES

RULES = load_rules(pack_files(builtin_rules_dir()))


def _report(path: Path, collectors: list[Collector], **forced: Any) -> str:
    """The report's HTML, in blocks of 4 KiB; `forced`: the collector's options."""

    def made(*args: Any, **kwargs: Any) -> Collector:
        collector = Collector(*args, **{**kwargs, **forced})
        collectors.append(collector)
        return collector

    original = build.Collector
    build.Collector = made  # type: ignore[misc]  # the same class, its options fixed
    try:
        return build_report([str(path)], RULES, options=ReplayOptions(block_bytes=4096)).html
    finally:
        build.Collector = original  # type: ignore[misc]


@pytest.mark.parametrize(
    "sample", ["dflash/train_restarted.log", "dflash/train_gpu_trouble.log", "dflash/train_nan.log"]
)
def test_the_page_is_the_same_and_the_time_view_is_fed_less(sample: str) -> None:
    """Narrowed (the default for one file) and fed every view: byte-identical HTML; the
    narrowed time view holds fewer points."""
    narrow: list[Collector] = []
    every: list[Collector] = []
    html = _report(SAMPLES / sample, narrow)
    assert html == _report(SAMPLES / sample, every, one_file=False)
    assert narrow[0].one_file and not every[0].one_file

    def fed(collectors: list[Collector]) -> int:
        runs = [run for data in collectors[0].sources.values() for run in data.runs.values()]
        return sum(sum(run.by_time.points.counts.values()) for run in runs)

    assert fed(narrow) < fed(every)


def test_several_files_feed_every_view() -> None:
    """Two files: which axis is drawn is known only at the end, so every view is fed."""
    collectors: list[Collector] = []

    def made(*args: Any, **kwargs: Any) -> Collector:
        collectors.append(Collector(*args, **kwargs))
        return collectors[-1]

    original = build.Collector
    build.Collector = made  # type: ignore[misc]  # the same class, kept to look at
    try:
        names = ["dflash/train_nan.log", "dflash/train_healthy.log"]
        build_report([str(SAMPLES / name) for name in names], RULES)
    finally:
        build.Collector = original  # type: ignore[misc]
    assert not collectors[0].one_file
