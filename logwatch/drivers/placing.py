"""How both drivers place events (rank, host, line time: `drivers.ranks`, `drivers.tail_place`)
with the options they were given, and the summaries placement rewrites.

A summary that names where an event happened (`{labels.rank}`, `{labels.host}`,
`{labels.local_rank}`: `run-crashed`'s `rank 136 failed first` or `local rank 0 on node-017
failed first`) is written again once the event is placed: the engine wrote it knowing only
what the file's own lines said (a local rank), placement knows the global rank and the host.
Only templates that read nothing but the event are retold (no field of the line's row)."""

from __future__ import annotations

import string
from collections.abc import Iterable
from dataclasses import replace

from logwatch.alerts import AlertEvent, Status
from logwatch.drivers.layout import layout_pattern
from logwatch.drivers.ranks import FleetFacts
from logwatch.drivers.tail_place import Followed, LivePlacement
from logwatch.engine.summary import render_summary
from logwatch.rules.loader import RuleSpec
from logwatch.template import pieces

PLACED_FIELDS = frozenset({"labels.rank", "labels.local_rank", "labels.host"})
"""The placeholders placement can fill or change."""
EVENT_FIELDS = frozenset({"rule", "severity", "source", "line", "step", "value", "labels"})
"""What a summary can be written from with the event alone."""


class Retell:
    """Rewrites the summary of a firing event whose rule's summary names a placed label."""

    def __init__(self, rules: Iterable[RuleSpec]) -> None:
        self._specs = {spec.id: spec for spec in rules if _retold(spec.summary)}

    def __call__(self, event: AlertEvent) -> AlertEvent:
        """The event, its summary written from its placed labels where its rule's says so."""
        spec = self._specs.get(event.rule)
        if spec is None or event.status != Status.FIRING:
            return event
        return replace(event, summary=render_summary(event, spec, {}))


def _retold(template: str) -> bool:
    """Whether a summary names a placed label and reads nothing of the line's row."""
    names = {
        name
        for text, _ in pieces(template)
        for _, name, _, _ in string.Formatter().parse(text.replace("|", ""))
        if name is not None
    }
    roots = {name.split(".", 1)[0] for name in names}
    return bool(names & PLACED_FIELDS) and roots <= EVENT_FIELDS


def fleet_facts(
    layout: str | None, gpus_per_node: int | None, rules: Iterable[RuleSpec]
) -> FleetFacts:
    """What a replay with `--layout` and `--gpus-per-node` places its events with."""
    pattern = layout_pattern(layout) if layout else None
    return FleetFacts(pattern, gpus_per_node=gpus_per_node, retell=Retell(rules))


def live_placement(
    layout: str | None, gpus_per_node: int | None, rules: Iterable[RuleSpec], followed: Followed
) -> LivePlacement:
    """What a tail with `--layout` and `--gpus-per-node` places its events with (`followed`:
    the sources it follows now)."""
    pattern = layout_pattern(layout) if layout else None
    return LivePlacement(
        pattern, gpus_per_node=gpus_per_node, retell=Retell(rules), followed=followed
    )
