"""Line shapes: the few line forms that make up most of a log, cut by one anchored pattern.

The general parser (`parse.general`) finds every metric by key, anywhere in a line, with one
regex pass per key. Most lines of a long run are a handful of fixed forms, though: the DFlash
step line, its queue report and its telemetry snapshot, the Hugging Face Trainer's dict. A
shape recognises one such form by a literal (a fast substring search) and an anchored pattern
over the whole line (a DFA pass, no captures), then cuts the fields the caller wants by
position: between the fixed separators around them, one substring search each.

A shape is exact by construction and by test: its pattern only accepts lines on which the
general path's extractors give what the shape gives (each field is a plain number between
fixed separators; no other key the general path reads can appear), and the values are cast the
way the general path casts them. `tests/test_shapes.py` proves it with generated lines.
Every line a shape does not accept takes the general path.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import polars as pl

# ASCII digits throughout: a Unicode `\d` makes the regex engine's DFA several times slower
# (a line with other digits takes the general path, which reads them as it always did).
# Python logging's default prefix, the form the dense timestamp reads (`framing._LOGGING_TS_FORMAT`).
_TS = r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3} (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
# A value as a shape accepts it: a plain decimal, or a non-finite spelling polars reads.
_NUM = r"-?(?:[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|nan|inf|NaN|Inf|NAN|INF)"
_INT = r"[0-9]{1,18}"
# Snapshot keys and values: lowercase paths and plain decimals only (other forms: general path).
_PAIR = r" [a-z0-9_]+(?:/[a-z0-9_]+)+=-?[0-9]+(?:\.[0-9]+)?"
# Words any general extractor reacts to (in any casing): a snapshot line that has one after
# `snapshot step=` takes the general path (its prefix is fixed, `INFO` included). Lower case is
# enough: what follows the literal on a line of the shape's pattern has no other letters (no
# upper case, no Kelvin sign or long s), and a line off the pattern is not the shape's anyway.
_SNAPSHOT_FORBIDDEN = (
    r"loss|norm|lr|learn|iter|poch|q_hs|tok|sample|tps|sec|valid|xent|it/s|s/it|rank"
    r"|run start|nan|inf|rate|returned|unexpected|step.*step"
)

# DFlash's data-loader chatter: fixed words and plain counts, but for a shard's path. No value
# column has a value on these lines: a path holding a word some general extractor reads (or
# `step`, `snapshot`: the general path reads those anywhere on a line) takes the general path.
_COUNT = r"[0-9]{1,9}"
_TENTHS = r"[0-9]{1,9}\.[0-9]"
_DATA_FORMS = (
    rf"worker {_COUNT} prefetched {_COUNT} batches \(queue {_COUNT}\)",
    rf"shard {_COUNT}/{_COUNT} opened: /[a-z0-9_./-]* \([0-9,]{{1,20}} rows\)",
    rf"collate: {_COUNT} seqs, max_len {_COUNT}, pad {_TENTHS}%",
    rf"worker {_COUNT} slow: {_TENTHS}s to fetch batch \(threshold {_TENTHS}s\)",
)
_DATA_LINE = "^" + _TS + r"\[data\] (?:" + "|".join(_DATA_FORMS) + ")$"
_DATA_FORBIDDEN = _SNAPSHOT_FORBIDDEN + r"|step|snap"
# Megatron-LM's timers line: `time (ms) | name: value | ...`, a value per timer it knows
# (`optimizer-inner-step` is not among them: the general path reads a step from it).
_MEGATRON_TIMERS = (
    "forward-backward|forward-compute|backward-compute|batch-generator|forward-recv"
    "|forward-send|backward-recv|backward-send|forward-send-forward-recv"
    "|forward-send-backward-recv|backward-send-forward-recv|backward-send-backward-recv"
    "|forward-backward-send-forward-backward-recv|layernorm-grads-all-reduce"
    "|embedding-grads-all-reduce|all-grads-sync|params-all-gather|optimizer-copy-to-main-grad"
    "|optimizer-unscale-and-check-inf|optimizer-clip-main-grad|optimizer-count-zeros"
    "|optimizer-copy-main-to-model-params|optimizer"
)

_CLIPPING_LINE = (
    "^" + _TS + r"\[train\] grad clipping active: norm " + _TENTHS + " > " + _TENTHS + "$"
)
_TIMERS_LINE = r"^time \(ms\)(?: \| (?:" + _MEGATRON_TIMERS + r"): [0-9]+\.[0-9]+)+$"


Cast = Callable[[pl.Expr], pl.Expr]


def _float(field: pl.Expr) -> pl.Expr:
    return field.cast(pl.Float64, strict=False)


def _integer(field: pl.Expr) -> pl.Expr:
    # As the general path: through Float64 (`3.2e+4`), so an overflowing count becomes null.
    return _float(field).cast(pl.Int64, strict=False)


def _bucket_list(field: pl.Expr) -> pl.Expr:
    """A `q_hsb=[...]` body as the general path reads it (`extract._q_hsb`). The shapes admit
    only digits and commas there, so there are no blanks to strip: a cast of the list does."""
    return field.str.split(",").cast(pl.List(pl.Int64), strict=False)


def _padded(cast: Cast) -> Cast:
    """`cast` of a field Megatron pads with blanks (`consumed samples:      5120`): the shapes
    admit only blanks around the number there, so stripping them leaves the text the general
    path's extractor captures."""
    return lambda field: cast(field.str.strip_chars(" "))


def _per_ms(field: pl.Expr) -> pl.Expr:
    """Iterations per second from milliseconds per iteration, computed as the general path's
    `throughput._throughput` does (a duration of 0 says nothing)."""
    seconds = _float(field.str.strip_chars(" ")) * 0.001
    return pl.when(seconds > 0).then(1.0 / seconds)


@dataclass(frozen=True, slots=True)
class Token:
    """Where a field lies among a line's blank-separated tokens, on every line of its shape:
    token `index` (from 0), less the `prefix` it starts with, up to the first `end` in it (to
    its end when `end` is empty)."""

    index: int
    prefix: str = ""
    end: str = ""


@dataclass(frozen=True, slots=True)
class Cut:
    """A field between two separators: the text after the first `after`, up to the first
    `before` that follows it (to the end of the line when `before` is empty), then `cast`.
    `token`, when set, says where the same text lies among the line's tokens (`cut_tokens`)."""

    after: str
    before: str
    cast: Cast
    token: Token | None = None

    def expr(self) -> pl.Expr:
        """The field's value, over the `text` of lines of its shape."""
        rest = pl.col("text").str.splitn(self.after, 2).struct.field("field_1")
        if self.before:
            rest = rest.str.splitn(self.before, 2).struct.field("field_0")
        return self.cast(rest)

    def token_expr(self, column: pl.Expr) -> pl.Expr:
        """The field's value from its token (`column`): what `expr` gives."""
        if self.token is None:
            raise ValueError("this cut has no token")
        field = column
        if self.token.prefix:
            field = field.str.slice(len(self.token.prefix))
        if self.token.end:
            field = field.str.splitn(self.token.end, 2).struct.field("field_0")
        return self.cast(field)


@dataclass(frozen=True, slots=True)
class Shape:
    """One line form: recognised by `literal` then `pattern` (anchored over the whole line);
    `cuts` give columns by position, `constants` fixed values; `general` lists columns the
    general expression computes on these rows (`telemetry`). Every other value column is null
    (false for flags) on the shape's rows."""

    name: str
    literal: str
    pattern: str
    cuts: Mapping[str, Cut]
    constants: Mapping[str, bool] = field(default_factory=dict)
    general: tuple[str, ...] = ()
    forbidden: str | None = None  # a line whose text after `literal` matches: general path
    # Derived columns counted by a literal on the shape's lines (`gpu_keys`: every key of a
    # snapshot pair follows a blank, so a key that starts with `gpu/` is a ` gpu/`).
    counts: Mapping[str, str] = field(default_factory=dict)
    # How many `separator`-separated tokens every line of `pattern` has (for a blank: single
    # blanks, none at either end), 0 when that varies: with it, the cuts that say their `token`
    # can be read by splitting the lines into those tokens (`cut_tokens`).
    tokens: int = 0
    separator: str = " "
    # Whether every line of `pattern` has `/` only in plain ` key=value` pairs at its end
    # (`gpu.log_rows.PLAIN_PAIRS_LINE`): the GPU rows of its lines are then read without that
    # line pattern's pass (`ParsedBlock.plain_pairs`).
    plain_pairs: bool = False

    def fits(self) -> pl.Expr:
        """Whether a line that holds `literal` has this shape (over `text`)."""
        text = pl.col("text")
        fits = text.str.contains(self.pattern)
        if self.forbidden is not None:
            rest = text.str.splitn(self.literal, 2).struct.field("field_1")
            fits &= ~rest.str.contains(self.forbidden)
        return fits

    def accepts(self) -> pl.Expr:
        """Whether a line has this shape (over `text`): `fits`, on any line."""
        return (pl.col("text").str.contains(self.literal, literal=True) & self.fits()).fill_null(
            False
        )


# Megatron-LM's iteration line (`training_log`): blank-padded values between ` | ` separators.
# Its non-finite losses are spelled as Python prints them or upper case (`lm loss: NAN`); every
# value that no rule reads as non-finite is a plain decimal here (others: the general path).
_M_NUM = r" +-?(?:[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|nan|inf|NAN|INF)"
_M_DEC = r" +[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_M_HEAD = (
    r"^ iteration +" + _INT + r"/ *[0-9]+ \| consumed samples: +[0-9]+ \| elapsed time per"
    r" iteration \(ms\):" + _M_DEC + r" \| learning rate:" + _M_DEC + r" \| global"
    r" batch size: +[0-9]+ \| "
)
_M_TAIL = r" \| number of skipped iterations: +[0-9]+ \| number of nan iterations: +[0-9]+ \|$"
# tokens between `|`s: iteration, consumed samples, elapsed time, learning rate, global batch
# size, [lm loss, loss scale, grad norm | loss scale], skipped, nan iterations, "" (the end)
_M_CUTS = {
    "step": Cut(" iteration ", "/", _padded(_integer), Token(0, " iteration", "/")),
    "lr": Cut("| learning rate:", " |", _padded(_float), Token(3, " learning rate:")),
    "throughput": Cut(
        "| elapsed time per iteration (ms):",
        " |",
        _per_ms,
        Token(2, " elapsed time per iteration (ms):"),
    ),
}


def _nan_iterations(index: int) -> Cut:
    return Cut(
        "| number of nan iterations:",
        " |",
        _padded(_integer),
        Token(index, " number of nan iterations:"),
    )


_SNAPSHOT = Shape(
    name="dflash-snapshot",
    literal="] snapshot step=",
    pattern="^" + _TS + r"\[wandb\] snapshot step=" + _INT + "(?:" + _PAIR + ")*$",
    cuts={"step": Cut("] snapshot step=", " ", _integer)},
    constants={"snapshot": True},
    general=("telemetry",),
    forbidden=_SNAPSHOT_FORBIDDEN,
    counts={"gpu_keys": " gpu/"},
    plain_pairs=True,
)
# The snapshot lines DFlash's script writes (`shared/spec/dflash-log.md`): keys of its own
# words only. Such a line is a `dflash-snapshot` line (its pattern is a narrowing of that
# shape's, and no `forbidden` word can follow its literal), cut the same way; it is a shape of
# its own so that a gate scan can see that none of the built-in gates' literals can appear on
# it (`rules.reach`) and pass over these lines: about 40 % of a realistic DFlash file's bytes.
# A snapshot with any other key is left to `dflash-snapshot`.
_SPEC_SNAPSHOT_WORDS = (
    "prof|queue|worker|cuda|gpu|target_fwd_ms|drafter_ms|ready_ratio|full_ratio|seqs|alloc_gb"
    "|reserved_gb|util|mem_gb|power_w|temp_c|[0-9]+"
)
SPEC_SNAPSHOT_PAIR = (
    r" (?:prof|queue|worker|cuda|gpu)(?:/(?:" + _SPEC_SNAPSHOT_WORDS + r"))+=-?[0-9]+(?:\.[0-9]+)?"
)
_SPEC_SNAPSHOT = replace(
    _SNAPSHOT,
    name="dflash-snapshot-spec",
    pattern="^" + _TS + r"\[wandb\] snapshot step=" + _INT + "(?:" + SPEC_SNAPSHOT_PAIR + ")*$",
    forbidden=None,
)


SHAPES: tuple[Shape, ...] = (
    Shape(
        name="dflash-step",
        literal="] step ",
        pattern=(
            "^"
            + _TS
            + r"\[train\] step "
            + _INT
            + r"/[0-9]+ \| loss "
            + _NUM
            + r" \| acc "
            + _NUM
            + r" \| lr "
            + _NUM
            + r" \| grad_norm "
            + _NUM
            + r" \| tok/s "
            + _INT
            + r" \| q_hs="
            + _INT
            + r" q_hsb=\[[0-9,]*\]$"
        ),
        # date, time, level, [train], step, N/M, |, loss, X, |, acc, X, |, lr, X, |, grad_norm,
        # X, |, tok/s, N, |, q_hs=N, q_hsb=[...]
        cuts={
            "step": Cut("] step ", "/", _integer, Token(5, end="/")),
            "loss": Cut(" | loss ", " ", _float, Token(8)),
            "lr": Cut(" | lr ", " ", _float, Token(14)),
            "grad_norm": Cut(" | grad_norm ", " ", _float, Token(17)),
            "throughput": Cut(" | tok/s ", " ", _float, Token(20)),
            "q_hs": Cut(" | q_hs=", " ", _integer, Token(22, "q_hs=")),
            "q_hsb": Cut(" q_hsb=[", "]", _bucket_list, Token(23, "q_hsb=[", "]")),
        },
        tokens=24,
    ),
    Shape(
        name="dflash-queue",
        literal="] q_hsb=[",
        pattern="^" + _TS + r"\[hsq\] q_hsb=\[[0-9,]*\] at q_hs=" + _INT + "$",
        # date, time, level, [hsq], q_hsb=[...], at, q_hs=N
        cuts={
            "q_hs": Cut(" at q_hs=", "", _integer, Token(6, "q_hs=")),
            "q_hsb": Cut("] q_hsb=[", "]", _bucket_list, Token(4, "q_hsb=[", "]")),
        },
        tokens=7,
    ),
    _SPEC_SNAPSHOT,
    _SNAPSHOT,
    Shape(
        name="hf-dict",
        literal="{'loss': ",
        pattern=(
            r"^\{'loss': " + _NUM + r", (?:'grad_norm': " + _NUM + r", )?"
            r"'learning_rate': " + _NUM + r", 'epoch': [0-9]+(?:\.[0-9]+)?\}$"
        ),
        cuts={
            "loss": Cut("{'loss': ", ",", _float),
            "grad_norm": Cut(", 'grad_norm': ", ",", _float),
            "lr": Cut(", 'learning_rate': ", ",", _float),
            "epoch": Cut(", 'epoch': ", "}", _float),
        },
    ),
    Shape(
        name="megatron-iteration",
        literal=" | lm loss:",
        pattern=_M_HEAD
        + "lm loss:"
        + _M_NUM
        + r" \| loss scale:"
        + _M_DEC
        + r" \| grad norm:"
        + _M_NUM
        + _M_TAIL,
        cuts={
            **_M_CUTS,
            "loss": Cut("| lm loss:", " |", _padded(_float), Token(5, " lm loss:")),
            "grad_norm": Cut("| grad norm:", " |", _padded(_float), Token(7, " grad norm:")),
            "nan_iterations": _nan_iterations(9),
        },
        tokens=11,
        separator="|",
    ),
    Shape(
        name="megatron-skipped",  # an iteration whose update was skipped: no loss, no norm
        literal=" | loss scale:",
        pattern=_M_HEAD + "loss scale:" + _M_DEC + _M_TAIL,
        cuts={**_M_CUTS, "nan_iterations": _nan_iterations(7)},
        tokens=9,
        separator="|",
    ),
    # Lines with no value at all (every value column null, flags false): found here only so
    # that they skip the general path's passes.
    Shape(
        name="dflash-data",
        literal=" [data] ",
        pattern=_DATA_LINE,
        cuts={},
        forbidden=_DATA_FORBIDDEN,
    ),
    Shape(
        name="dflash-clipping",
        literal="] grad clipping active: norm ",
        pattern=_CLIPPING_LINE,
        cuts={},
    ),
    Shape(name="megatron-timers", literal="time (ms) | ", pattern=_TIMERS_LINE, cuts={}),
)
"""The shapes the parser tries, in order (a line is taken by the first that accepts it)."""


PLAIN_PAIRS_SHAPES = [number for number, shape in enumerate(SHAPES) if shape.plain_pairs]
"""The shapes (indices in `SHAPES`) whose lines are plain-pairs lines (`Shape.plain_pairs`)."""


def cut_tokens(shape: Shape, text: pl.Series, names: Sequence[str]) -> pl.DataFrame:
    """The values of the cuts `names` (each with a `token`) of lines of `shape`, whose pattern
    gives every line `shape.tokens` tokens between its `separator`s: the tokens are read by polars' CSV
    reader, a blank as its separator and no quoting (one native pass, several times cheaper
    than cutting each field out of the line). Lines of a pattern hold no newline, quote or
    NUL and start with no compression magic or BOM, so the reader sees exactly their tokens."""
    tokens = {name: token for name in names if (token := shape.cuts[name].token) is not None}
    if len(tokens) < len(names):
        raise ValueError(f"not every cut of {', '.join(names)} has a token")
    data = text.str.join("\n").cast(pl.Binary).item()
    found = pl.read_csv(
        io.BytesIO(data),
        has_header=False,
        separator=shape.separator,
        quote_char=None,
        columns=sorted({token.index for token in tokens.values()}),
        schema={f"t{index}": pl.String for index in range(shape.tokens)},
        raise_if_empty=False,
    )
    return found.select(
        shape.cuts[name].token_expr(pl.col(f"t{token.index}")).alias(name)
        for name, token in tokens.items()
    )


def line_shape() -> pl.Expr:
    """Each line's shape (its index in `SHAPES`): the first whose literal the line holds and
    whose pattern fits it, null if none. `shaped.shape_of` as one expression, for a few
    hundred lines (`block.complete`): it runs every shape's pattern on every line, and saves the
    queries that pick the candidates' rows first. A live batch runs only the patterns of the
    shapes whose literal it holds (`framing._live_shapes`): each pattern takes one of polars'
    32 cached regexes per thread."""
    text = pl.col("text")
    return pl.coalesce(
        pl.when(text.str.contains(shape.literal, literal=True) & shape.fits()).then(
            pl.lit(number, dtype=pl.Int8)
        )
        for number, shape in enumerate(SHAPES)
    ).alias("_shape")
