"""The `crash` rule type: the run died, with the first rank that failed and its exception.

A traceback alone does not mean the run died: a caught exception printed with its traceback
can be followed by more training. So a traceback's final exception line is held as *pending*
until something decides:
- a line that only a dead run prints: torch elastic's `failed (exitcode: N) local_rank: R`,
  the Root Cause block of its `ChildFailedError` summary (`rank : N (local_rank: ...)`,
  `exitcode : -9 (pid: ...)`), `Signals.SIGKILL`, DeepSpeed's launcher `exits with return code
  = N` (N != 0); the shell's `Killed`, `Segmentation fault (core dumped)`, ... (`rules.exits`),
  PyCharm's `Process finished with exit code N` (N != 0), srun's `task N: Killed`: the alert
  fires at that line, with the exit code as its value and, for the shell's words, what ended
  the run (`ended`);
- training progress (a loss, grad norm or throughput) from the same rank, or from a line
  without a rank: the traceback was survived, it is dropped;
- the end of the input (`replay`: the file ends after it) or, live, `quiet_after` of wall time
  with no new line (`tail`): the alert fires at the exception line.
A pasted terminal that ends (`replay`) in a shell prompt right after training progress says the
process died without a word: the alert fires at the prompt (`rules.exits`).
Pending too: the exception line after frames whose header the excerpt lacks, one in markdown
bold or a rich box's, and an exception logged at ERROR outside any traceback. A log that ends
inside a traceback (its header seen, no exception line yet) fires the same way at its header,
`ended` naming its last frame. A logged stack (`Stack (most recent call last)`) and frames with
no header and no exception line are not a traceback.
The rank named is the first (earliest) pending exception's `[rankN]:` prefix, else the rank the
deciding line names (elastic's local rank, its Root Cause rank, srun's task); no label where
none is known. Fires once per run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from logwatch.alerts import FIRING
from logwatch.parse.prefix import line_writer
from logwatch.redact import redact
from logwatch.rules.base import (
    Needs,
    Outcome,
    Part,
    Rule,
    RuleType,
    Transition,
    replace_state,
)
from logwatch.rules.crash_many import (
    CLOSED,
    CRASH_HINT,
    MARKUP,
    OPEN,
    READ,
    Facts,
    facts_many,
    facts_of,
)
from logwatch.rules.exits import (
    LAST_LINES,
    ROOT_CAUSE_RANK,
    at_prompt,
    died_at_prompt,
    ended_by,
    named_by_deciding,
    prompt_end,
    prompt_frame,
)
from logwatch.rules.params import Kind, Param

_EXCEPTION_CHARS = 200


@dataclass(frozen=True, slots=True)
class CrashRule:
    """Fires once per run when the run died; see the module doc for what decides it."""

    quiet_after_s: float

    @property
    def needs(self) -> Needs:
        """What a pending exception records and progress reads; a quiet rule moves only on a
        traceback's line, an exception's or a deciding line."""
        return Needs(frozenset(READ), CRASH_HINT, last_lines=LAST_LINES)

    def quiet(self, state: dict[str, Any]) -> bool:
        """Fired already, or no traceback open and no exception pending."""
        return bool(state["fired"]) or (not any(state["open"].values()) and not state["pending"])

    def initial_state(self) -> dict[str, Any]:
        return {"open": {}, "opened": {}, "pending": [], "fired": False, "last_s": None}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        if state["fired"]:
            return [], state
        if self.quiet(state) and not frame.get_column("text").str.contains(CRASH_HINT).any():
            return [], state
        return _step(facts_of(frame, state["open"]), state)

    def evaluate_many(self, frame: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
        """`evaluate` on each part, its lines classed in one query for all (`crash_many`)."""
        out: list[Outcome | None] = [([], part.state) for part in parts]
        quiet = [not part.state["fired"] and self.quiet(part.state) for part in parts]
        if any(quiet):  # a quiet part moves only where a line of it matches the hint
            hinted = _hinted(frame, parts)
        chosen = [
            n
            for n, part in enumerate(parts)
            if not part.state["fired"] and (not quiet[n] or hinted[n])
        ]
        for n, facts in zip(chosen, facts_many(frame, parts, chosen), strict=True):
            out[n] = _step(facts, parts[n].state)
        return out

    def finish(
        self, state: dict[str, Any], last: pl.DataFrame
    ) -> tuple[list[Transition], dict[str, Any]]:
        """At the end of the input: a pending exception, or a traceback cut off before its
        exception line, ended the log, so the run died; else a shell prompt right after
        training progress (`last`: the log's last lines) ended it."""
        fired, decided = _decide(state)
        if fired or decided["fired"]:
            return fired, decided
        return _ended(decided, died_at_prompt(last))

    def finish_many(self, last: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
        """`finish` of many sources, their last lines read in one query."""
        rows = prompt_frame(last) if not last.is_empty() else last
        # made into rows only for a part that ends at a prompt (`at_prompt`; else None)
        plain = rows.get_column("_plain").to_list() if not last.is_empty() else []
        out: list[Outcome | None] = []
        for part in parts:
            fired, decided = _decide(part.state)
            if fired or decided["fired"]:
                out.append((fired, decided))
            elif part.end > part.begin and at_prompt(plain[part.end - 1]):
                ended = prompt_end(rows.slice(part.begin, part.end - part.begin).to_dicts())
                out.append(_ended(decided, ended))
            else:
                out.append(_ended(decided, None))
        return out

    def tick(
        self, state: dict[str, Any], now_s: float, arrived: bool
    ) -> tuple[list[Transition], dict[str, Any]]:
        """Live: a pending exception or an open traceback followed by `quiet_after_s` of silence
        ended the log."""
        if arrived or state["last_s"] is None:
            return [], replace_state(state, last_s=now_s)
        if now_s - state["last_s"] < self.quiet_after_s:
            return [], state
        return _decide(state)


def _hinted(frame: pl.DataFrame, parts: Sequence[Part]) -> list[bool]:
    """Whether a line of each part matches `CRASH_HINT`."""
    rows = frame.get_column("text").str.contains(CRASH_HINT).arg_true()
    begins = pl.Series([part.begin for part in parts], dtype=rows.dtype)
    at = rows.search_sorted(begins, side="left").to_list()
    ends = rows.search_sorted(pl.Series([p.end for p in parts], dtype=rows.dtype)).to_list()
    return [high > low for low, high in zip(at, ends, strict=True)]


def _step(facts: Facts, state: dict[str, Any]) -> Outcome:
    """A step of a source that is not fired, from its batch's facts."""
    pending = _pending(facts, state["pending"])
    still_open = _still_open(facts.markers, state["open"])
    new_state = {
        **state,
        "open": still_open,
        "opened": _opened(facts, state.get("opened", {}), still_open),
    }
    first = facts.deciding
    if first is not None:
        alive = [p for p in pending if p["at"] < first["_row"] and _alive(p, first["_row"])]
        fired = _fire(first["_row"], alive, first)
        return [fired], {**new_state, "pending": [], "opened": {}, "fired": True}
    survivors = [_stored(p) for p in pending if p["cleared"] is None]
    latest: dict[str, dict[str, Any]] = {}
    for p in survivors:  # one per rank: its latest exception (a chained traceback's last)
        latest[p["rank"]] = p
    return [], {**new_state, "pending": sorted(latest.values(), key=lambda p: p["line"])}


def _ended(state: dict[str, Any], found: Transition | None) -> Outcome:
    """The outcome of a prompt that ended the log (`found`), or of none."""
    if found is None:
        return [], state
    return [found], replace_state(state, pending=[], opened={}, fired=True)


def _decide(state: dict[str, Any]) -> tuple[list[Transition], dict[str, Any]]:
    """Nothing follows: fire at the earliest pending exception, else at the earliest traceback
    the log ends inside of."""
    if state["fired"]:
        return [], state
    if state["pending"]:
        first = min(state["pending"], key=lambda p: p["line"])
        labels = _labels(first, None, None)
    elif state.get("opened"):
        first = min(state["opened"].values(), key=lambda p: p["line"])
        where = f", at {first['frame']}" if first["frame"] else ""
        labels = _labels(first, None, None, ended=f"the log ends inside a traceback{where}")
    else:
        return [], state
    ts = datetime.fromisoformat(first["ts"]) if first["ts"] else None
    fields = {"line": first["line"], "ts": ts, "step": first["step"], "text": first["text"]}
    fired = Transition(row=0, status=FIRING, value=None, labels=labels, fields=fields)
    return [fired], replace_state(state, pending=[], opened={}, fired=True)


def _still_open(last: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
    """Per rank: the traceback it is inside of (a header or frames seen, no unindented line
    since; or a logged stack), as its marker; ranks outside of one are left out. `last`: each
    rank's last marker in the batch."""
    markers = {**{rank: int(marker) for rank, marker in before.items()}, **last}
    return {rank: marker for rank, marker in markers.items() if marker != CLOSED}


def _opened(
    facts: Facts, carried: Mapping[str, dict[str, Any]], still_open: Mapping[str, int]
) -> dict[str, dict[str, Any]]:
    """Per rank inside a traceback that has its header: where it began and its last frame so
    far, unless a later progress line (the rank's or an unranked one) says the run went on."""
    out: dict[str, dict[str, Any]] = {}
    inside = [rank for rank, marker in still_open.items() if marker == OPEN]
    rows = facts.rows() if inside else None
    for rank in inside:
        assert rows is not None
        own = rows.filter(pl.col("_rk") == rank)
        headers = own.filter(pl.col("_header"))
        if headers.is_empty():
            if rank not in carried:
                continue
            entry, since = dict(carried[rank]), -1
        else:
            header = headers.row(-1, named=True)
            entry, since = _record(header, rank), header["_row"]
        frames = own.filter(pl.col("_frame") & (pl.col("_row") > since))
        if not frames.is_empty():
            entry["frame"] = redact(str(frames.row(-1, named=True)["_msg"]).strip())
        later = rows.filter(pl.col("_progress") & (pl.col("_row") > since))
        if rank != "-1":
            later = later.filter(pl.col("rank").is_null())
        if later.is_empty():
            out[rank] = entry
    return out


def _record(row: Mapping[str, Any], rank: str) -> dict[str, Any]:
    """What a decision after the row's batch needs of it (JSON-able)."""
    ts = row["ts"].isoformat() if row["ts"] is not None else None
    return {
        "rank": rank,
        "line": row["line"],
        "ts": ts,
        "step": row["step"],
        "text": row["text"],
        "frame": None,
    }


def _pending(facts: Facts, carried: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Carried and new pending exceptions, each with `at` (its row; -1 when carried) and
    `cleared` (the row of the progress that dropped it, or None)."""
    out: list[dict[str, Any]] = []
    first_by_rank = facts.first_progress
    any_first = min(first_by_rank.values(), default=None)
    for p in carried:
        if p["rank"] == "-1":
            cleared = any_first
        else:
            cleared = _earliest(first_by_rank.get(p["rank"]), first_by_rank.get("-1"))
        out.append({**p, "at": -1, "cleared": cleared})
    for r in facts.exceptions:
        if r["_rk"] == "-1":
            cleared = r["_next_any"]
        else:
            cleared = _earliest(r["_next_same"], r["_next_unranked"])
        ts = r["ts"].isoformat() if r["ts"] is not None else None
        out.append(
            {
                "rank": r["_rk"],
                "line": r["line"],
                "ts": ts,
                "step": r["step"],
                "text": r["text"],
                "exception": _exception_text(r["_exception_text"]),
                "at": r["_row"],
                "cleared": cleared,
            }
        )
    return out


def _earliest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _alive(p: Mapping[str, Any], row: int) -> bool:
    return p["cleared"] is None or p["cleared"] > row


def _stored(p: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in p.items() if k not in ("at", "cleared")}


def _exception_text(message: str) -> str:
    text = redact(message.strip())
    return text if len(text) <= _EXCEPTION_CHARS else text[: _EXCEPTION_CHARS - 1] + "…"


def _labels(
    first: Mapping[str, Any] | None,
    rank: str | None,
    fallback: str | None,
    ended: str | None = None,
    *,
    local: bool = False,
) -> dict[str, str]:
    """The alert's labels: the failing rank where one is known (`local_rank` when only the
    local one is: `local`, or a `[defaultL]:` prefix), the exception where there is one, and
    what ended the run where no exception says it."""
    rank_label = "local_rank" if local else "rank"
    if first is not None and first["rank"] != "-1":
        rank_label, rank = _writer(first["text"], first["rank"])
    exception = first.get("exception") if first is not None else fallback
    labels = {rank_label: rank, "exception": exception, "ended": ended}
    return {name: value for name, value in labels.items() if value is not None}


def _writer(text: str, rank: str) -> tuple[str, str]:
    """The label and value of the rank an exception line's prefix names: `rank` for a global
    one (`[rank139]:`, `3: `), `local_rank` for torchrun's `[default3]:` alone."""
    p_rank, p_local, _ = line_writer(text)
    if p_rank is not None:
        return "rank", str(p_rank)
    if p_local is not None:
        return "local_rank", str(p_local)
    return "rank", rank


def _fire(row: int, alive: list[dict[str, Any]], deciding: Mapping[str, Any]) -> Transition:
    """The alert at a deciding line, naming the earliest pending exception if there is one."""
    text = str(deciding["text"])
    unmarked = re.sub(r"[\s*_`]+$", "", re.sub(MARKUP, "", str(deciding["_msg"])))
    rank, code, ended = ended_by(unmarked) if deciding["_ended"] else (None, None, None)
    rank, code, local = named_by_deciding(text, rank, code)
    first = min(alive, key=lambda p: p["line"]) if alive else None
    if ended is not None:
        fallback = None
    elif code is not None:
        fallback = f"exit code {code} (no traceback of it in this log)"
    elif re.search(ROOT_CAUSE_RANK, text):
        fallback = None  # the table's rank line: its exit code follows, no exception is in it
    else:
        fallback = _exception_text(str(deciding["_msg"]))
    labels = _labels(first, rank, fallback, ended, local=local)
    value = None if code is None else float(code)
    return Transition(row=row, status=FIRING, value=value, labels=labels)


def _build_crash(params: Mapping[str, Any]) -> Rule:
    return CrashRule(quiet_after_s=params["quiet_after"])


CRASH_RULE_TYPES: dict[str, RuleType] = {
    "crash": RuleType(
        (Param("quiet_after", Kind.DURATION, default="2m", positive=True),), _build_crash
    ),
}
"""The crash rule type (`logwatch.rules.registry` assembles every rule type)."""
