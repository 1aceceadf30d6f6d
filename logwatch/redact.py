"""Secrets never reach output: one redaction helper for every error, log line and message.

Tokens and webhook URLs are registered when the config is read; well-known shapes (Slack, Hugging
Face, OpenAI, AWS and GitHub tokens, Slack webhook URLs, JWTs, Bearer tokens, passwords in URLs,
`key=value` credentials) are redacted even when nobody registered them.
"""

from __future__ import annotations

import logging
import re
import shutil
import sys
import textwrap
import threading
from typing import TextIO

MASK = "[REDACTED]"
_PATTERNS = (
    re.compile(r"xox[abeoprs]-[A-Za-z0-9-]+"),
    re.compile(r"xapp-[A-Za-z0-9-]+"),
    re.compile(r"https?://hooks\.slack(?:-gov)?\.com/\S+"),
    re.compile(r"/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+"),
    # Training logs dump environments and configs: Hugging Face, OpenAI, AWS key shapes.
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    # GitHub classic (ghp_, gho_, ghs_, ghu_, ghr_) and fine-grained tokens; bare JWTs.
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}+"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}+"),
    # One start per run of token characters (not one per `eyJ` in it): a scan from each would
    # be quadratic on `eyJ-eyJ-...`.
    re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]++\.eyJ[A-Za-z0-9_-]++\.[A-Za-z0-9_-]*+"),
)
# Group 1 stays, the rest of the match goes. Every repetition is possessive or bounded by the
# next `/`, so none of them can backtrack across a long line (see `_KEYED`).
_PREFIXED = (
    # An AWS secret access key is 40 base64-ish characters, masked whatever its letter mix.
    re.compile(
        r"""(?i)(aws_?secret_?access_?key['"]?\s*+[=:]\s*+['"]?)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"""
    ),
    re.compile(r"(?i)(\bbearer\s++)[A-Za-z0-9._~+/-]{16,}+=*+"),
    # `scheme://user:password@host`: scheme, user and host stay. Matched from `://`, not from
    # the scheme, so a long `a-b-c` run is never scanned once per start.
    re.compile(r"(://[^\s:/@]*+:)[^\s/]+(?=@)"),
)
# `WANDB_API_KEY=...`, `"hf_token": "..."`, `password: ...`: the value goes, the key stays.
# The key word is found where it starts a word or follows `<letter or digit>_` / `-`, never by
# matching its `wandb_` / `my-db-` prefix: a `(?:[a-z0-9]+[_-])*` prefix backtracked over every
# segment of a long hyphenated line from every start (quadratic; 43 s on a 60 kB line). The
# prefix is kept as unmatched text, so the output is the same; every repetition is possessive.
_KEYED = re.compile(
    r"""(?i)(?:(?<!\w)|(?<=[a-z0-9][_-]))"""
    r"""(api[_-]?key|token|secret|password|passwd)\b"""
    r"""(['"]?\s*+[=:]\s*+['"]?)([^\s'",}]{8,}+)"""
)


def _mask_keyed(match: re.Match[str]) -> str:
    """Mask a keyed value that looks like a credential (letters and digits mixed), keep others
    (`pad_token: 50256`, `token: auth.test`)."""
    value = match.group(3)
    if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
        return match.group(1) + match.group(2) + MASK
    return match.group(0)


_secrets: set[str] = set()
_lock = threading.Lock()


def register_secret(secret: str) -> None:
    """Redact this exact string (and its URL path, for webhook URLs) from now on."""
    value = secret.strip()
    if len(value) < 4:
        return
    with _lock:
        _secrets.add(value)
        if "://" in value:
            path = value.split("://", 1)[1].partition("/")[2]
            if len(path) >= 8:
                _secrets.add("/" + path)


def redact(text: str) -> str:
    """The text with every registered secret and every token-shaped string masked."""
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if text.isascii() and not _may_hold_token(text):
        return text  # what every pattern below would leave as it is, found in a few scans
    return _shapes(text)


def _shapes(text: str) -> str:
    """The text with every token-shaped string masked (the patterns, one after another)."""
    for pattern in _PATTERNS:
        text = pattern.sub(MASK, text)
    for pattern in _PREFIXED:
        text = pattern.sub(rf"\g<1>{MASK}", text)
    return _KEYED.sub(_mask_keyed, text)


# Every match of a pattern above holds one of these words: as written (`_CASED`), or in any
# case (`_FOLDED`, the `(?i)` patterns' words, looked for in the lowered text; exact on ASCII
# text only: under `(?i)` a few other letters match too: U+017F an `s`, U+212A a `k`).
_CASED = (
    *("xox", "xapp-", "://", "/services/T", "hf_", "sk-", "AKIA", "github_pat_", "eyJ"),
    *("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
)
_FOLDED = ("bearer", "api", "token", "secret", "passw")  # `aws_secret_access_key`: "secret"


def _may_hold_token(text: str) -> bool:
    """Whether a pattern of `_shapes` could match in this ASCII text: a log line without any of
    their words (most of a training log) costs a few substring scans instead of 14 regex scans."""
    if any(word in text for word in _CASED):
        return True
    lowered = text.lower()
    return any(word in lowered for word in _FOLDED)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message (ours and slack-sdk's alike)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = visible(redact(message))
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, ()
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


# C0 controls but tab, DEL, the C1 block (U+0080-U+009F: 8-bit CSI, OSC, DCS) and the bidi
# overrides/isolates that reorder what a terminal shows.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """Text from a log or a file name made safe for a terminal: every non-printing control as
    `\\xNN` (`\\uNNNN` for bidi controls), so ESC, BEL, BS, CR, LF and C1 never reach it raw.

    Tabs stay. Line breaks in output are only the ones logwatch writes itself (the `fix:` line).
    """
    return _CONTROL.sub(_escaped, text)


def stderr_line(message: str) -> None:
    """Say one line on stderr, redacted and with controls made visible (file names in it are
    the user's); the default `report` of the background workers."""
    print(wrapped_note(visible(redact(message)), sys.stderr), file=sys.stderr, flush=True)


NOTE_PREFIX = "logwatch: "


def wrapped_note(line: str, stream: TextIO) -> str:
    """A stderr note as it is shown: on a terminal, wrapped at word boundaries to its width
    (read at each note: the window may be resized), continuation lines indented under the text
    after `logwatch: `; words (paths, URLs) are never split. Elsewhere (a pipe, a log file) the
    one line as it is, for grep."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real stream
        terminal = False
    if not terminal:
        return line
    width = shutil.get_terminal_size().columns
    if len(line) <= width:
        return line
    indent = " " * len(NOTE_PREFIX) if line.startswith(NOTE_PREFIX) else "  "
    rows = textwrap.wrap(
        line,
        width,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return "\n".join(rows)


class LibraryDebugFilter(logging.Filter):
    """Other libraries' records (slack_sdk's `ERROR ... <html>...` at every failed request) as
    DEBUG: shown with --verbose only. logwatch says what failed in its own words, once."""

    LIBRARIES = ("slack_sdk",)

    def __init__(self, *, verbose: bool) -> None:
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.LIBRARIES):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return self.verbose


def install_log_handler(stream: TextIO, *, verbose: bool) -> logging.Handler:
    """Send logging to a stream through the redacting filter; slack_sdk's records go there as
    DEBUG (with `verbose` only)."""
    handler: logging.Handler = logging.StreamHandler(stream)
    handler.addFilter(LibraryDebugFilter(verbose=verbose))
    handler.addFilter(RedactingFilter())
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    return handler


def remove_log_handler(handler: logging.Handler) -> None:
    """Undo `install_log_handler`."""
    logging.getLogger().removeHandler(handler)
    handler.close()
