"""Secret masking: which shapes are masked, what is left alone, and that it stays linear."""

from __future__ import annotations

import json
import subprocess
import sys
from enum import StrEnum

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch import redact as redact_module
from logwatch.alerts import event_from_json
from logwatch.cli import cli
from logwatch.engine import run_id
from logwatch.engine.state import masked
from logwatch.redact import MASK, redact, register_secret
from logwatch.sinks.slack import messages
from tests.support.properties import examples

# A Python snippet run in a child process, so a regex that backtracks for hours can be killed.
_HANG_CHECK = """
from logwatch.redact import redact
line = "ab-" * 350_000 + "x WANDB_API_KEY=abc123def456 loss=nan"
out = redact(line)
assert out.endswith("WANDB_API_KEY=[REDACTED] loss=nan"), out[-80:]
assert out.startswith("ab-ab-")
for unit in ("eyJ-", "://a:", "bearer ", "x_token ", "aws_secret_access_key="):
    redact(unit * (1_000_000 // len(unit)))
print("ok")
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("WANDB_API_KEY=0123456789abcdef0123 x", f"WANDB_API_KEY={MASK} x"),
        ("hf_token: hf_abcdefghijklmnopqrstuvwxyz0123456789", f"hf_token: {MASK}"),
        ('"openai-api-key": "sk1abcdefgh23"', f'"openai-api-key": "{MASK}"'),
        ("--password=hunter2hunter2", f"--password={MASK}"),
        ("my.db_password = s3cretpass99", f"my.db_password = {MASK}"),
        ("pad_token: 50256", "pad_token: 50256"),
        ("eos_token_id: 50256", "eos_token_id: 50256"),
        ("token: auth.test", "token: auth.test"),
        ("mytoken=abc123def456", "mytoken=abc123def456"),
        ("SLACK_BOT_TOKEN=xoxb-1111-2222-abcdefSECRET", f"SLACK_BOT_TOKEN={MASK}"),
        ("key AKIAABCDEFGHIJKLMNOP end", f"key {MASK} end"),
    ],
)
def test_keyed_and_shaped_secrets_mask_as_before(text: str, expected: str) -> None:
    """The masking rules that existed before the linear rewrite give the same output."""
    assert redact(text) == expected


def test_long_hyphenated_line_is_masked_without_hanging() -> None:
    """1 MB hyphenated (and other repetitive) lines are masked well inside 20 s (was hours)."""
    done = subprocess.run(
        [sys.executable, "-c", _HANG_CHECK], capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "ok"


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GH_CLASSIC = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GH_FINE = "github_pat_11ABCDEFG0123456789abc_" + "Zy9" * 19 + "XY"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkEifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"aws_secret_access_key = {AWS_SECRET}", f"aws_secret_access_key = {MASK}"),
        (f"env AWS_SECRET_ACCESS_KEY={AWS_SECRET} x", f"env AWS_SECRET_ACCESS_KEY={MASK} x"),
        (f"push {GH_CLASSIC} done", f"push {MASK} done"),
        ("gho_" + "a1" * 18, MASK),
        ("ghs_" + "B2" * 18 + " ghu_" + "c3" * 18 + " ghr_" + "D4" * 18, f"{MASK} {MASK} {MASK}"),
        (f"GH={GH_FINE}", f"GH={MASK}"),
        (f"Authorization: Bearer {JWT}", f"Authorization: Bearer {MASK}"),
        ("authorization: bearer 0a1b2c3d4e5f6a7b8c9d", f"authorization: bearer {MASK}"),
        (f"got token {JWT}.", f"got token {MASK}."),
        (
            "db postgres://trainer:hunter2@db.internal:5432/runs ok",
            f"db postgres://trainer:{MASK}@db.internal:5432/runs ok",
        ),
        (
            "git clone https://oauth2:glpat-abc123@github.com/org/repo.git",
            f"git clone https://oauth2:{MASK}@github.com/org/repo.git",
        ),
        ("redis://:s3cr3t@cache:6379/0", f"redis://:{MASK}@cache:6379/0"),
        (
            "http://host:8080/path and user@example.com",
            "http://host:8080/path and user@example.com",
        ),
        ("Bearer of bad news", "Bearer of bad news"),
    ],
)
def test_cloud_tokens_jwts_and_url_passwords_are_masked(text: str, expected: str) -> None:
    """AWS secret keys, GitHub tokens, Bearer/bare JWTs and URL passwords are masked."""
    assert redact(text) == expected


def test_new_secret_shapes_never_reach_replay_output_or_slack(write_log) -> None:  # type: ignore[no-untyped-def]
    """Replay (text and JSONL) and the Slack message built from its events carry none of them."""
    secrets = [AWS_SECRET, GH_CLASSIC, GH_FINE, JWT, "hunter2pw", "glpat-abc123"]
    line = (
        f"env AWS_SECRET_ACCESS_KEY={AWS_SECRET} GH={GH_CLASSIC} {GH_FINE} "
        f"Authorization: Bearer {JWT} postgres://u:hunter2pw@db/x "
        "https://oauth2:glpat-abc123@github.com/o/r.git step=5 loss=nan\n"
    )
    path = write_log(line.encode())
    runner = CliRunner()
    text = runner.invoke(cli, ["replay", path])
    jsonl = runner.invoke(cli, ["replay", path, "--format", "jsonl"])
    assert "nan-loss" in text.stdout and jsonl.exit_code == 0
    events = [event_from_json(json.loads(raw)) for raw in jsonl.stdout.splitlines()]
    firing = [e for e in events if e.status == "firing"]
    assert firing and MASK in firing[0].text
    slack_text, blocks = messages.firing_message(firing[0].severity, firing)
    posted = slack_text + json.dumps(blocks, ensure_ascii=False)
    for output in (text.stdout, text.stderr, jsonl.stdout, jsonl.stderr, posted):
        assert not [s for s in secrets if s in output]


@pytest.mark.parametrize(
    ("announced", "secret", "run"),
    [
        (GH_CLASSIC, GH_CLASSIC, MASK),  # a token as the run id
        ("xoxb-1234-5678-AbCdEfGhIjKl", "xoxb-1234-5678-AbCdEfGhIjKl", MASK),
        ("s3://ci:hunter2pw@bucket/exp-7", "hunter2pw", f"s3://ci:{MASK}@bucket/exp-7"),
    ],
)
def test_run_ids_are_redacted_like_log_text(
    write_log, announced: str, secret: str, run: str
) -> None:  # type: ignore[no-untyped-def]
    """A `run start:` line's run id is masked like the line: not in the alert's `run`, JSONL,
    the text output or the Slack header and fallback text built from the events."""
    path = write_log(
        f"2026-11-28 14:00:00,000 INFO [train] run start: run_id={announced} pid=1 gpus=8\n"
        "2026-11-28 14:00:01,000 INFO [train] step 1/10 | loss nan | grad_norm 1.0\n".encode()
    )
    runner = CliRunner()
    text = runner.invoke(cli, ["replay", path])
    jsonl = runner.invoke(cli, ["replay", path, "--format", "jsonl"])
    (event,) = [event_from_json(json.loads(raw)) for raw in jsonl.stdout.splitlines()]
    assert event.rule == "nan-loss" and event.run == run
    slack_text, blocks = messages.firing_message(event.severity, [event], host="gpu-node-07")
    assert f"run {run} (train.log)" in blocks[0]["text"]["text"]
    posted = slack_text + json.dumps(blocks, ensure_ascii=False)
    for output in (text.stdout, text.stderr, jsonl.stdout, jsonl.stderr, posted):
        assert secret not in output


def test_plain_run_ids_are_kept() -> None:
    """Run ids that are no secret pass unchanged, even beside a secret on the same line."""
    line = f"run start: run_id=llama-70b.lr3e-4 pid=1 token={GH_CLASSIC}"
    assert run_id(line) == "llama-70b.lr3e-4"
    assert run_id("run start: run_name: exp-3/seed@1") == "exp-3/seed@1"


def test_run_id_that_is_the_head_of_a_longer_secret_is_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A registered secret reaching past the id's characters (`=`) masks the id whole, not
    leaving its head."""
    monkeypatch.setattr(redact_module, "_secrets", set())  # registered for this test only
    register_secret("Q7r8s9t0u1v2=pad")
    assert run_id("run start: run_id=Q7r8s9t0u1v2=pad pid=1") == MASK


def test_masked_state_masks_every_string_and_keeps_the_rest() -> None:
    """`masked` (what the engine's rule states go through to a checkpoint) masks a token in a
    nested dict, in a list and in a str subclass, and gives numbers, flags and nulls back as they
    were, whatever their depth."""

    class Kind(StrEnum):
        TOKEN = f"token {GH_CLASSIC}"

    state = {
        "keys": {"0": {"since": 1.5, "n": 3, "firing": False, "value": None, "line": GH_CLASSIC}},
        "kept": [1, 2.5, True, None, f"Bearer {GH_CLASSIC}", [GH_CLASSIC, 4]],
        "kind": Kind.TOKEN,
    }
    out = masked(state)
    assert GH_CLASSIC not in json.dumps(out)
    assert out["keys"]["0"] == {"since": 1.5, "n": 3, "firing": False, "value": None, "line": MASK}
    assert out["kept"][:4] == [1, 2.5, True, None]
    assert out["kept"][5] == [MASK, 4]


_PIECES = [
    *("xoxb-", "xapp-1-", "://", "hooks.slack.com/", "/services/T0A/B0B/", "hf_", "sk-"),
    *("AKIA", "ghp_", "gho_", "github_pat_", "eyJ", ".eyJ", "aws_", "AWS_SECRET_ACCESS_KEY"),
    *("Bearer ", "bEaReR ", "api_key", "API-KEY", "Token", "secret", "PassWd", "password"),
    *("=", ": ", "'", '"', "@", "/", "-", "_", " ", "x", "loss 2.1", "tok/s 5", "gpu/0/util=9"),
    *("abcdefghij", "0123456789", "A1b2C3d4E5f6G7h8I9j0", "\u017fecret", "\u212aey", "é"),
    *(AWS_SECRET, GH_CLASSIC, GH_FINE, JWT, "AKIAABCDEFGHIJKLMNOP", "ghr_" + "D4" * 18),
    *("sk-abcdefghij0123456789", "hf_" + "a1" * 16, "xoxb-1111-2222-abc", "xapp-1-A0B1"),
    *("PASSWD=hunter2hunter2", "api-key: 0a1b2c3d4e", "x_token=abc123def456", "https://u:pw@h"),
    *("bearer 0a1b2c3d4e5f6a7b8c9d", "aws_secret_access_key=" + AWS_SECRET),
    "https://hooks.slack.com/services/T0A/B0B/c0C",
]


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12))
def test_the_word_check_skips_only_text_no_pattern_would_change(pieces: list[str]) -> None:
    """Lines made of the patterns' words, near misses and tokens, in any case, ASCII or not:
    `redact` (which skips the patterns when none of their words is in an ASCII line) gives
    what running every pattern gives."""
    text = "".join(pieces)
    assert redact(text) == redact_module._shapes(text)


def test_each_word_and_token_alone_or_after_another_is_masked_as_every_pattern_masks_it() -> None:
    """Each piece alone, between spaces, and after each other piece: `redact` gives what
    running every pattern gives (a word left out of the check shows here at once)."""
    for piece in _PIECES:
        for text in [piece, f" {piece} ", *(other + piece for other in _PIECES)]:
            assert redact(text) == redact_module._shapes(text), text
