"""Line shapes give exactly the general path's values: generated lines of each shape, and of
near-misses that must fall back to the general path, parsed both ways."""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from logwatch.gpu.log_rows import PLAIN_PAIRS_LINE, TelemetryRows, read_telemetry_rows
from logwatch.parse import (
    SCHEMA,
    TINY_BATCH_ROWS,
    TOKEN_ROWS,
    parse_block,
    parse_lines,
    shape_of,
)
from logwatch.parse.shapes import PLAIN_PAIRS_SHAPES, SHAPES, Shape, cut_tokens, line_shape
from logwatch.parse.timestamps import ParsedBlock
from tests.support.properties import examples

SETTINGS = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

LEVELS = st.sampled_from(["INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL"])
ODD_LEVELS = st.sampled_from(["WARN", "info", "NOTICE"])
CLEAN = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: f"{x:.4f}"),
    st.floats(1e-9, 1e9).map(lambda x: f"{x:.2e}"),
    st.integers(0, 10**20).map(str),
    st.sampled_from(["nan", "-nan", "inf", "-inf", "1e400", "0", "-0.0", "1.5e+03"]),
    # the casings a diverged run prints (the DFlash step shape takes them)
    st.sampled_from(["NaN", "-NaN", "Inf", "-Inf", "NAN", "INF"]),
)
ODD = st.sampled_from(["nAn", "iNF", "nan.0", "inf.", "infinity", "1.", ".5", "+2.0", "1,5", "x"])
CLEAN_INT = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(["0", "007", "1" * 18]))
ODD_INT = st.sampled_from(["1" * 19, "12.5", "3e4", "-1", ""])
CLEAN_BUCKETS = st.lists(st.integers(0, 99).map(str), max_size=8).map(",".join)
ODD_BUCKETS = st.sampled_from(
    ["1, 2", "a,1", ",,", " 3", "", "1,,2", "007,99999999999999999999", "3,"]
)


@st.composite
def timestamps(draw: st.DrawFn, odd: bool = False) -> str:
    # An impossible date when odd: the dense timestamp then fails the same both ways.
    month = 13 if odd else draw(st.integers(1, 12))
    return (
        f"2026-{month:02d}-{draw(st.integers(1, 28)):02d} 14:17:05,{draw(st.integers(0, 999)):03d}"
    )


class Fields:
    """Values for one generated line: all clean, but for at most one odd field (in a third of
    the lines), so most lines have the shape and the rest are its near misses."""

    def __init__(self, draw: st.DrawFn, names: list[str]) -> None:
        self.draw = draw
        odd = draw(st.sampled_from([*names, *[None] * (2 * len(names))]))
        self.odd = odd

    def __call__(
        self, name: str, clean: st.SearchStrategy[str], odd: st.SearchStrategy[str]
    ) -> str:
        return self.draw(odd if self.odd == name else clean)


@st.composite
def step_lines(draw: st.DrawFn) -> str:
    names = [
        "ts",
        "level",
        "step",
        "sep",
        "loss",
        "acc",
        "lr",
        "grad",
        "tok",
        "q_hs",
        "q_hsb",
        "end",
    ]
    f = Fields(draw, names)
    sep = f("sep", st.just(" | "), st.sampled_from(["  | ", " |", "|"]))
    return (
        f"{draw(timestamps(f.odd == 'ts'))} {f('level', LEVELS, ODD_LEVELS)} [train] step "
        f"{f('step', CLEAN_INT, ODD_INT)}/200000{sep}loss {f('loss', CLEAN, ODD)} | "
        f"acc {f('acc', CLEAN, ODD)} | lr {f('lr', CLEAN, ODD)} | grad_norm {f('grad', CLEAN, ODD)}"
        f" | tok/s {f('tok', CLEAN_INT, ODD_INT)} | q_hs={f('q_hs', CLEAN_INT, ODD_INT)} "
        f"q_hsb=[{f('q_hsb', CLEAN_BUCKETS, ODD_BUCKETS)}]"
        f"{f('end', st.just(''), st.sampled_from([' ', ' x', ' loss=nan']))}"
    )


@st.composite
def queue_lines(draw: st.DrawFn) -> str:
    f = Fields(draw, ["ts", "level", "q_hsb", "q_hs", "end"])
    return (
        f"{draw(timestamps(f.odd == 'ts'))} {f('level', LEVELS, ODD_LEVELS)} [hsq] "
        f"q_hsb=[{f('q_hsb', CLEAN_BUCKETS, ODD_BUCKETS)}] at q_hs={f('q_hs', CLEAN_INT, ODD_INT)}"
        f"{f('end', st.just(''), st.sampled_from([' ', ' step 5']))}"
    )


# Snapshot keys: the real ones, and keys every general extractor reacts to.
CLEAN_KEYS = st.sampled_from(
    [
        "prof/target_fwd_ms",
        "queue/ready_ratio",
        "worker/3/seqs",
        "cuda/alloc_gb",
        "gpu/0/util",
        "gpu/7/mem_gb",
        "gpu/1/power_w",
        "gpu/5/temp_c",
    ]
)
ODD_KEYS = st.sampled_from(
    [
        "train/loss",
        "opt/lr",
        "train/grad_norm",
        "perf/tokens_per_sec",
        "perf/samples/s",
        "data/epoch",
        "q/q_hs",
        "eval/valid_ppl",
        "run/step",
        "gpu/0/info",
        "speed/it/s",
        "Train/Loss",
        "gpu/0/Temp_c",
        "x/gpu/1/util",
    ]
)


SNAPSHOT_VALUES = st.one_of(
    st.floats(0, 1e4, allow_nan=False).map(lambda x: f"{x:.1f}"),
    st.integers(0, 700).map(str),
)


@st.composite
def snapshot_lines(draw: st.DrawFn) -> str:
    f = Fields(draw, ["ts", "level", "step", "value", "key"])
    keys = draw(st.lists(CLEAN_KEYS, max_size=40))
    if f.odd == "key":
        keys.insert(draw(st.integers(0, len(keys))), draw(ODD_KEYS))
    values = [draw(SNAPSHOT_VALUES) for _ in keys]
    if f.odd == "value" and values:
        values[draw(st.integers(0, len(values) - 1))] = draw(st.one_of(ODD, CLEAN))
    body = "".join(f" {key}={value}" for key, value in zip(keys, values, strict=True))
    return (
        f"{draw(timestamps(f.odd == 'ts'))} {f('level', LEVELS, ODD_LEVELS)} [wandb] snapshot "
        f"step={f('step', CLEAN_INT, ODD_INT)}{body}"
    )


@st.composite
def hf_lines(draw: st.DrawFn) -> str:
    f = Fields(draw, ["loss", "grad", "lr", "epoch", "end"])
    grad = draw(
        st.one_of(st.just(""), st.just(f("grad", CLEAN, ODD)).map(lambda v: f"'grad_norm': {v}, "))
    )
    epoch = f("epoch", st.floats(0, 99).map(lambda x: f"{x:.2f}"), st.one_of(ODD, CLEAN))
    tail = f("end", st.just("}"), st.sampled_from([", 'step': 10}", "} ", ", 'loss': nan}"]))
    return (
        f"{{'loss': {f('loss', CLEAN, ODD)}, {grad}'learning_rate': {f('lr', CLEAN, ODD)}, "
        f"'epoch': {epoch}{tail}"
    )


MEGATRON_NONFINITE = st.sampled_from(["NAN", "INF", "-INF", "nan", "inf", "NaN", "Inf"])
MEGATRON_CLEAN = st.one_of(  # what Megatron prints: plain or E notation, mostly non-negative
    st.floats(0, 1e6, allow_nan=False).map(lambda x: f"{x:.1f}"),
    st.floats(1e-9, 1e9).map(lambda x: f"{x:.3E}"),
    CLEAN,
)


@st.composite
def megatron_lines(draw: st.DrawFn) -> str:
    """Megatron-LM's iteration line, blank-padded as it prints it; a skipped iteration's has
    no `lm loss` and no `grad norm`."""
    names = ["step", "samples", "ms", "lr", "batch", "loss", "scale", "grad", "skipped", "nans"]
    f = Fields(draw, [*names, "sep", "pad", "end"])
    pad = f("pad", st.integers(1, 9).map(lambda n: " " * n), st.sampled_from(["", "\t", " x "]))
    sep = f("sep", st.just(" | "), st.sampled_from([" |  ", "| ", " || "]))
    loss = st.one_of(MEGATRON_CLEAN, MEGATRON_NONFINITE)
    value = {
        "step": f("step", CLEAN_INT, ODD_INT),
        "samples": f("samples", CLEAN_INT, ODD_INT),
        "ms": f("ms", MEGATRON_CLEAN, ODD),
        "lr": f("lr", MEGATRON_CLEAN, ODD),
        "batch": f("batch", CLEAN_INT, ODD_INT),
        "loss": f("loss", loss, ODD),
        "scale": f("scale", MEGATRON_CLEAN, ODD),
        "grad": f("grad", loss, ODD),
        "skipped": f("skipped", CLEAN_INT, ODD_INT),
        "nans": f("nans", CLEAN_INT, ODD_INT),
    }
    fields = [
        f"consumed samples:{pad}{value['samples']}",
        f"elapsed time per iteration (ms):{pad}{value['ms']}",
        f"learning rate:{pad}{value['lr']}",
        f"global batch size:{pad}{value['batch']}",
    ]
    if draw(st.booleans()):
        fields.append(f"lm loss:{pad}{value['loss']}")
        fields.append(f"loss scale:{pad}{value['scale']}")
        fields.append(f"grad norm:{pad}{value['grad']}")
    else:
        fields.append(f"loss scale:{pad}{value['scale']}")
    fields.append(f"number of skipped iterations:{pad}{value['skipped']}")
    fields.append(f"number of nan iterations:{pad}{value['nans']}")
    end = f("end", st.just(" |"), st.sampled_from(["", " | x", " |  "]))
    return f" iteration{pad}{value['step']}/{pad[1:]}20000000{sep}" + sep.join(fields) + end


# What replay parses for the built-in rules: `gpu_keys` without `telemetry` (a shape counts it).
REPLAY_COLUMNS = frozenset({"step", "loss", "q_hs", "q_hsb", "q_hsb_nonzero", "gpu_keys"})


def both_ways(lines: list[str], *, metrics: bool = False) -> None:
    text = pl.Series("text", lines, dtype=pl.String)
    for columns in (None, REPLAY_COLUMNS):
        fast = parse_lines(
            text, source="s", first_line=1, default_year=2026, metrics=metrics, columns=columns
        )
        general = parse_lines(
            text,
            source="s",
            first_line=1,
            default_year=2026,
            metrics=metrics,
            shapes=False,
            columns=columns,
        )
        assert fast.schema == pl.Schema(SCHEMA)
        assert_frame_equal(fast, general, check_exact=True)  # bytes: JSONL


@SETTINGS
@given(st.lists(step_lines(), min_size=1, max_size=20))
def test_dflash_step_shape_gives_the_general_values(lines: list[str]) -> None:
    both_ways(lines)


@SETTINGS
@given(st.lists(queue_lines(), min_size=1, max_size=20))
def test_dflash_queue_shape_gives_the_general_values(lines: list[str]) -> None:
    both_ways(lines)


@SETTINGS
@given(st.lists(snapshot_lines(), min_size=1, max_size=20))
def test_dflash_snapshot_shape_gives_the_general_values(lines: list[str]) -> None:
    both_ways(lines)


@SETTINGS
@given(st.lists(hf_lines(), min_size=1, max_size=20))
def test_hf_dict_shape_gives_the_general_values(lines: list[str]) -> None:
    both_ways(lines)


@SETTINGS
@given(st.lists(megatron_lines(), min_size=1, max_size=20), st.booleans())
def test_megatron_iteration_shapes_give_the_general_values(lines: list[str], metrics: bool) -> None:
    both_ways(lines, metrics=metrics)


MIXED_LINES = st.lists(
    st.one_of(
        step_lines(),
        queue_lines(),
        snapshot_lines(),
        hf_lines(),
        megatron_lines(),
        st.text(max_size=80),
    ),
    min_size=1,
    max_size=30,
)
"""Lines of every shape, their near misses and any text, in any order."""


@SETTINGS
@given(
    MIXED_LINES,
    st.booleans(),
)
def test_mixed_lines_give_the_general_values(lines: list[str], metrics: bool) -> None:
    both_ways([line.replace("\n", " ").replace("\r", " ") for line in lines], metrics=metrics)


MEGATRON = (
    " iteration       10/20000000 | consumed samples:         5120 | elapsed time per iteration"
    " (ms): 3591.8 | learning rate: 1.500E-04 | global batch size:   512 |{loss} number of"
    " skipped iterations:   0 | number of nan iterations:   0 |"
)


def test_each_shape_takes_its_lines_and_leaves_near_misses() -> None:
    lines = [
        "2026-11-28 14:09:05,117 INFO [train] step 120/200000 | loss 3.4812 | acc 0.271 | "
        "lr 2.40e-05 | grad_norm 1.92 | tok/s 51234 | q_hs=31 q_hsb=[1,2,2,5,5,16]",
        "2026-11-28 14:09:33,401 INFO [hsq] q_hsb=[1,2,2,5,5,16] at q_hs=31",
        "2026-11-28 14:10:00,002 INFO [wandb] snapshot step=150 prof/drafter_ms=88.1 gpu/0/util=98",
        # a key not of DFlash's script (`dflash-snapshot-spec`'s words): the general snapshot
        "2026-11-28 14:10:00,002 INFO [wandb] snapshot step=150 sys/disk_gb=8.1 gpu/0/util=98",
        "{'loss': 0.4512, 'grad_norm': 1.25, 'learning_rate': 4.9e-05, 'epoch': 0.02}",
        # near misses: a padded NaN, a loss key in a snapshot, an extra HF key
        "2026-11-28 14:09:05,117 INFO [train] step 121/200000 | loss nan.0 | acc 0.271 | "
        "lr 2.40e-05 | grad_norm 1.92 | tok/s 51234 | q_hs=31 q_hsb=[1,2,2,5,5,16]",
        "2026-11-28 14:10:00,002 INFO [wandb] snapshot step=151 train/loss=2.5 gpu/0/util=98",
        "{'loss': 0.4512, 'learning_rate': 4.9e-05, 'epoch': 0.02, 'step': 10}",
        # Megatron: an iteration, a skipped one, and a near miss (`NaN`, which the shape leaves)
        MEGATRON.format(loss=" lm loss: 2.187573E+00 | loss scale: 65536.0 | grad norm: 1.349 |"),
        MEGATRON.format(loss=" loss scale: 32768.0 |"),
        MEGATRON.format(loss=" lm loss: NaN | loss scale: 65536.0 | grad norm: 1.349 |"),
    ]
    which = shape_of(pl.Series(lines))
    assert which is not None
    assert which.to_list() == [0, 1, 2, 3, 4, None, None, None, 5, 6, None]
    assert [shape.name for shape in SHAPES] == [
        "dflash-step",
        "dflash-queue",
        "dflash-snapshot-spec",
        "dflash-snapshot",
        "hf-dict",
        "megatron-iteration",
        "megatron-skipped",
        "dflash-data",
        "dflash-clipping",
        "megatron-timers",
    ]
    both_ways(lines, metrics=True)


def _tail_columns() -> frozenset[str]:
    from logwatch.api import load_rules
    from logwatch.drivers.plugins import parse_columns
    from logwatch.engine import Engine

    return frozenset(parse_columns(Engine(load_rules()).every_column, []))


TAIL_COLUMNS = _tail_columns()
ANY_LINE = st.one_of(
    step_lines(),
    queue_lines(),
    snapshot_lines(),
    hf_lines(),
    megatron_lines(),
    st.text(max_size=80),
).map(lambda line: line.replace("\n", " ").replace("\r", " "))


@SETTINGS
@given(
    st.lists(ANY_LINE, min_size=1, max_size=3),
    st.sampled_from([None, TAIL_COLUMNS, frozenset({"loss"}), frozenset({"lr", "pid"})]),
    st.booleans(),
)
def test_a_live_batch_parses_as_the_same_lines_in_a_big_batch(
    lines: list[str], columns: frozenset[str] | None, metrics: bool
) -> None:
    """A batch of 1-3 lines (tail's, parsed by the live-batch route) gives the rows, and the
    year carry, those lines give at the head of a batch too big for that route."""
    copies = -(-(TINY_BATCH_ROWS + 1) // len(lines))

    def parsed(block: list[str]) -> ParsedBlock:
        text = pl.Series("text", block, dtype=pl.String)
        return parse_block(
            text, source="s", first_line=7, default_year=2026, metrics=metrics, columns=columns
        )

    live, big = parsed(lines), parsed(lines * copies)
    assert_frame_equal(live.frame, big.frame.head(len(lines)))
    assert live.last_year == big.last_year
    if live.last_year is not None:
        assert live.head_rows == big.head_rows


@SETTINGS
@given(st.lists(ANY_LINE, min_size=1, max_size=20))
def test_a_live_batchs_line_shape_is_shape_of(lines: list[str]) -> None:
    """Each line's shape by `line_shape` (live batches, one expression) is its shape by
    `shape_of` (big batches): the first shape whose literal the line holds and whose pattern
    fits it, null when there is none."""
    text = pl.Series("text", lines, dtype=pl.String)
    live = text.to_frame().select(line_shape()).to_series().to_list()
    found = shape_of(text)
    assert live == (found.to_list() if found is not None else [None] * len(lines))
    for line, number in zip(lines, live, strict=True):
        if number is not None:
            assert SHAPES[number].literal in line and _fits(SHAPES[number], line)


def _fits(shape: Shape, line: str) -> bool:
    return bool(pl.DataFrame({"text": [line]}).select(shape.fits()).item())


TOKENED = [shape for shape in SHAPES if shape.tokens]
TOKENED_LINES = {
    "dflash-step": step_lines(),
    "dflash-queue": queue_lines(),
    "megatron-iteration": megatron_lines(),
    "megatron-skipped": megatron_lines(),
}


def test_every_shape_cut_by_tokens_has_generated_lines() -> None:
    assert {shape.name for shape in TOKENED} == set(TOKENED_LINES)


@SETTINGS
@given(st.data())
def test_token_cuts_give_the_field_cuts_values(data: st.DataObject) -> None:
    """On the lines a shape accepts, each cut read from its token (`cut_tokens`, long batches)
    is the cut read between its separators (`Cut.expr`, every batch), and every line has the
    shape's number of tokens."""
    shape = data.draw(st.sampled_from(TOKENED))
    lines = data.draw(st.lists(TOKENED_LINES[shape.name], min_size=1, max_size=40))
    accepted = pl.DataFrame({"text": lines}).filter(shape.accepts())
    if accepted.is_empty():
        return
    tokens = {len(line.split(shape.separator)) for line in accepted.get_column("text")}
    assert tokens == {shape.tokens}
    names = [name for name, cut in shape.cuts.items() if cut.token is not None]
    by_tokens = cut_tokens(shape, accepted.get_column("text"), names)
    by_fields = accepted.select(shape.cuts[name].expr().alias(name) for name in names)
    assert_frame_equal(by_tokens, by_fields, check_exact=True)


@SETTINGS
@given(
    st.lists(
        st.one_of(step_lines(), queue_lines(), snapshot_lines(), megatron_lines()),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([None, REPLAY_COLUMNS, frozenset({"loss", "lr"})]),
)
def test_a_batch_long_enough_for_token_cuts_gives_the_general_values(
    lines: list[str], columns: frozenset[str] | None
) -> None:
    """A batch with more lines of a shape than `TOKEN_ROWS` (cut by tokens) parses as the
    general path parses it."""
    big = lines * -(-(TOKEN_ROWS + 1) // len(lines))
    text = pl.Series("text", big, dtype=pl.String)
    fast = parse_lines(text, source="s", first_line=1, default_year=2026, columns=columns)
    general = parse_lines(
        text, source="s", first_line=1, default_year=2026, columns=columns, shapes=False
    )
    assert_frame_equal(fast, general, check_exact=True)


@SETTINGS
@given(
    MIXED_LINES,
    st.sampled_from([None, REPLAY_COLUMNS]),
)
@example(  # a NaN where a GPU column holds integers: both reads take it as missing
    [
        "2026-11-01 14:17:05,000 INFO [train] step 0/9 | loss 0.0 | acc 0.0 | lr 0.0 | grad_norm 0.0"
        " | tok/s 0 | q_hs=0 q_hsb=[]",
        "snapshot:gpu/0/mem_gb=NAN",
    ],
    None,
)
def test_lines_said_plain_are_plain_pairs_lines(
    lines: list[str], columns: frozenset[str] | None
) -> None:
    """The shapes a parse says its lines have (`ParsedBlock.shapes`) are `shape_of`'s, and the
    lines of a plain-pairs shape match `PLAIN_PAIRS_LINE`, so the GPU rows read with what it
    says are the rows read without."""
    lines = [line.replace("\n", " ").replace("\r", " ") for line in lines]
    text = pl.Series("text", lines * -(-(TINY_BATCH_ROWS + 1) // len(lines)), dtype=pl.String)
    block = parse_block(text, source="s", first_line=1, default_year=2026, columns=columns)
    which = shape_of(text)
    if block.shapes is None or which is None:
        assert block.shapes is None and which is None
        return
    assert block.shapes.equals(which, check_names=False)
    said = block.shapes.is_in(PLAIN_PAIRS_SHAPES).fill_null(False)
    plain = block.frame.select(pl.col("text").str.contains(PLAIN_PAIRS_LINE)).to_series()
    assert not (said & ~plain).any()
    assert said.sum() == which.is_in(PLAIN_PAIRS_SHAPES).sum()
    # the same rows and the same pairs left out (a value no GPU column holds, `mem_gb=NAN`)
    with_hint, without = _outcome(block.frame, said), _outcome(block.frame, None)
    assert_frame_equal(with_hint.rows, without.rows)
    assert with_hint.dropped == without.dropped


def _outcome(frame: pl.DataFrame, plain_pairs: pl.Series | None) -> TelemetryRows:
    return read_telemetry_rows(frame, plain_pairs=plain_pairs)


def test_a_lines_throughput_does_not_hang_on_its_batch() -> None:
    """Megatron's milliseconds per iteration give the same throughput, to the bit, for a line
    parsed alone and in a longer batch, by either route (polars divides two or more rows by a
    number as a product with its reciprocal, one row exactly: 1e-9 ms gave 1e12 alone and
    999999999999.9999 in a batch)."""
    line = MEGATRON.format(loss=" loss scale: 1.0 |").replace("3591.8", "1.000E-09")
    other = "time (ms) | forward-backward: 3400.00"  # a line the throughput hint also reads
    for shapes in (True, False):
        alone, batched = (
            parse_lines(pl.Series("text", lines), source="s", first_line=1, shapes=shapes)
            .get_column("throughput")
            .to_list()[-1]
            for lines in ([line], [other, line])
        )
        assert repr(alone) == repr(batched) == repr(1.0 / (1e-9 * 0.001))
