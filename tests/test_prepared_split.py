"""`Prepared.split`: the runs of a batch cut from what `prepare` computed for the whole batch
in one go are what cutting each run by itself gives, and a replay through it alerts as one without
anything prepared."""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal, assert_series_equal

from logwatch import api
from logwatch.engine import Engine
from logwatch.engine.batch import Prepared, _split_runs
from logwatch.parse import parse_block
from logwatch.rules.gpu import LogGpuRows
from tests.support.properties import examples

SETTINGS = settings(
    max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TS = "2026-11-28 14:{m:02d}:{s:02d},000 INFO "


def _line(kind: str, n: int) -> str:
    ts = TS.format(m=n // 60 % 60, s=n % 60)
    if kind == "run":
        return f"{ts}[train] run start: run_id=r{n} pid={n} gpus=2"
    if kind == "step":
        loss = "nan" if n % 7 == 3 else f"{2 + (n % 5) / 10:.2f}"
        return (
            f"{ts}[train] step {n}/100 | loss {loss} | acc 0.3 | lr 2.40e-05 | grad_norm 1.2 | "
            f"tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]"
        )
    util = 0 if n % 3 else 97
    gpus = "".join(f" gpu/{g}/util={util} gpu/{g}/mem_gb=70.1 gpu/{g}/temp_c=65" for g in (0, 1))
    if kind == "odd-snapshot":  # a key of another word: the general snapshot shape
        gpus += " sys/disk_gb=3"
    return f"{ts}[wandb] snapshot step={n} prof/drafter_ms=88.1{gpus}"


KINDS = st.lists(st.sampled_from(["run", "step", "step", "snapshot", "odd-snapshot"]), max_size=60)


def _same(one: Prepared, other: Prepared) -> None:
    assert one.frame is other.frame
    assert one.hits.keys() == other.hits.keys()
    for gate, rows in one.hits.items():
        assert_series_equal(rows, other.hits[gate])
    assert (one.stepped, one.last_step, one.error) == (other.stepped, other.last_step, None)
    for mine, theirs in ((one.ahead, other.ahead), (one.shapes, other.shapes)):
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            assert mine.equals(theirs)
    _same_rows(one.gpu_rows, other.gpu_rows)


def _same_rows(one: LogGpuRows | None, other: LogGpuRows | None) -> None:
    assert (one is None) == (other is None)
    if one is None or other is None:
        return
    assert_frame_equal(one.narrow, other.narrow)
    assert one._frames.keys() == other._frames.keys()
    for key, frame in one._frames.items():
        assert_frame_equal(frame, other._frames[key])
    assert one._scored.keys() == other._scored.keys()
    for key, frame in one._scored.items():
        assert_frame_equal(frame, other._scored[key])
    assert one._row_scored == other._row_scored


@SETTINGS
@given(KINDS, KINDS)
def test_split_gives_what_each_run_cut_alone_gives(head: list[str], tail: list[str]) -> None:
    engine = Engine(api.load_rules([], builtin=True), stats=False)
    kinds = [*head, "run", *tail, "run", "step", "snapshot"]
    lines = [_line(kind, n) for n, kind in enumerate(kinds)]
    parsed = parse_block(pl.Series("text", lines), source="s", first_line=1, columns=engine.columns)
    prepared = engine.prepare(parsed.frame, engine.columns, shapes=parsed.shapes)
    assert prepared is not None
    segments = _split_runs(parsed.frame, has_history=False)
    assert len(segments) >= 2
    pieces = [(segment, begin) for segment, _, begin in segments]
    for split, (segment, begin) in zip(prepared.split(pieces), pieces, strict=True):
        (alone,) = prepared.split([(segment, begin)])  # the piece cut by itself
        _same(split, alone)
    # and the events of a batch processed with it are those of one processed without
    plain = Engine(api.load_rules([], builtin=True), stats=False)
    with_ready = engine.process(parsed.frame, engine.columns, prepared)
    without = plain.process(parsed.frame, plain.columns)
    assert [e.to_json() for e in with_ready] == [e.to_json() for e in without]
