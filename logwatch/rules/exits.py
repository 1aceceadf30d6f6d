"""How a log shows that the process behind it ended, for the `crash` rule (`rules.crash`):
the lines that decide a crash (torch elastic's `failed (exitcode: N)` and its Root Cause block,
`Signals.SIGKILL`, DeepSpeed's launcher `exits with return code = N`), the shell's words for a
signal (`Killed`, `Segmentation fault (core dumped)`, ...), an IDE's or SLURM's exit report, and
a shell prompt that ends a pasted terminal.

A pasted terminal that ends (`replay`) in a shell prompt (`user@host:~/x$`, `(venv) [u@h d]$`,
`root@3f2a9c:/workspace#`, `PS C:\\Users>`, `➜  proj git:(main) ✗`, a bare `$`, each maybe with a
command typed after it) right after training progress (a loss, a step, a progress bar, or a bar
the prompt is glued onto) says the process died without a word (SIGKILL: the OOM killer, a
`kill -9`, a lost node): the alert fires at the prompt. A prompt after the run's own end (a
finished bar, `N/N` steps, `train_runtime`, `Training completed`, `Done`, a checkpoint saved)
is no crash, nor one after any other line. Only the last few lines are read, at the end of the
input (`Needs.last_lines`): the gate stays as it is. Live, no prompt comes in a log file.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from logwatch.alerts import FIRING
from logwatch.rules.base import Transition

# The shell's own report of how a process ended: bash `./run.sh: line 5: 4242 Killed  python
# train.py` or a bare `Killed`, job control `[1]+  Killed ...`, zsh `zsh: killed  python ...`.
_SIGNALLED = (
    r"(?i:killed|segmentation fault|aborted|bus error|floating point exception"
    r"|illegal instruction|terminated)(?: \(core dumped\))?"
)
_SHELL_LEAD = r"(?:\S+: line \d+:\s+\d+\s+|\[\d+\][+-]?\s+(?:\d+\s+)?|zsh: )"
_SHELL = (
    rf"^(?:{_SHELL_LEAD}(?P<sig>{_SIGNALLED})(?:\s.*)?|(?P<sig2>{_SIGNALLED})\s*)$"
    # glued onto the progress bar it cut: `11/56 [00:02<00:08,  5.02it/s]Segmentation fault`
    rf"|(?:it/s|s/it)\](?P<sig3>{_SIGNALLED})\s*$"
)
# 128 + the signal: the exit code the shell gives a process that signal ended, and its name.
_SIGNALS = {
    "killed": (137, "SIGKILL: the OOM killer?"),
    "segmentation fault": (139, "SIGSEGV"),
    "aborted": (134, "SIGABRT"),
    "bus error": (135, "SIGBUS"),
    "floating point exception": (136, "SIGFPE"),
    "illegal instruction": (132, "SIGILL"),
    "terminated": (143, "SIGTERM"),
}
_CODES = {code: name for code, name in _SIGNALS.values()} | {130: "SIGINT"}
ROOT_CAUSE_RANK = r"^\s*rank\s*: (\d+) \(local_rank"
"""The rank line of torch elastic's Root Cause table (`rank      : 136 (local_rank: 0)`): a
global rank, and no exception."""
# (pattern, capture of the rank or None, capture of the exit code or None)
DECIDING: tuple[tuple[str, int | None, int | None], ...] = (
    (r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)", 2, 1),  # torch elastic agent
    (ROOT_CAUSE_RANK, 1, None),  # elastic Root Cause block
    (r"^\s*exitcode\s*: (-?\d+) \(pid", None, 1),
    (r"Signals\.SIGKILL|Signal 9 \(SIGKILL\) received", None, None),
    # DeepSpeed's launcher: its `{cmd} exits with return code = N` prints the command of the
    # LAST process it spawned on the node, whichever one failed (deepspeed/launcher/launch.py
    # `sigkill_handler`), so its `--local_rank=N` names no failing rank
    (r"exits with return code = (-?[1-9]\d*)", None, 1),
)
# Lines the shell, an IDE or SLURM print once the process has ended, over the line without its
# rank prefix; named groups: `sig` (the signal's words), `code` (the exit code), `rank`.
ENDED = (
    _SHELL,
    r"^Process finished with exit code (?P<code>-?[1-9]\d*)",  # PyCharm / IntelliJ
    # srun: error: node12: task 3: Killed / srun: error: node12: task 3: Exited with exit code 1
    r"^srun: error: \S+: tasks? (?P<rank>\d+)[^:]*: (?:Exited with exit code (?P<code>[1-9]\d*)|"
    rf"(?P<sig>{_SIGNALLED}))",
)
# The last lines the engine keeps for the end of the input: a prompt, the line before it and a
# few prompts (the user pressed enter) between them.
LAST_LINES = 8
_ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"
_TYPED = r"(?:\s.*)?$"  # a command typed after the prompt
_PROMPT = (
    r"^(?:\([^()\s]+\)\s*)?(?:"  # `(base) `, `(venv) `
    r"[\w.-]+@[\w.-]+:[^\s$#]*[$#]"  # bash: `user@host:~/dir$`, `root@3f2a9c:/workspace#`
    r"|\[[\w.-]+@[\w.-]+(?:\s[^\]]*)?\][$#]"  # RHEL / Fedora: `[user@host dir]$`
    r"|[\w.-]+@[\w.-]+\s+\S+\s+%"  # zsh's default: `user@host ~ %`
    r"|PS [A-Za-z]:\\[^>]*>"  # PowerShell: `PS C:\Users\x>`
    r"|➜\s+\S+(?:\s+git:\([^)]*\))?(?:\s+✗)?"  # oh-my-zsh: `➜  proj git:(main) ✗`
    r"|\$"  # a bare `$ `
    r")" + _TYPED
)
# a progress bar the prompt printed onto (the killed process left the bar without its newline)
_GLUED_PROMPT = r"(?:it/s|s/it)(?:,[^\]]*)?\](?P<prompt>\S.*)$"
# what a run that ended on its own prints last, on the line before the prompt
_FINISHED = (
    r"(?i)100%|train_runtime|\b(?:training|train|run)\b.{0,20}\b(?:complete|completed|finished"
    r"|done|ended)\b|^\W*(?:done|finished)\W*$|\bsav(?:ing|ed)\b.{0,40}\b(?:model|checkpoint)"
)
_DIED_SILENTLY = (
    "the shell prompt came back right after training progress, with no word from the run "
    "(SIGKILL: the OOM killer, a kill -9, a lost node?)"
)


def died_at_prompt(last: pl.DataFrame) -> Transition | None:
    """The alert at a prompt that ends the log right after training progress, else None (a
    loop over the few last lines)."""
    if last.is_empty():
        return None
    return prompt_end(prompt_rows(last))


def prompt_rows(last: pl.DataFrame) -> list[dict[str, Any]]:
    """What `prompt_end` reads of last lines (of one source or many, one query)."""
    return prompt_frame(last).to_dicts()


def prompt_frame(last: pl.DataFrame) -> pl.DataFrame:
    """`prompt_rows` as a frame: the columns `prompt_end` reads (`at_prompt` reads `_plain`)."""
    return last.select(
        "line",
        "ts",
        "text",
        "step",
        pl.col("text").str.replace_all(_ANSI, "").str.strip_chars().alias("_plain"),
        pl.any_horizontal(
            pl.col(name).is_not_null() for name in ("loss", "grad_norm", "throughput", "step")
        ).alias("_progress"),
    )


def at_prompt(plain: str) -> bool:
    """Whether a last line (its `_plain` text) is a prompt, or a progress bar glued to one:
    else `prompt_end` of the lines it ends is None."""
    glued = re.search(_GLUED_PROMPT, plain)
    if glued is not None and re.match(_PROMPT, glued["prompt"]):
        return True
    return re.match(_PROMPT, plain) is not None


def prompt_end(rows: list[dict[str, Any]]) -> Transition | None:
    """`died_at_prompt` of one source's last lines (`prompt_rows`; none: None)."""
    if not rows:
        return None
    prompt = rows[-1]
    glued = re.search(_GLUED_PROMPT, prompt["_plain"])
    if glued is not None and re.match(_PROMPT, glued["prompt"]):
        before = prompt  # the bar it cut is the last progress
    elif re.match(_PROMPT, prompt["_plain"]):
        earlier = [row for row in rows[:-1] if not re.match(_PROMPT, row["_plain"])]
        if not earlier:
            return None
        before = earlier[-1]
    else:
        return None
    if not before["_progress"] or _finished(before["_plain"]):
        return None
    fields = {"line": prompt["line"], "ts": prompt["ts"], "text": prompt["text"]}
    if before["step"] is not None:  # else the step the engine last saw
        fields["step"] = before["step"]
    labels = {"ended": _DIED_SILENTLY}
    return Transition(row=0, status=FIRING, value=None, labels=labels, fields=fields)


def _finished(text: str) -> bool:
    """Whether a line says the run ended on its own: its words, or a count at its total."""
    if re.search(_FINISHED, text):
        return True
    counts = re.findall(r"(\d+)\s*/\s*(\d+)", text)
    return any(int(done) == int(total) > 0 for done, total in counts)


def ended_by(message: str) -> tuple[str | None, int | None, str | None]:
    """A line saying the process ended: the rank it names, the exit code, and what ended it
    (`killed (SIGKILL: the OOM killer?)`, `exit code 139 (SIGSEGV)`)."""
    for pattern in ENDED:
        found = re.search(pattern, message)
        if found is None:
            continue
        groups = found.groupdict()
        words = groups.get("sig") or groups.get("sig2") or groups.get("sig3")
        if words:
            name = words.lower().removesuffix(" (core dumped)")
            code, signal = _SIGNALS[name]
            return groups.get("rank"), code, f"{name} ({signal})"
        code = int(groups["code"])
        signal_name = _CODES.get(code)
        return (
            groups.get("rank"),
            code,
            f"exit code {code}" + (f" ({signal_name})" if signal_name else ""),
        )
    return None, None, None


LOCAL_RANK_DECIDING = frozenset({DECIDING[0][0]})
"""The `DECIDING` patterns whose rank is a local one (torch elastic's `local_rank: N`): never
to be called a rank."""


def named_by_deciding(
    text: str, rank: str | None, code: int | None
) -> tuple[str | None, int | None, bool]:
    """The rank and the exit code the `DECIDING` patterns find in a line, where `rank` and
    `code` (what its `ENDED` pattern said) are not known yet, and whether that rank is a local
    one."""
    local = False
    for pattern, rank_group, code_group in DECIDING:
        found = pl.Series([text]).str.extract_groups(pattern)[0]
        if found is None or all(v is None for v in found.values()):
            continue
        if rank_group is not None and rank is None:
            rank = found[str(rank_group)]
            local = pattern in LOCAL_RANK_DECIDING
        if code_group is not None and code is None:
            code = int(found[str(code_group)])
    return rank, code, local
