"""Many sources' batches at once: what `Engine.process` and `Engine.finish` would compute for
each source, the parts that cost a polars query per source computed in a few queries for all
(a fleet's thousands of small rank logs, a live round's lines of many files).

The engine still steps each source in order (`process`, `finish`), so events, states, rule
errors and their order are those of calling it source by source; what changes is that the
stats of every source, and the steps of the rules that can take many sources in one frame
(`BatchedRule`, `BatchedEnd`), are computed first, for all, and each source's turn takes its
own from them (`_Planned._ready`). A source whose batch restarts its run (a `run start:` after
its first line) or that comes twice takes the source-by-source path: its rules' state before
the batch would not be the state they step from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.engine.batch import Prepared
from logwatch.engine.evaluate import _Evaluator
from logwatch.engine.state import STATS_AGG, STATS_COLUMNS
from logwatch.parse import ALWAYS, SCHEMA, complete
from logwatch.rules.base import Part


class _Many(_Evaluator):
    """`process_many` and `finish_many` (`Engine`)."""

    def process_many(
        self,
        frames: Sequence[pl.DataFrame],
        computed: Iterable[str] | None = None,
        prepared: Sequence[Prepared | None] | None = None,
    ) -> list[list[AlertEvent]]:
        """Each frame's events, as `process(frames[i], computed, prepared[i])` called for each
        frame in order gives them (one source's lines per frame), with the stats and the
        batched rules' steps of all computed together."""
        given = list(computed) if computed is not None else None
        ready = list(prepared) if prepared is not None else [None] * len(frames)
        chosen = self._batchable(frames)
        try:
            if chosen:
                self._ready_many(frames, chosen, given)
            out = []
            for frame, ahead in zip(frames, ready, strict=True):
                out.append(self.process(frame, given, ahead))
                if frame.height:
                    self._forget_ready(frame.get_column("source")[0])
            return out
        finally:
            self._ready.clear()
            self._ready_stats.clear()

    def _batchable(self, frames: Sequence[pl.DataFrame]) -> list[int]:
        """The frames whose source's state before them is what its rules step from: a source
        seen once here, whose batch starts no run but maybe at its very first line."""
        counts: dict[str, int] = {}
        sources = []
        for frame in frames:
            source = frame.get_column("source")[0] if frame.height else None
            sources.append(source)
            if source is not None:
                counts[source] = counts.get(source, 0) + 1
        chosen = []
        for index, (frame, source) in enumerate(zip(frames, sources, strict=True)):
            if source is None or counts[source] > 1:
                continue
            starts = frame.get_column("run_start")
            if starts.any():  # native checks: a first line's run start restarts nothing
                state = self.sources.get(source)
                fresh = state is None or state.stats.lines == 0
                if not (fresh and starts.sum() == 1 and starts[0]):
                    continue
            chosen.append(index)
        return chosen

    def _ready_many(
        self, frames: Sequence[pl.DataFrame], chosen: list[int], computed: list[str] | None
    ) -> None:
        """The stats and the batched rules' steps of the `chosen` frames, for their turns."""
        done = frozenset(SCHEMA) if computed is None else frozenset(computed) | ALWAYS
        wanted = set(ALWAYS)
        for order in self._batched:
            wanted |= self._needs[order].columns
        if self._stats:
            wanted |= STATS_COLUMNS
        names = [name for name in SCHEMA if name in wanted]
        whole = pl.concat([frames[i].select(names) for i in chosen], rechunk=True)
        whole = complete(whole, wanted - done)
        sources = [cast(str, frames[i].get_column("source")[0]) for i in chosen]
        bounds = []
        begin = 0
        for i in chosen:
            bounds.append((begin, begin + frames[i].height))
            begin += frames[i].height
        if self._stats:
            part = pl.concat(
                [
                    pl.repeat(n, e - b, dtype=pl.UInt32, eager=True)
                    for n, (b, e) in enumerate(bounds)
                ]
            )
            aggs = whole.with_columns(part.alias("_part")).group_by("_part", maintain_order=True)
            for source, (b, e), row in zip(
                sources, bounds, aggs.agg(STATS_AGG).iter_rows(named=True), strict=True
            ):
                self._ready_stats[source] = (e - b, row)
        for order, rule in self._batched.items():
            spec = self.rules[order]
            parts = [
                Part(b, e, self._rule_state(spec, self.state_of(source)))
                for source, (b, e) in zip(sources, bounds, strict=True)
            ]
            try:
                outcomes = rule.evaluate_many(whole, parts)
            except Exception:  # each source's own step raises it again, as its error
                continue
            for source, (b, e), outcome in zip(sources, bounds, outcomes, strict=True):
                if outcome is not None and (spec.id, source) not in self._failed:
                    self._ready[order, source] = (e - b, outcome)

    def _forget_ready(self, source: str) -> None:
        """Drop what was computed for `source` and not taken (a rule its batch did not step)."""
        for order in self._batched:
            self._ready.pop((order, source), None)
        self._ready_stats.pop(source, None)
