"""Incremental checkpoints: only changed entries are appended, and loading merges them."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from logwatch.api import load_rules
from logwatch.drivers.checkpoint import CHECKPOINT, DELTA, StateDir
from logwatch.drivers.checkpoint_record import Checkpoint
from logwatch.drivers.delta import DeltaTracker, SourceTexts
from logwatch.engine import Engine
from logwatch.parse import parse_lines
from logwatch.sources.follow import Position

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _pos(i: int, line: int) -> Position:
    return Position(f"s{i}", f"/logs/{i}.log", 1, i, 0, "x", line * 10, line)


def _checkpoint(lines: list[int]) -> Checkpoint:
    files = [_pos(i, line) for i, line in enumerate(lines)]
    return Checkpoint(files, {f"s{i}": {"n": line} for i, line in enumerate(lines)})


def test_a_save_with_one_change_appends_only_that_entry(tmp_path: Path) -> None:
    """After the first (full) save of 200 entries, a save where one changed leaves the base
    file untouched and appends a line holding that entry only; a new StateDir loads the merge,
    and a clean close folds the delta into the base."""
    state = StateDir(tmp_path, print)
    state.open()
    lines = [1] * 200
    assert state.save(_checkpoint(lines))
    base = (tmp_path / CHECKPOINT).read_bytes()
    lines[7] = 5
    assert state.save(_checkpoint(lines))
    assert state.save(_checkpoint(lines))  # nothing changed: a line without entries
    assert (tmp_path / CHECKPOINT).read_bytes() == base
    records = [json.loads(raw) for raw in (tmp_path / DELTA).read_bytes().splitlines()]
    assert [list(r["files"]) for r in records] == [["1:7"], []]
    want = {i: 5 if i == 7 else 1 for i in range(200)}
    for _ in ("merged from the delta", "compacted at close"):
        loaded = StateDir(tmp_path, print).load()
        assert loaded is not None and loaded.sources["s7"] == {"n": 5}
        assert {p.ino: p.line for p in loaded.files} == want
        state.close()
    assert (tmp_path / DELTA).read_bytes() == b""


def test_a_stale_delta_below_the_base_is_ignored_and_a_torn_line_skipped(tmp_path: Path) -> None:
    """Delta lines numbered at or below the base's seq (a crash between the base rename and the
    delta's emptying) do not apply; a torn last line is skipped."""
    state = StateDir(tmp_path, print)
    state.open()
    state.save(_checkpoint([1, 1]))
    base = json.loads((tmp_path / CHECKPOINT).read_text())
    state.save(_checkpoint([4, 1]))
    stale = (tmp_path / DELTA).read_bytes()
    state.close()
    base["seq"] += 1  # as if a newer base was written and the crash came before the truncate
    (tmp_path / CHECKPOINT).write_text(json.dumps(base))
    (tmp_path / DELTA).write_bytes(stale + b'{"seq": 99, "files": {"1:1": {')
    loaded = StateDir(tmp_path, print).load()
    assert loaded is not None and [p.line for p in loaded.files] == [1, 1]


def test_a_checkpoint_without_seq_or_delta_still_loads(tmp_path: Path) -> None:
    """A checkpoint.json written before incremental checkpoints (no seq, no delta) loads."""
    old = _checkpoint([3, 4]).to_json()
    (tmp_path / CHECKPOINT).write_text(json.dumps(old))
    loaded = StateDir(tmp_path, print).load()
    assert loaded is not None and [p.line for p in loaded.files] == [3, 4]


def test_a_full_save_splices_the_source_texts_and_loads_back_as_the_states(
    tmp_path: Path,
) -> None:
    """A full save writes the sources' texts as the delta made them (not serialized again):
    what `checkpoint.json` holds is the checkpoint's JSON object with its `seq`, and a new
    StateDir loads every source's state, file and extra back; a text that does not match its
    state is what gets written (the texts are the record, the states only their source)."""
    engine = Engine(load_rules())
    rows = (SAMPLES / "dflash/train_nan.log").read_text().splitlines()
    for n, source in enumerate(["a.log", "b.log"]):
        engine.process(parse_lines(pl.Series(rows[n * 50 :]), source=source, first_line=1))
    states, texts = SourceTexts().export(["a.log", "b.log"], set(), engine.export_state)
    checkpoint = Checkpoint([_pos(1, 3)], states, {"x": [1]}, source_texts=texts)
    assert json.loads(DeltaTracker().full(checkpoint, 4)) == {
        **json.loads(json.dumps(checkpoint.to_json())),
        "seq": 4,
    }
    state = StateDir(tmp_path, print)
    state.open()
    assert state.save(checkpoint)
    loaded = StateDir(tmp_path, print).load()
    assert loaded is not None and loaded == Checkpoint(
        [_pos(1, 3)], json.loads(json.dumps(states)), {"x": [1]}
    )
    state.close()
    stale = Checkpoint([_pos(1, 3)], states, {}, source_texts={**texts, "a.log": '{"n":1}'})
    assert json.loads(DeltaTracker().full(stale, 5))["sources"]["a.log"] == {"n": 1}
