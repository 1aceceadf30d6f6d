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

import contextlib
import itertools
from collections.abc import Iterable, Sequence
from typing import Any, cast

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.engine.batch import (
    _SMALL_BATCH,
    Group,
    Prepared,
    ReadyChecks,
)
from logwatch.engine.evaluate import _Evaluator
from logwatch.engine.gpu_rows import _gpu_keys_present
from logwatch.engine.group import ParseGroup, restarting
from logwatch.engine.plan import _Needs
from logwatch.engine.state import STATS_AGG, STATS_COLUMNS
from logwatch.gpu.log_rows import read_telemetry_rows
from logwatch.parse import ALWAYS, SCHEMA, complete
from logwatch.parse.shapes import PLAIN_PAIRS_SHAPES
from logwatch.parse.telemetry import PAIRS_COLUMN
from logwatch.rules.base import Part
from logwatch.rules.gpu import LogGpuRows
from logwatch.rules.log import StreakRule


class _Many(_Evaluator):
    """`prepare_many`, `process_many` and `finish_many` (`Engine`)."""

    def prepare_many(
        self,
        whole: pl.DataFrame,
        frames: Sequence[pl.DataFrame],
        computed: Iterable[str] | None = None,
        *,
        shapes: pl.Series | None = None,
    ) -> list[Prepared | None]:
        """`prepare(frames[i], computed, shapes=...)` of each frame, the frames being the rows
        of `whole` one after another (a parse group's files), computed for all in a few
        queries: gate hits, last steps, `ahead` columns, GPU rows and scores are all read line
        by line, so the group's, cut at each frame's rows, are each frame's own. A frame whose
        lines start a new run after its first one, or a group whose GPU rows leave pairs out
        or fail, is prepared frame by frame (what is said of them is said per frame)."""
        bounds = list(itertools.pairwise(itertools.accumulate(map(len, frames), initial=0)))
        if whole.height != (bounds[-1][1] if bounds else 0):
            raise ValueError(f"frames of {bounds[-1][1]} rows for a whole of {whole.height}")
        alone = restarting(whole, bounds)
        ready = ParseGroup(whole, bounds, shapes)
        gpu = self._gpu_pieces(ready) if self._log_gpu else [None] * len(frames)
        if gpu is None:  # each frame's own reading says what is wrong, where
            alone = set(range(len(frames)))
        stepped = computed is not None and "step" not in computed
        hits = (
            ready.cut(self._gate_scan.hits(whole, lines=ready.lines))
            if len(alone) < len(frames)
            else None
        )
        steps = ready.last_steps(frames) if stepped and hits is not None else None
        ahead = None
        if self._ahead and hits is not None:
            reach = list(zip(self._ahead, self._ahead_reach, strict=True))
            ahead = ready.lines.columns(reach)
        out: list[Prepared | None] = []
        for i, (frame, (begin, end)) in enumerate(zip(frames, bounds, strict=True)):
            cut = None if shapes is None else shapes.slice(begin, end - begin)
            if not frame.height:
                out.append(None)
            elif i in alone or hits is None:
                out.append(self.prepare(frame, computed, shapes=cut))
            else:
                out.append(
                    Prepared(
                        frame,
                        {gate: rows[i] for gate, rows in hits.items()},
                        None if gpu is None else gpu[i],
                        None,
                        stepped=stepped,
                        last_step=None if steps is None else steps.get(i),
                        ahead=None if ahead is None else ahead.slice(begin, end - begin),
                        shapes=cut,
                    )
                )
        return out

    def _gpu_pieces(self, group: ParseGroup) -> list[LogGpuRows | None] | None:
        """Each frame's GPU rows, read and scored once for the group (None for a frame without
        snapshot keys); None when the group's reading fails or leaves a pair out."""
        has = group.any_per_frame(_gpu_keys_present(group.whole))
        present = [i for i, found in enumerate(has) if found]
        out: list[LogGpuRows | None] = [None] * len(has)
        if not present:
            return out
        shapes = group.shapes
        plain = None if shapes is None else shapes.is_in(PLAIN_PAIRS_SHAPES).fill_null(False)
        try:
            found = read_telemetry_rows(group.whole, self._gpu_metrics, plain_pairs=plain)
        except Exception:
            return None
        if found.dropped:
            return None
        rows = LogGpuRows(found.rows, self._gpu_metrics)
        for rule in self._log_holds:
            with contextlib.suppress(Exception):  # the rule's own step raises it, as its error
                rows.scored(rule)
        for i, piece in zip(present, rows.pieces([group.bounds[i] for i in present]), strict=True):
            out[i] = piece
        return out

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
        ready: list[Prepared | None] = [*prepared] if prepared is not None else [None] * len(frames)
        chosen = self._batchable(frames)
        try:
            if chosen:
                self._ready_many(frames, chosen, given, ready)
                ready = self._gpu_prepared(frames, chosen, ready)
            out = []
            for frame, ahead in zip(frames, ready, strict=True):
                out.append(self.process(frame, given, ahead))
                if frame.height:
                    self._forget_ready(frame.get_column("source")[0])
            return out
        finally:
            self._ready.clear()
            self._ready_stats.clear()
            self._ready_fill.clear()
            self._ready_live.clear()
            self._ready_group = None

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
        self,
        frames: Sequence[pl.DataFrame],
        chosen: list[int],
        computed: list[str] | None,
        prepared: Sequence[Prepared | None],
    ) -> None:
        """What the `chosen` frames' turns take: their stats, their steps filled in, the small
        batches' live checks, the batched rules' steps (with the rules' `Needs.ahead` columns
        as `prepare` gave them, where it did for every frame)."""
        parsed = frozenset(SCHEMA) if computed is None else frozenset(computed) | ALWAYS
        stats = STATS_COLUMNS if self._stats else frozenset()
        done = parsed | stats  # `process` computes the stats' columns first
        wanted = set(ALWAYS)
        for order in self._batched:
            wanted |= self._needs[order].columns
        streaks = [o for o in self._streak_checks if self._needs[o].columns <= done]
        given = {name for o in streaks for name in self._needs[o].columns} | {"gpu_keys", "step"}
        names = [name for name in SCHEMA if name in wanted | STATS_COLUMNS | (given & done)]
        names += ["gpu_keys"] if self._log_gpu and "gpu_keys" not in names else []
        picked = [frames[i] for i in chosen]
        if all(frame.columns == picked[0].columns for frame in picked):
            together = pl.concat(picked, rechunk=True)
            whole = together.select(names)
            starts = itertools.accumulate((frame.height for frame in picked), initial=0)
            rows = {
                cast(str, frame.get_column("source")[0]): (begin, frame.height)
                for frame, begin in zip(picked, starts, strict=False)
            }
            self._ready_group = Group(together, rows)
        else:
            whole = pl.concat([frame.select(names) for frame in picked], rechunk=True)
        whole = complete(whole, (wanted | stats) - parsed)
        usable = [prepared[i] for i in chosen]
        usable = [
            p if p is not None and p.frame is frames[i] else None
            for i, p in zip(chosen, usable, strict=True)
        ]
        if all(p is not None and p.ahead is not None for p in usable):
            ahead = pl.concat([cast(pl.DataFrame, cast(Prepared, p).ahead) for p in usable])
            whole = whole.hstack(ahead.get_columns())
        sources = [cast(str, frame.get_column("source")[0]) for frame in picked]
        heights = [frame.height for frame in picked]
        # (a list, not `pl.repeat`: each of those is a query)
        part = pl.Series(
            "_part", [n for n, h in enumerate(heights) for _ in range(h)], dtype=pl.UInt32
        )
        keyed = whole.hstack([part])
        if self._stats:  # of the steps the lines say, before they are filled in
            aggs = keyed.group_by("_part", maintain_order=True).agg(STATS_AGG)
            for source, height, row in zip(
                sources, heights, aggs.iter_rows(named=True), strict=True
            ):
                self._ready_stats[source] = (height, row)
        if "step" in whole.columns:  # rules see it filled in from the step before the batch
            filled = self._ready_filled(keyed, sources, heights, cache="step" in done)
            whole.replace_column(whole.get_column_index("step"), filled)
            keyed.replace_column(keyed.get_column_index("step"), filled)
        small = any(height <= _SMALL_BATCH for height in heights)
        if small or self._log_gpu:
            prepared_all = all(p is not None for p in usable)
            self._ready_checks(keyed, sources, heights, streaks if small else None, prepared_all)
        self._ready_steps(whole, sources, heights, usable)

    def _gpu_prepared(
        self,
        frames: Sequence[pl.DataFrame],
        chosen: list[int],
        prepared: list[Prepared | None],
    ) -> list[Prepared | None]:
        """`prepared`, with the GPU rows of the chosen frames that have snapshot keys (and
        nothing prepared) read in one pass for all and cut back to each frame, as `prepare`
        gives them (each row is read from its own line). Where the reading leaves a pair out
        or fails, each frame reads its own in its turn, so that what is said is said of it."""
        if not self._log_gpu:
            return prepared
        picked = []
        for i in chosen:
            checks = self._ready_live.get(cast(str, frames[i].get_column("source")[0]))
            if prepared[i] is None and checks is not None and checks.gpu:
                picked.append(i)
        names = [n for n in ("ts", "text", PAIRS_COLUMN, "snapshot") if n in frames[0].columns]
        parts = [frames[i] for i in picked]
        if len(picked) < 2:
            return prepared
        if all(part.schema == parts[0].schema for part in parts):  # one select for all
            lines = pl.concat(parts, rechunk=False).select(names).rechunk()
        else:
            parts = [part.select(names) for part in parts]
            if any(part.schema != parts[0].schema for part in parts):
                return prepared
            lines = pl.concat(parts, rechunk=True)
        try:
            found = read_telemetry_rows(lines, self._gpu_metrics)
        except Exception:  # each frame's GPU rules read their own, and say it as theirs
            return prepared
        if found.dropped:
            return prepared
        bounds = list(
            itertools.pairwise(itertools.accumulate((p.height for p in parts), initial=0))
        )
        # the GPU hold rules' rows (scope "gpu": a row scored from its own line alone) scored
        # once for all, each piece taking its own; a rule whose scoring raises is left to each
        # piece (its step raises it again, as its rule's error)
        rows = LogGpuRows(found.rows, self._gpu_metrics)
        for rule in self._log_holds:
            if rule.scope != "run":  # "run": one row per time, of every GPU, not a row's own
                with contextlib.suppress(Exception):
                    rows.scored(rule)
        cut = rows.pieces(bounds)
        out = list(prepared)
        for i, rows in zip(picked, cut, strict=True):
            out[i] = Prepared(frames[i], {}, rows, None)
        return out

    def _ready_filled(
        self, keyed: pl.DataFrame, sources: list[str], heights: list[int], *, cache: bool
    ) -> pl.Series:
        """Each source's step forward-filled from the step before its batch (`_filled_step`),
        kept for its turn where `cache`."""
        priors = pl.Series([self.state_of(s).last_step for s in sources], dtype=pl.Int64)
        prior = priors.gather(keyed.get_column("_part"))
        filled = keyed.select(pl.col("step").forward_fill().over("_part").fill_null(prior))
        step = filled.to_series()
        begin = 0
        for source, height in zip(sources, heights, strict=True):
            if cache:
                self._ready_fill[source] = step.slice(begin, height)
            begin += height
        return step

    def _ready_checks(
        self,
        keyed: pl.DataFrame,
        sources: list[str],
        heights: list[int],
        streaks: list[int] | None,
        prepared: bool,
    ) -> None:
        """The batches' live checks (`_live_checks`: every gate, streak start and GPU check,
        per source in one query; the `ahead` columns unless `prepared` gave them); with
        `streaks` None (no small batch), only the GPU check (which long batches make too)."""
        checks = self._small_gate_checks if streaks is not None else {}
        streaks = streaks or []
        exprs = [
            *checks.values(),
            *(self._streak_checks[o].alias(f"_s{o}") for o in streaks),
            *([_gpu_keys_present(keyed).alias("_gpu")] if self._log_gpu else []),
        ]
        try:
            found = keyed.group_by("_part", maintain_order=True).agg(exprs) if exprs else None
            wanted = self._ahead and not prepared and checks
            ahead = keyed.select(self._ahead) if wanted else None
        except Exception:  # each source's own checks say which rule fails, and where
            return
        gates = list(checks)
        begin = 0
        for n, (source, height) in enumerate(zip(sources, heights, strict=True)):
            row = found.row(n) if found is not None else ()
            self._ready_live[source] = ReadyChecks(
                height,
                dict(zip(gates, map(bool, row[1 : 1 + len(gates)]), strict=True)),
                dict(zip(streaks, map(bool, row[1 + len(gates) :]), strict=False)),
                bool(row[-1]) if self._log_gpu else None,
                None if ahead is None else ahead.slice(begin, height),
            )
            begin += height

    def _ready_steps(
        self,
        whole: pl.DataFrame,
        sources: list[str],
        heights: list[int],
        prepared: Sequence[Prepared | None],
    ) -> None:
        """The batched rules' steps of each source (`BatchedRule.evaluate_many`); `prepared`:
        what `prepare` gave each source's batch (None: nothing, or for another frame)."""
        bounds = list(itertools.pairwise(itertools.accumulate(heights, initial=0)))
        # each source's state looked up once, not once per rule
        states = [self.state_of(source) for source in sources]
        for order, rule in self._batched.items():
            spec = self.rules[order]
            seen = [self._seen_state(spec, state) for state in states]
            if self._shut(order, sources, heights, seen, prepared):
                continue  # each source's turn skips it (quiet, its gate shut): nothing to step
            rule_states = [self._rule_state(spec, state) for state in states]
            parts = [Part(b, e, state) for (b, e), state in zip(bounds, rule_states, strict=True)]
            try:
                outcomes = rule.evaluate_many(whole, parts)
            except Exception:  # each source's own step raises it again, as its error
                continue
            for source, (b, e), outcome in zip(sources, bounds, outcomes, strict=True):
                if outcome is not None and (spec.id, source) not in self._failed:
                    self._ready[order, source] = (e - b, outcome)

    def _shut(
        self,
        order: int,
        sources: list[str],
        heights: list[int],
        states: list[dict[str, Any]],
        prepared: Sequence[Prepared | None],
    ) -> bool:
        """Whether every source's turn skips a rule (`_evaluate`): quiet with its gate shut on
        the source's batch, as `prepare` found (its gate hits, a replay's batches of any size)
        or else `_ready_checks` (a small batch's), or a quiet streak rule that no line of a
        small batch can start a streak in (`_evaluate`'s `calm`). Then stepping it here for all
        is a wasted query or three (a live round of a node's ranks, a fleet's parse group, shuts
        most of the line rules and calms the streak rules). Only a cache goes unfilled: a turn
        that does need the step (a run restarted mid-batch) takes it itself."""
        needs = self._needs[order]
        gated = needs.gate is not None and needs.quiet is not None
        streak = order in self._streak_checks
        if not gated and not streak:
            return False
        for source, height, state, ahead in zip(sources, heights, states, prepared, strict=True):
            hits = ahead.hits.get(cast(str, needs.gate)) if gated and ahead is not None else None
            if hits is not None:  # what `_evaluate` reads first: the batch's gate hits
                if not hits.is_empty() or not _quiet(needs, state):
                    return False
                continue
            ready = self._ready_live.get(source)
            if ready is None or ready.rows != height or height > _SMALL_BATCH:
                return False
            shut = gated and not ready.gates.get(cast(str, needs.gate), True)
            if not (shut and _quiet(needs, state)) and not (
                streak and self._calm(order, source, ready.streaks, state)
            ):
                return False
        return True

    def _calm(
        self, order: int, source: str, streaks: dict[int, bool], state: dict[str, Any]
    ) -> bool:
        """Whether a streak rule is in `_live_checks`' `calm` for a source's turn: its check
        made (its columns parsed), no streak can start in the batch, the rule not failed there
        and quiet."""
        if streaks.get(order, True) or (self.rules[order].id, source) in self._failed:
            return False
        return cast(StreakRule, self.rules[order].rule).quiet(state)

    def _forget_ready(self, source: str) -> None:
        """Drop what was computed for `source` and not taken (a rule its batch did not step)."""
        for order in self._batched:
            self._ready.pop((order, source), None)
        self._ready_stats.pop(source, None)
        self._ready_fill.pop(source, None)
        self._ready_live.pop(source, None)


def _quiet(needs: _Needs, state: dict[str, Any]) -> bool:
    return needs.quiet is not None and needs.quiet(state)
