"""`CrashRule.evaluate_many` gives, for each part, exactly what `evaluate` gives on that part
alone from its state: the same transitions (rows, labels, fields) and the same state, whatever
the state carried in (tracebacks open, exceptions pending, fired) and however the lines mix
ranks, tracebacks, progress and deciding lines."""

from __future__ import annotations

import random

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.parse import parse_lines
from logwatch.rules.base import Part
from logwatch.rules.crash import CrashRule
from tests.support.properties import examples

RULE = CrashRule(quiet_after_s=120.0)
READ = sorted(RULE.needs.columns)
LINES = [
    "step {n} | loss 2.0",
    "2024-03-02 09:18:{n:02d} INFO epoch 1 iter {n} throughput 31.5",
    "Traceback (most recent call last):",
    '  File "train.py", line {n}, in <module>',
    "    model.step()",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "ValueError: a warning printed with its traceback",
    "KeyboardInterrupt",
    "Stack (most recent call last):",
    "2024-03-02 09:18:41 ERROR trainer: RuntimeError: loader died",
    "**RuntimeError: pasted in bold**",
    "E0302 09:18:41.402000 7110 api.py:869] failed (exitcode: -9) local_rank: {r} (pid: 7) of binary: python",
    "  rank      : {n} (local_rank: {r})",
    "  exitcode  : -6 (pid: 4242)",
    "Killed",
    "srun: error: node12: task {r}: Exited with exit code 1",
    "some other line {n}",
    "",
]
PREFIXES = ["", "", "[rank{r}]:", "[rank{r}]: ", "[default{r}]:", "{r}: "]


def _lines(rng: random.Random, height: int, deciding: float) -> list[str]:
    """A source's lines: progress, tracebacks of a few ranks, now and then a deciding line."""
    out = []
    for n in range(height):
        weights = [4, 1, 2, 3, 2, 2, 1, 1, 0.3, 0.3, 0.5, 0.3]
        weights += [deciding] * 5 + [2, 0.5]
        line = rng.choices(LINES, weights=weights)[0]
        prefix = rng.choice(PREFIXES) if rng.random() < 0.6 else ""
        r = rng.choice([0, 1, 3])
        out.append(prefix.format(r=r) + line.format(n=n % 60, r=r))
    return out


def _frame(lines: list[str], first_line: int) -> pl.DataFrame:
    text = pl.Series("text", lines, dtype=pl.String)
    frame = parse_lines(text, source="s.log", first_line=first_line)
    return frame.select(READ).with_columns(pl.col("step").forward_fill())


@settings(max_examples=examples(80), deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 12), st.sampled_from([0.0, 0.05, 0.3]))
def test_each_part_is_its_own_evaluate(seed: int, count: int, deciding: float) -> None:
    """Random sources, each stepped over a first batch alone (its carried state) and then, with
    the others, over its second batch: each part's outcome is `evaluate` of that part."""
    rng = random.Random(seed)
    frames, states = [], []
    for _ in range(count):
        lines = _lines(rng, rng.choice([0, 1, 3, 8, 20, 40]), deciding)
        cut = rng.randint(0, len(lines))
        state = RULE.initial_state()
        if cut:
            _, state = RULE.evaluate(_frame(lines[:cut], 1), state)
        frames.append(_frame(lines[cut:], cut + 1))
        states.append(state)
    whole = pl.concat(frames)
    parts, begin = [], 0
    for frame, state in zip(frames, states, strict=True):
        parts.append(Part(begin, begin + frame.height, state))
        begin += frame.height
    chosen = rng.sample(range(count), rng.randint(1, count))
    chosen.sort()
    asked = [parts[n] for n in chosen]
    got = RULE.evaluate_many(whole, asked)
    assert len(got) == len(asked)
    for part, outcome, frame in zip(asked, got, [frames[n] for n in chosen], strict=True):
        assert outcome is not None
        if frame.is_empty():
            continue  # the engine never steps an empty batch
        assert repr(outcome) == repr(RULE.evaluate(frame, part.state))


def test_parts_with_tracebacks_open_across_batches_fire_as_their_own() -> None:
    """Three sources whose first batches leave rank 1's traceback open, an exception pending and
    nothing: their second batches, stepped together, fire or carry as each alone does."""
    firsts = [
        ["[rank1]:Traceback (most recent call last):", '[rank1]:  File "t.py", line 3, in f'],
        ["[rank2]:Traceback (most recent call last):", "[rank2]:KeyError: 'labels'"],
        ["step 5 | loss 2.0"],
    ]
    seconds = [
        ["[rank1]:RuntimeError: boom", "[rank0]:step 6 | loss 2.0", "Killed"],
        ["[rank2]:step 7 | loss 2.0"],
        ["step 6 | loss 2.0", "Traceback (most recent call last):"],
    ]
    states = [RULE.evaluate(_frame(lines, 1), RULE.initial_state())[1] for lines in firsts]
    frames = [_frame(lines, 3) for lines in seconds]
    parts = [Part(0, 3, states[0]), Part(3, 4, states[1]), Part(4, 6, states[2])]
    got = RULE.evaluate_many(pl.concat(frames), parts)
    alone = [RULE.evaluate(f, s) for f, s in zip(frames, states, strict=True)]
    assert repr(got) == repr(alone)
    fired, carried, opened = alone
    assert [(t.row, dict(t.labels)) for t in fired[0]] == [
        (
            2,
            {
                "rank": "1",
                "exception": "RuntimeError: boom",
                "ended": "killed (SIGKILL: the OOM killer?)",
            },
        )
    ]
    assert carried == ([], {**states[1], "pending": []})
    assert opened[0] == [] and list(opened[1]["opened"]) == ["-1"]


# a file's last lines: progress, prompts (plain, coloured, glued to a bar, after a finished run)
ENDINGS = [
    "iter {n}: loss 3.6782, time 562.18ms",
    "step {n} | loss 2.0",
    "user@host:~/nanoGPT$ ",
    "(base) user@host:~/x$ python train.py",
    "\x1b[32mroot@3f2a9c:/workspace#\x1b[0m ",
    "$ ",
    " 45%|████▌     | 450/1000 [01:02<01:16,  7.21it/s]user@host:~$ ",
    "100%|██████████| 1000/1000 [02:18<00:00,  7.22it/s]",
    "training complete",
    "Traceback (most recent call last):",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "some other line {n}",
    "",
]


def _ended_parts(rng: random.Random, count: int) -> tuple[pl.DataFrame, list[Part]]:
    """`count` sources' last lines (`finish`'s `last`: every column parsed) one after another,
    each its part, a state that a batch of random lines left (some fired, some pending)."""
    frames, parts, begin = [], [], 0
    for _ in range(count):
        lines = [rng.choice(ENDINGS).format(n=n) for n in range(rng.randint(0, 8))]
        frame = parse_lines(pl.Series("text", lines, dtype=pl.String), source="s.log", first_line=1)
        _, state = RULE.evaluate(
            _frame(_lines(rng, rng.choice([0, 3, 12]), 0.1), 1), RULE.initial_state()
        )
        frames.append(frame)
        parts.append(Part(begin, begin + frame.height, state))
        begin += frame.height
    return pl.concat(frames), parts


@settings(max_examples=examples(80), deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 12))
def test_each_part_ends_as_its_own_finish(seed: int, count: int) -> None:
    """`finish_many` of many sources' last lines (only the parts that end at a prompt made into
    rows) gives each part what `finish` gives it alone: its pending exception or open
    traceback, a prompt right after progress, or nothing."""
    whole, parts = _ended_parts(random.Random(seed), count)
    got = RULE.finish_many(whole, parts)
    for part, outcome in zip(parts, got, strict=True):
        last = whole.slice(part.begin, part.end - part.begin)
        assert repr(outcome) == repr(RULE.finish(part.state, last))


def test_prompts_after_progress_fire_and_other_endings_do_not() -> None:
    """Of four sources' last non-blank lines ended together, the plain prompt and the prompt
    glued to a progress bar fire at the prompt; a prompt after a finished run and a last line
    of progress do not."""
    endings = [
        ["iter 7: loss 3.6782, time 562.18ms", "user@host:~/nanoGPT$ "],
        [" 45%|████▌     | 450/1000 [01:02<01:16,  7.21it/s]user@host:~$ "],
        ["100%|██████████| 1000/1000 [02:18<00:00,  7.22it/s]", "user@host:~$ "],
        ["iter 7: loss 3.6782, time 562.18ms"],
    ]
    frames = [
        parse_lines(pl.Series("text", lines, dtype=pl.String), source="s.log", first_line=1)
        for lines in endings
    ]
    parts, begin = [], 0
    for frame in frames:
        parts.append(Part(begin, begin + frame.height, RULE.initial_state()))
        begin += frame.height
    got = RULE.finish_many(pl.concat(frames), parts)
    fired = [[t.fields["line"] for t in transitions] for transitions, _ in got]
    assert fired == [[2], [1], [], []]
    assert repr(got) == repr([RULE.finish(p.state, f) for p, f in zip(parts, frames, strict=True)])
