"""The replay command as a user runs it: real files, exact output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.rules.loader import builtin_rules_dir

NAN_LOG = (
    b"2026-11-28 14:09:05,117 INFO [train] step 1402/200000 | loss 2.3 | grad_norm 1.1\n"
    b"2026-11-28 14:09:09,201 INFO [train] step 1403/200000 | loss nan | grad_norm 1.2\n"
    b"2026-11-28 14:09:13,300 INFO [train] step 1404/200000 | loss 2.2 | grad_norm 1.0\n"
)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_timeline_names_time_rule_line_and_fix(write_log) -> None:  # type: ignore[no-untyped-def]
    """The text timeline shows time, severity, rule, file:line, the summary and the fix."""
    path = write_log(NAN_LOG)
    code, out, _ = run("replay", path)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (
        f"2026-11-28 14:09:09  CRIT  nan-loss             {path}:2  loss is nan at step 1403 (line 2)"
    )
    assert lines[1].strip().startswith("fix: Stop or roll back")
    assert lines[2].startswith(
        f"2026-11-28 14:09:13  OK    nan-loss             {path}:3  loss is finite again (2.2)"
    )
    assert lines[-3] == (
        f"{path}: 3 lines, 3 step lines (1402..1404), last loss 2.2; alerts: nan-loss x1"
    )
    assert lines[-1] == "  still firing: none"


def test_jsonl_is_strict_json_with_contract_fields(write_log) -> None:  # type: ignore[no-untyped-def]
    """--format jsonl prints only events, strict JSON, non-finite values as strings."""
    path = write_log(NAN_LOG)
    code, out, _ = run("replay", path, "--format", "jsonl")
    assert code == 0
    events = [json.loads(line, parse_constant=pytest.fail) for line in out.splitlines()]
    assert [(e["rule"], e["status"], e["line"], e["step"], e["value"]) for e in events] == [
        ("nan-loss", "firing", 2, 1403, "nan"),
        ("nan-loss", "resolved", 3, 1404, 2.2),
    ]
    first = events[0]
    assert first["severity"] == "critical" and first["source"] == path
    assert first["ts"] == "2026-11-28T14:09:09.201000" and first["labels"] == {}


def test_fail_on_sets_exit_code(write_log) -> None:  # type: ignore[no-untyped-def]
    """--fail-on exits 1 only when an alert at that severity or worse fired."""
    path = write_log(NAN_LOG)
    assert run("replay", path, "--fail-on", "critical")[0] == 1
    assert run("replay", path, "--fail-on", "warning")[0] == 1
    healthy = write_log(b"step 1 | loss 2.0\n", name="ok.log")
    assert run("replay", healthy, "--fail-on", "info")[0] == 0


def test_missing_file_is_one_line_exit_2(tmp_path: Path) -> None:
    """A missing file gives exit 2 and one line naming it and the fix."""
    code, out, err = run("replay", str(tmp_path / "nope.log"))
    assert code == 2 and out == ""
    assert (
        err == f"Error: {tmp_path / 'nope.log'}: no such file (check the path, or quote a glob)\n"
    )


def test_empty_directory_is_one_line_naming_it(tmp_path: Path) -> None:
    """A folder with no file in it (a folder is read recursively) is exit 2, one line."""
    code, _, err = run("replay", str(tmp_path))
    assert code == 2 and err == f"Error: {tmp_path}: the folder holds no file\n"


def test_binary_file_is_read_without_crash(write_log) -> None:  # type: ignore[no-untyped-def]
    """Random bytes with NULs and invalid UTF-8 replay cleanly, and a NaN after them is seen."""
    junk = bytes((i * 37 + 11) % 256 for i in range(200_000))
    path = write_log(junk + b"\nstep 9 | loss nan\n")
    code, out, _ = run("replay", path, "--format", "jsonl")
    assert code == 0
    assert [json.loads(line)["rule"] for line in out.splitlines()] == ["nan-loss"]


def test_truncated_file_last_line_counts(write_log) -> None:  # type: ignore[no-untyped-def]
    """A file cut mid-line (no final newline) still has its last line evaluated."""
    path = write_log(b"step 1 | loss 2.0\nstep 2 | loss na")
    assert run("replay", path, "--format", "jsonl")[1] == ""
    path = write_log(b"step 1 | loss 2.0\nstep 2 | loss nan", name="cut.log")
    out = run("replay", path, "--format", "jsonl")[1]
    assert json.loads(out)["line"] == 2


BROKEN_PACKS = [
    (
        '[[rule]]\nid = "x"\ntype = "treshold"\nseverity = "warning"\nsummary = "s"\n',
        3,
        "unknown rule type 'treshold' (expected one of: classify, crash, drop, gpu-hold, gpu-rise, halving, match, nonfinite, spike, stalled, streak)",
    ),
    (
        '[[rule]]\nid = "x"\ntype = "match"\nseverity = "warning"\nsummary = "s"\npattern = "(unclosed"\n',
        1,
        "rule 'x': pattern '(unclosed' is not a valid regex",
    ),
    (
        '[[rule]]\nid = "x"\ntype = "nonfinite"\nseverity = "loud"\nsummary = "s"\ncolumn = "loss"\n',
        1,
        "unknown severity 'loud'",
    ),
    (
        '[[rule]]\nid = "x"\ntype = "nonfinite"\nseverity = "warning"\nsummary = "{nope}"\ncolumn = "loss"\n',
        5,
        "unknown placeholder {nope} in summary",
    ),
    (
        '[[rule]]\nid = "x"\ntype = "streak"\nseverity = "warning"\nsummary = "s"\napplies = "snapshot"\n'
        'condition = "gpu_keyz = 0"\ncount = 3\n',
        1,
        "expression refers to something the frame lacks",
    ),
    (
        '[[rule]]\nid = "x"\ntype = "nonfinite"\nseverity = "warning"\nsummary = "s"\ncolumn = "loss"\ncolor = 1\n',
        7,
        "unknown key 'color' for a nonfinite rule",
    ),
    ('[[rule]\nid = "x"\n', 1, "invalid TOML"),
    (
        '[[rule]]\nid = "x"\ntype = "nonfinite"\nseverity = "warning"\nsummary = "loss {value:.3g}"\n'
        'column = "loss"\n',
        5,
        "{value:.3g} in summary: placeholders take no format or conversion",
    ),
    (
        '[[rule]]\nid = "x"\ntype = "streak"\nseverity = "warning"\nsummary = "s"\napplies = "snapshot"\n'
        'condition = "gpu_keys = 0"\ncount = "3"\n',
        8,
        "'count' must be of type int",
    ),
    (
        '[[rule]]\nid = "x"\ntype = "nonfinite"\nseverity = "warning"\n'
        'summary = "loss {value}[? at step {step}"\ncolumn = "loss"\n',
        5,
        "an optional clause '[?' in summary 'loss {value}[? at step {step}' is not closed by ']'",
    ),
]


@pytest.mark.parametrize(("pack", "line", "message"), BROKEN_PACKS)
def test_broken_rule_pack_is_file_line_message(
    write_log, tmp_path: Path, pack: str, line: int, message: str
) -> None:  # type: ignore[no-untyped-def]
    """A broken rule pack gives exit 2 and `Error: file:line: what is wrong` on one line."""
    rules = tmp_path / "bad.toml"
    rules.write_text(pack)
    code, out, err = run("replay", write_log(NAN_LOG), "--rules", str(rules))
    assert code == 2 and out == ""
    assert err.startswith(f"Error: {rules}:{line}: ") and message in err
    assert err.count("\n") == 1


def test_user_rule_pack_adds_and_overrides(write_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """--rules adds a pack; a rule with a built-in id and `replace = true` replaces the built-in
    one, and stderr names it."""
    pack = tmp_path / "mine.toml"
    pack.write_text(
        '[[rule]]\nid = "grad-spike-word"\ntype = "match"\nseverity = "info"\n'
        'summary = "spike (line {line})"\npattern = "grad_norm 1\\\\.2"\n'
        '[[rule]]\nid = "nan-loss"\ntype = "nonfinite"\nseverity = "warning"\n'
        'summary = "my nan {value}"\ncolumn = "loss"\nreplace = true\n'
    )
    code, out, err = run("replay", write_log(NAN_LOG), "--rules", str(pack), "--format", "jsonl")
    assert code == 0
    assert (
        err
        == f"logwatch: {pack}:7: rule 'nan-loss' replaces the built-in rule at {builtin_rules_dir() / 'training.toml'}:6\n"
    )
    got = [(e["rule"], e["severity"], e["summary"]) for e in map(json.loads, out.splitlines())]
    assert got[:2] == [
        ("nan-loss", "warning", "my nan nan"),
        ("grad-spike-word", "info", "spike (line 2)"),
    ]


def test_bad_option_exits_2() -> None:
    """An unknown --format is a usage error, exit 2."""
    assert run("replay", "x.log", "--format", "xml")[0] == 2


def test_several_files_each_summarized(write_log) -> None:  # type: ignore[no-untyped-def]
    """Each file is its own source with its own summary line."""
    a = write_log(NAN_LOG, name="a.log")
    b = write_log(b"q_hsb=[0,0,0,0,0,31] at q_hs=31\n" * 6, name="b.log")
    code, out, _ = run("replay", a, b)
    assert code == 0
    summary = [
        line
        for line in out.splitlines()
        if line.startswith((a + ":", b + ":")) and "lines," in line
    ]
    assert (
        summary[1]
        == f"{b}: 6 lines, no step lines, no loss, q_hs 31..31; alerts: bucket-starvation x1"
    )


def test_gzip_log_is_read_transparently(tmp_path: Path) -> None:
    """A rotated, gzip-compressed log replays like the plain file, line numbers included."""
    import gzip

    path = tmp_path / "train.log.1.gz"
    path.write_bytes(gzip.compress(NAN_LOG))
    code, out, _ = run("replay", str(path), "--format", "jsonl")
    assert code == 0
    assert [(e["line"], e["status"]) for e in map(json.loads, out.splitlines())] == [
        (2, "firing"),
        (3, "resolved"),
    ]


def test_cut_off_gzip_reports_what_it_read_then_fails(tmp_path: Path) -> None:
    """A truncated .gz: the alerts before the damage are printed, then one line and exit 2."""
    import gzip

    body = NAN_LOG + b"".join(f"step {i} | loss 2.0\n".encode() for i in range(20000))
    data = gzip.compress(body)
    path = tmp_path / "cut.log.gz"
    path.write_bytes(data[: len(data) // 2])
    code, out, err = run("replay", str(path), "--format", "jsonl")
    assert code == 2
    assert [json.loads(line)["line"] for line in out.splitlines()][:2] == [2, 3]
    assert err.startswith(f"Error: {path}: damaged compressed data (") and err.count("\n") == 1
    assert "the lines before the damage were checked" in err


def test_standard_input_is_a_source() -> None:
    """`logwatch replay -` reads standard input (e.g. `kubectl logs pod | logwatch replay -`)."""
    result = CliRunner().invoke(cli, ["replay", "-", "--format", "jsonl"], input=NAN_LOG)
    assert result.exit_code == 0
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["source"], e["line"], e["status"]) for e in events] == [
        ("-", 2, "firing"),
        ("-", 3, "resolved"),
    ]


def test_secrets_in_log_lines_are_not_repeated(write_log) -> None:  # type: ignore[no-untyped-def]
    """Tokens a training script dumped into its log never reach logwatch's output."""
    secrets = [
        "xoxb-1111-2222-abcdefSECRET",
        "0123456789abcdef0123",
        "hf_abcdefghijklmnopqrstuvwxyz0123456789",
    ]
    path = write_log(
        f"env SLACK_BOT_TOKEN={secrets[0]} WANDB_API_KEY={secrets[1]} hf_token: {secrets[2]} loss=nan\n".encode()
    )
    for fmt in ("text", "jsonl"):
        code, out, err = run("replay", path, "--format", fmt)
        assert code == 0 and "nan-loss" in out
        assert not any(secret in out + err for secret in secrets)


@pytest.mark.parametrize(
    "text",
    [
        "pad_token: 50256",
        "max_tokens=2048 loss=nan",
        "token: auth.test ok loss=nan",
        "eos_token_id: 50256 loss=nan",
    ],
)
def test_ordinary_token_settings_are_left_alone(write_log, text: str) -> None:  # type: ignore[no-untyped-def]
    """Redaction masks credentials, not tokenizer settings or words."""
    out = run("replay", write_log(text.encode() + b"\nloss=nan\n"), "--format", "jsonl")[1]
    assert "[REDACTED]" not in out


GPU_NAN_LOG = b"".join(
    [
        b"2026-11-28 14:00:00,002 INFO [wandb] snapshot step=150 gpu/0/util=98 gpu/0/mem_gb=nan"
        b" gpu/0/power_w=611 gpu/0/temp_c=67\n",
        b"2026-11-28 14:00:05,117 INFO [train] step 151/200000 | loss 3.4812 | acc 0.271\n",
        *(
            f"2026-11-28 14:{m:02d}:00,000 INFO [wandb] snapshot step={m} gpu/0/util=98"
            f" gpu/0/mem_gb=nan gpu/0/temp_c=90\n".encode()
            for m in range(1, 5)
        ),
    ]
)


@pytest.mark.parametrize("fmt", ["text", "jsonl"])
def test_a_gpu_value_no_column_holds_is_one_stderr_line_and_the_rules_stay_on(  # type: ignore[no-untyped-def]
    write_log, fmt: str
) -> None:
    """`mem_gb=nan` in snapshots is said once on stderr with its file and line (never in
    JSONL's stdout), no GPU rule is switched off, and gpu-hot still fires on line 5."""
    path = write_log(GPU_NAN_LOG)
    code, out, err = run("replay", path, "--format", fmt)
    assert code == 0
    assert err == (
        f"logwatch: {path}:1: snapshot value gpu/0/mem_gb=nan is not a number a GPU column can"
        " hold; read as missing (later such values not repeated)\n"
    )
    if fmt == "jsonl":
        events = [json.loads(line) for line in out.splitlines()]
        assert [(e["rule"], e["status"], e["line"]) for e in events] == [("gpu-hot", "firing", 5)]
    else:
        assert f"gpu-hot              {path}:5" in out
