"""Keys any trainer may print, found anywhere in a line: the training loss, gradient norm,
learning rate, step and epoch in their common spellings (Hugging Face Trainer dicts, Megatron's
`lm loss`, nanoGPT's `train loss`, torchtitan / mmengine `loss:`, DeepSpeed `steps:`, fairseq
`num_updates`, ESPnet...), a loss-like key no dialect names, NaNs said in words, and the words
that mark a line as something other than training (validation, best-so-far, a config)."""

from __future__ import annotations

import re

# A number as trainers print it, non-finite spellings included: nan, NaN, NAN, -nan, inf,
# -inf, Infinity, 6.7E+00, .5 (polars reads all of these as Float64).
NUMBER = (
    r"[-+]?(?:(?i:nan)|(?i:inf)(?i:inity)?|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
)
# Lightning / NeMo print non-finite floats as `nan.0`, `inf.0`, `-inf.`: the padding is dropped.
PADDING = r"(?:\.0*)?"
# What may follow a value: `nan-epoch=3` in a checkpoint file name is not a value.
END = r"""(?:[\s,|\]})';"]|$)"""
# Between key and value: quotes (Python dicts), `]` (`[Loss] nan`), `=`, `:`, ` is ` (`Loss is
# nan, stopping training`) or blanks; then maybe a printed tensor: `loss: tensor(nan, device=..)`.
SEP = r"""['"]?\]?\s*(?:[=:]\s*|\s+is\s+|\s+)['"\[]?(?:tensor\()?"""
# An ASCII word boundary: `nll_loss` or `loss_scale` never match `loss`, and a leading
# boundary keeps the regex engine's literal search fast (a character class there halves it).
BEFORE = r"(?-u:\b)"

# The training loss: HF `loss`, Megatron `lm loss`, nanoGPT `train loss`, Lightning
# `train_loss` / `train_loss_step`, torchtitan / mmengine `loss:`, generic `total_loss`. The word
# before it is captured: `best loss`, `val loss`, `min_loss` are not the training loss.
LOSS_PATTERN = (
    r"(?-u:\b)(?:([A-Za-z]+)[ _/])?(?i:loss)(?:_step)?" + SEP + "(" + NUMBER + ")" + PADDING + END
)
# Gradient norms, prefixed too (`global_grad_norm`, `learning/raw_grad_norm`); `max_grad_norm`
# and `clip_grad_norm` are the clipping threshold from a config, not a measurement. rlpyt-style
# tabular loggers (rlpyt, dreamer) add a network and a statistic of the iteration's norms:
# `grad_norm_model/Max  nan` (not `/Std`: a spread is not a norm).
GRAD_NORM_PATTERN = (
    r"(?-u:\b)((?:[A-Za-z]+[_/])*)(?i:grad[ _-]?norm|gradient[ _]norm|gnorm|total_norm)"
    r"(?:/total|_before_clip|_pre_clip|(?:_[a-z]+)?/(?:Average|Mean|Median|Min|Max))?"
    + SEP
    + "("
    + NUMBER
    + ")"
    + PADDING
    + END
)
NOT_TRAINING = r"(?i)^(?:best|min|max|minimum|maximum|lowest|val|vali|valid|validation|eval|evaluation|test|dev|target|expected)$"
NOT_MEASURED = r"(?i)(?:^|[_/])(?:max|min|clip|clipping|threshold)[_/]"
LR_KEY = r"(?i:lr|learning[ _]rate)"
# `steps` only as DeepSpeed's `steps: 60`: `Total optimization steps = 2,436`, `maximum steps =
# 500000` and `--steps=2000` are configuration, not progress; slurm's `STEP 123456.0` is a job step.
STEP_KEY = r"(?:(?:global_step|num_updates|[Ss]tep|[Ii]teration|[Ii]ter)\s*[=:]?|[Ss]teps:)"
STEP_VALUE = r"(\d+(?:\.\d+)?(?:[eE]\+?\d+)?)"
# OpenNMT ends its step with `;` (`Step 5650/50000;`), detectron2 with `!` (`iteration=2137!`).
STEP_PATTERN = BEFORE + STEP_KEY + r"\s*" + STEP_VALUE + r"(?:\s*/\s*\d+)?(?:[\s,|\]}):;!]|$)"
# Whole-line validation / evaluation reports carry no training loss or step (single keys such as
# `eval_loss` or `val loss` are told apart by the word before `loss`): Megatron's `validation
# loss at`, fairseq's `valid on '` and `| valid |`, mmengine's `Epoch(val)`.
VALIDATION = r"(?i:validation loss at|valid on '|validate step|epoch\(val\)|\| valid \|)"
# Any loss-like key (`avr_loss=nan`, `loss_net: nan`), for lines no known dialect matched;
# scale / validation / best-so-far keys are not losses.
GENERIC_LOSS = (
    r"(?i)(?-u:\b)[\w./-]*loss[\w./-]*['\"]?\s*[=:]\s*['\"]?(?:tensor\()?(?:"
    + NUMBER
    + r")"
    + PADDING
    + END
)
NOT_A_LOSS = (
    r"(?i)(?:^|[_/.\- ])(?:val|vali|valid|validation|eval|test|dev|best|min|max|scale|weight"
    r"|threshold|coef|coeff|ratio|target)(?:$|[_/.\- ])"
    # camelCase held-out keys: `ValLoss`, `valLoss`, `testLoss`
    r"|(?:^|[_/.\- ])(?i:val|vali|valid|validation|eval|test|dev)(?-i:Loss)"
)

# A line with a `loss` value holds one of these: every loss extractor reads a key holding
# `loss` (in any case: `(?i:loss)`), OpenNMT's `xent` or darknet's ` rate, `, and a shape gives
# the value the general path gives (`tests/test_parse_loss_lines.py` holds it to every dialect).
LOSS_LINES = r"(?i:loss)|xent| rate, "
# One literal pass selects the lines every rare loss extractor looks at: a non-finite
# spelling (`nan`, `NaN`, `-nan`, `inf`, `INF ` but not `INFO`), OpenNMT's `xent`, darknet's
# ` rate, `. Each extractor is exact on its own; this only keeps them off healthy lines.
RARE_LOSS_GATE = r"nan|NaN|NAN|inf|Inf|INF |INF,|INF\||INF$|xent| rate, "
# Every loss-keyed value on a line, for lines that say a non-finite word: sub-losses (`model_loss
# inf` after `image_loss 5.0`), table rows (`| model_loss/Average    nan`), keys in dashes or
# Markdown emphasis (`-----loss-----:  tensor(nan`, `**loss**: nan**`). The word before the key
# is captured (`val loss`, `best loss`).
ANY_LOSS = (
    r"(?:([A-Za-z]+) )?([\w./*-]*(?i:loss)[\w./*-]*)['\"]?\]?\s*(?:[=:]\s*|\s+)['\"\[]?(?:tensor\()?("
    + NUMBER
    + ")"
    + PADDING
    + r"""(?:[\s,|\]})';"*/]|$)"""
)
# NaNs reported in words, no value printed: detectron2's anomaly check, a trainer zeroing a bad
# loss; torch anomaly mode names the backward function (a gradient, so grad_norm).
LOSS_NAN_WORDS = r"Loss became infinite or NaN at iteration|\[NaN/Inf detected\] Loss\b"
GRAD_NAN_WORDS = r"Function '[^']+' returned (?i:nan) values in its \d+\w* output"

# Detection trainers print the total loss on the step's line and each component on a line of
# its own after it (tf-faster-rcnn ` >>> rpn_loss_cls: 0.000065`, Caffe `Train net output #1:
# loss_cls = 0.177461`): a finite component key (`loss` joined to another word, not a total) on
# a line with no step or epoch is not the training loss. A non-finite one still is.
COMPONENT_KEY = r"(?i)[a-z0-9][_./-]loss|loss[_./-][a-z0-9]"
TOTAL_KEY = r"(?i)(?:^|[^a-z])(?:total|overall|full|sum|avg|avr|average|mean|running)[_./-]loss|loss[_./-](?:total|overall|sum|all)\b"

# Epochs: `epoch=0/...` (DeepSpeed), `epoch 001:` (fairseq), `'epoch': 0.01` (HF), `Epoch 3:`
# (Lightning), `Epoch(train) [1][...]` (mmengine).
EPOCH_PATTERN = r"(?i)(?-u:\b)epoch(?:['\"]?\s*[=: ]\s*['\"]?|\(train\)\s*\[\s*)(\d+(?:\.\d+)?)"
# A step line's numeric pairs: `key=value`, `'key': value`, and DFlash / fairseq-valid `| key value`.
# Case-sensitive spellings of NaN/Inf: a (?i) number here triples the cost of this pass.
METRIC_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|nan|NaN|NAN|inf|Inf|INF)"
METRIC_PAIR = (
    r"(?:[A-Za-z_][\w./-]*['\"]?\s*[=:]\s*['\"]?|\|\s*[A-Za-z_][\w./-]*\s+)"
    + METRIC_NUMBER
    + r"(?:[\s,|\]})';\"]|$)"
)
# The keys the frame has columns of: not among a line's other metrics.
NOT_OTHER = ["step", "global_step", "iter", "iteration", "loss", "lr", "grad_norm", "q_hs"]
# A count as rates print it: `1,321` (torchtitan) is 1321.
COUNT = r"(\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)"


# Every way a value parses as non-finite (`NUMBER` and the NaN-in-words patterns): a NaN or Inf
# in some casing, or a number too large for a float, which needs an exponent of 3 digits or,
# with a smaller one, over 200 digits before the point (1.8e308 is the largest float). A value
# ends where the parser's patterns end one (`_END` and `ANY_LOSS`, after `.0` padding), so the
# `INF` of every `INFO` level is none; and no value follows Megatron's `number of ` (its
# `number of nan iterations:` count, on every iteration line). A line holding a non-finite
# value matches `NONFINITE_VALUE` (the nonfinite rules' gate; a prefilter for the parse).
_SPELLED_NONFINITE = r"(?i:nan|inf)(?i:inity)?(?:\.0*)?(?:[\s,|\]})';\"*/]|$)"


def _not_after(words: str) -> str:
    """A regex matching where the text before does not end with `words` (a look-behind the
    regex engine lacks: the line's start, or one of the `words`' endings broken)."""
    ends = ["^", f"[^{re.escape(words[-1])}]"]
    for size in range(1, len(words)):
        ends.append(f"(?:^|[^{re.escape(words[-size - 1])}]){re.escape(words[-size:])}")
    return "(?:" + "|".join(ends) + ")"


NONFINITE_VALUE = _not_after("number of ") + _SPELLED_NONFINITE + r"|[eE]\+?\d{3}|\d{200}"
SPELLED_NONFINITE = _SPELLED_NONFINITE  # (its first branch, without the look-behind)
