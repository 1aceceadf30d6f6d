"""The fleet tap of a parse group (`lineinfo.tapped` over many files' lines at once, cut per
file) keeps for each file what a tap of that file alone keeps (`SourceTap.see`): its timed
lines, its classed fleet records, its writer facts and its writers."""

from __future__ import annotations

import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st

from logwatch.drivers.classes import (
    CLASS_ANY,
    CLASS_GATE,
    CLASS_WORDS,
    CLASSES,
    IDENTITY_ANY,
    IDENTITY_WORDS,
    WORD_ANY,
)
from logwatch.drivers.layout import path_identity
from logwatch.drivers.lineinfo import classed, distinct_facts, facts, maybe_classed, tapped
from logwatch.drivers.ranks import FleetFacts, SourceTap
from logwatch.parse import parse_lines
from logwatch.parse.prefix import ANY_PREFIX, has_prefix, with_prefixes
from tests.support.properties import examples

LINES = [
    "2026-11-01 00:05:27,034 INFO [train] step 661/200000 | loss 2.8729 | grad_norm 1.83",
    "2026-11-01 00:05:28,034 INFO [train] step 662/200000 | loss nan | grad_norm inf",
    "node-001:4242:4242 [3] NCCL INFO comm 0x55d1 rank 11 nranks 16 cudaDev 3 nvmlDev 3 "
    "busId 3b000 commId 0x9f1 - Init COMPLETE",
    "node-001:4242:4242 [3] NCCL INFO Bootstrap : Using eth0:10.1.1.3<0>",
    "node-002:77:77 [0] NCCL WARN NET/IB : Got completion with error 12",
    "[default3]:[rank11]:[E1107 02:50:13.123456 ProcessGroupNCCL.cpp:616] [Rank 11] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=88811, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.",
    "3: [rank3]:[E1107 02:50:14.000000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 3] Process group watchdog thread terminated with exception: CUDA error: an illegal "
    "memory access was encountered",
    "Traceback (most recent call last):",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "[2026-11-01 00:00:01,100] torch.distributed.elastic.agent.server.api: [INFO] [default] "
    "Starting worker group on node-001",
    "Dec  7 02:50:13 node-017 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen "
    "off the bus.",
    "[rank5]: I1107 02:40:00.000 Setting up process group [rank=5, world_size=16]",
    "",
    "   ",
    "some plain text with no time",
]


def _frame(source: str, lines: list[str]) -> pl.DataFrame:
    text = pl.Series("text", lines, dtype=pl.String)
    return parse_lines(text, source=source, first_line=1, default_year=2026)


def _same(alone: SourceTap, grouped: SourceTap) -> None:
    assert alone.facts == grouped.facts
    assert alone.time_of(10**9) == grouped.time_of(10**9)
    for line in range(1, 80):
        assert alone.time_of(line) == grouped.time_of(line)
    alone.close()
    grouped.close()
    assert len(alone.records) == len(grouped.records)
    for a, b in zip(alone.records + alone.writers, grouped.records + grouped.writers, strict=True):
        assert a.equals(b), (a, b)
        assert a.schema == b.schema


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(range(len(LINES))), min_size=0, max_size=25),
        min_size=1,
        max_size=6,
    )
)
def test_a_group_tap_keeps_what_each_file_alone_keeps(files: list[list[int]]) -> None:
    """Any files (empty ones too) of any fleet lines, tapped together in one pass and cut per
    file: each file's timed lines, classed records, facts and writers are those of its own tap."""
    frames = [_frame(f"host-a/run/attempt_0/{i}/stderr.log", [LINES[k] for k in picks])
              for i, picks in enumerate(files)]  # fmt: skip
    numbers = pl.concat(
        [pl.repeat(i, frame.height, dtype=pl.UInt32, eager=True) for i, frame in enumerate(frames)]
    )
    found = tapped(pl.concat(frames), numbers)
    assert len(found) <= len(frames)  # a trailing empty file has no row to count it by
    for i, frame in enumerate(frames):
        source = str(frame.item(0, "source")) if frame.height else f"empty-{i}"
        alone = SourceTap(source, path_identity(source))
        alone.see(frame)
        grouped = SourceTap(source, path_identity(source))
        part = found[i] if i < len(found) else None
        assert (part is None) == (frame.height == 0)
        if part is not None:
            grouped.take(part)
        _same(alone, grouped)


def test_the_facts_a_tap_keeps_are_distinct_and_in_first_seen_order() -> None:
    """A fact line said again (each communicator's init repeats it) adds nothing; the rank,
    host and GPU bus it names are resolved as from the first."""
    repeated = [LINES[3], LINES[2], LINES[3], LINES[2], LINES[2]]
    tap = SourceTap("job.out", path_identity("job.out"))
    tap.see(_frame("job.out", repeated))
    assert [(f.nhost, f.crank) for f in tap.facts] == [("node-001", None), ("node-001", 11)]
    facts = FleetFacts()
    facts.adopt(tap)
    who = facts.who()
    assert who.rank_host[11] == "node-001"
    assert who.bus_rank[("node-001", "3b00")] == 11
    assert who.host_local[("node-001", 3)] == 11


def test_a_tap_keeps_only_the_candidates_classed_would_class() -> None:
    """A literal word on every line of a log (Megatron's `number of nan iterations: 0`) does not
    keep every line to the file's end: only the lines `classed` takes, and it classes them alike."""
    iteration = (
        " iteration       10/20000000 | lm loss: 2.187573E+00 | number of skipped iterations:   0"
        " | number of nan iterations:   0 |"
    )
    lines = [iteration, LINES[1], iteration, LINES[6], iteration]
    frame = _frame("job.out", lines)
    tap = SourceTap("job.out", path_identity("job.out"))
    tap.see(frame)
    kept = pl.concat(tap.records)
    assert kept.get_column("line").to_list() == [2, 4]
    assert classed(kept).get_column("line").to_list() == [2, 4]


_PARTS = [*"naNIfx :=-'|.*+?()[]\\$^", "NCCL INFO", "Error", "inf", "GROUP_RANK"]
_WORDY = st.lists(st.sampled_from(_PARTS), max_size=12).map("".join)


@settings(max_examples=examples(200), deadline=None)
@given(texts=st.lists(st.one_of(_WORDY, st.sampled_from(LINES)), max_size=20))
def test_the_word_regexes_select_what_contains_any_selects(texts: list[str]) -> None:
    """The literal first passes (`CLASS_ANY`, `IDENTITY_ANY`: one regex alternation, faster
    than Aho-Corasick) select exactly the lines `str.contains_any` of their words selects,
    regex metacharacters in the text or in the words included."""
    text = pl.col("text")
    frame = pl.DataFrame({"text": texts}, schema={"text": pl.String})
    every = [*CLASS_WORDS, *IDENTITY_WORDS]
    for pattern, words in (
        (CLASS_ANY, CLASS_WORDS),
        (IDENTITY_ANY, IDENTITY_WORDS),
        (WORD_ANY, every),
    ):
        found = frame.select(text.str.contains(pattern).alias("a"), text.str.contains_any(words))
        assert found.get_column("a").to_list() == found.get_column("text").to_list()


_LOSS_PARTS = [*" _'\":=+-x", "train", "loss", "LOSS", "Loss", "nan", "NaN", "inf", "INF", "lm "]
_WRITTEN_ONCE = r"(?i)\b(?:train[_ ])?loss\b['\"]?\s*[:=]?\s*['\"]?[-+]?(?:nan|inf)\b"


@settings(max_examples=examples(150), deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(_LOSS_PARTS), max_size=10).map("".join)))
@example(texts=["train_loss: nan", "train loss='inf'", "gloss nan", "xtrain_loss nan", "Loss -INF"])
def test_the_nan_loss_class_matches_what_its_one_alternative_form_matched(
    texts: list[str],
) -> None:
    """`nan-loss`, written as two alternatives that begin with a literal (fast on lines that say
    `loss` without a NaN), classes exactly the lines `\\b(?:train[_ ])?loss\\b...` did."""
    pattern = dict((kind, pattern) for kind, _, pattern in CLASSES)["nan-loss"]
    frame = pl.DataFrame({"text": texts}, schema={"text": pl.String})
    text = pl.col("text")
    found = frame.select(text.str.contains(pattern).alias("now"), text.str.contains(_WRITTEN_ONCE))
    assert found.get_column("now").to_list() == found.get_column("text").to_list()


def _class_lines() -> st.SearchStrategy[str]:
    """Lines that match one class's pattern (any class), with a NaN word or two around."""
    pattern = st.sampled_from([pattern for _, _, pattern in CLASSES]).flatmap(st.from_regex)
    word = st.sampled_from(["", "nan ", " inf ", "x-inf: ", "NaN"])
    return st.tuples(word, pattern, word).map("".join)


@settings(max_examples=examples(100), deadline=None)
@given(texts=st.lists(st.one_of(_class_lines(), st.sampled_from(LINES)), max_size=12))
@example(
    texts=[
        "remote process exited nan",
        "nan an illegal memory access was encountered",
        "Inf: Connection closed by remote peer",
        "lm loss: nAn | grad norm: +inf | number of nan iterations:   1 |",
        " iteration 10/ 100 | lm loss: 2.1E+00 | number of nan iterations:   0 |",
    ]
)
def test_a_tap_keeps_the_lines_the_whole_class_gate_keeps(texts: list[str]) -> None:
    """`maybe_classed` runs the whole class gate only on lines with another class's words
    (`OTHER_ANY`), the NaN classes' own patterns on the rest: it keeps exactly the lines with a
    class word that the whole gate matches, for lines of every class with NaN words around,
    whether it begins with the literal pass or (most lines holding a class word) ends with it."""
    frame = with_prefixes(
        _frame("job.out", texts).with_columns(pl.col("ts").is_not_null().alias("timed"))
    )
    text = pl.col("text")
    expected = frame.filter(text.str.contains_any(CLASS_WORDS) & text.str.contains(CLASS_GATE))
    for dense in (None, False, True):
        kept = maybe_classed(frame, dense=dense)
        assert kept.get_column("line").to_list() == expected.get_column("line").to_list()
        assert kept.equals(maybe_classed(frame, dense=False))


def test_a_one_file_tap_counts_writers_as_a_group_by_does() -> None:
    """A one-file tap's writers (counted without a group-by where its lines have no prefix) are
    those of a group-by on source and prefix: for plain lines, lines naming two sources, and
    rank-prefixed lines."""
    plain = _frame("a.log", [*LINES[:2], "some plain text with no time"])
    mixed = pl.concat([plain, _frame("b.log", LINES[:2])])
    for frame, writers in ((plain, 1), (mixed, 2), (_frame("c.log", LINES), 4)):
        found = tapped(frame, pl.repeat(0, frame.height, dtype=pl.UInt32, eager=True))[0]
        assert found is not None
        base = with_prefixes(frame.with_columns(pl.col("ts").is_not_null().alias("timed")))
        expected = base.group_by("source", "p_rank", "p_local", maintain_order=True).agg(
            pl.len().cast(pl.UInt32).alias("lines"),
            pl.col("line").max().alias("last_line"),
            pl.col("ts").filter(pl.col("timed")).min().alias("first_ts"),
            pl.col("ts").filter(pl.col("timed")).max().alias("last_ts"),
        )
        assert found.writers.to_dicts() == expected.to_dicts()
        assert found.writers.height == writers


_PREFIXED = [
    "node-17: loss 2.1",
    "  3: [rank3]: step 5",
    "[default3]:[rank11]: x",
    "[rank0]: y",
    "foo [1,3]<stderr>: z",
    "abc[1,mpirank:2,x]<stdout>:w",
]


@settings(max_examples=examples(60), deadline=None)
@given(
    texts=st.lists(
        st.one_of(_class_lines(), st.sampled_from(LINES), st.sampled_from(_PREFIXED), _WORDY),
        max_size=12,
    ),
    plain=st.integers(0, 300),
)
def test_a_tap_keeps_the_records_and_facts_of_every_line(texts: list[str], plain: int) -> None:
    """A tap's first pass (class and identity words in one literal pass, or none where most
    lines hold a class word) and its prefix test (the anchored one only on lines with `: `,
    `]:` or `]<std`, unless most lines have them) keep the records `maybe_classed` and the
    facts `facts` keep of the whole block, and find a prefix where a line has one: with the
    lines after a run of plain lines or among them."""
    for lines in (texts, [LINES[0]] * plain + texts, texts + [LINES[0]] * plain):
        if not lines:
            continue
        frame = _frame("job.out", lines)
        found = tapped(frame, pl.repeat(0, frame.height, dtype=pl.UInt32, eager=True))[0]
        assert found is not None
        text = pl.col("text")
        assert has_prefix(frame) == frame.select(text.str.contains(ANY_PREFIX).any()).item()
        base = with_prefixes(
            frame.select("source", "line", "ts", "text").with_columns(
                pl.col("ts").is_not_null().alias("timed"), pl.col("ts").forward_fill()
            )
        )
        records = maybe_classed(base, dense=False)
        assert found.records.equals(records)
        assert list(found.facts) == list(distinct_facts(facts(base)))
