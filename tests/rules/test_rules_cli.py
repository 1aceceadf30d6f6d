"""`logwatch rules list` and `logwatch rules check` as a user runs them: real files, exact output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.rules.loader import builtin_rules_dir

PACK = """\
[[rule]]
id = "loss-nan"
type = "nonfinite"
severity = "critical"
column = "loss"
summary = "loss is {value}"

[[rule]]
id = "oom"
type = "match"
severity = "warning"
pattern = "CUDA out of memory"
summary = "OOM at line {line}"
"""


def run(*args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one command."""
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def pack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A two-rule pack in a temp folder, which is also the working directory (no logwatch.toml)."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "mine.toml"
    path.write_text(PACK)
    return path


def test_list_text_is_an_aligned_table(pack: Path) -> None:
    """The text listing has a header and one aligned row per rule, with its file:line."""
    code, out, err = run("rules", "list", "--no-builtin-rules", "--rules", str(pack))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"ID        TYPE       SEVERITY  {'ORIGIN'.ljust(len(f'{pack}:1'))}  SUMMARY",
        f"loss-nan  nonfinite  critical  {pack}:1  loss is {{value}}",
        f"oom       match      warning   {pack}:8  OOM at line {{line}}",
    ]


def test_list_json_is_an_array_of_objects(pack: Path) -> None:
    """--format json gives id, type, severity, pack, line and summary of each rule."""
    code, out, _ = run(
        "rules", "list", "--no-builtin-rules", "--rules", str(pack), "--format", "json"
    )
    assert code == 0
    assert json.loads(out) == [
        {
            "id": "loss-nan",
            "type": "nonfinite",
            "severity": "critical",
            "pack": str(pack),
            "line": 1,
            "summary": "loss is {value}",
        },
        {
            "id": "oom",
            "type": "match",
            "severity": "warning",
            "pack": str(pack),
            "line": 8,
            "summary": "OOM at line {line}",
        },
    ]


def test_list_includes_builtin_rules_by_default(pack: Path) -> None:
    """Without --no-builtin-rules the built-in rules are listed before the pack's."""
    code, out, _ = run("rules", "list", "--rules", str(pack), "--format", "json")
    ids = [row["id"] for row in json.loads(out)]
    assert (
        code == 0 and "nan-loss" in ids and "log-stalled" in ids and ids[-2:] == ["loss-nan", "oom"]
    )


def test_list_honours_the_config(pack: Path, tmp_path: Path) -> None:
    """--config adds its packs and applies its [rules.<id>] overrides (a disabled rule is not listed)."""
    config = tmp_path / "logwatch.toml"
    config.write_text(
        'builtin_rules = false\nrule_packs = ["mine.toml"]\n\n[rules.oom]\nenabled = false\n[rules.loss-nan]\nseverity = "info"\n'
    )
    code, out, _ = run("rules", "list", "--config", str(config), "--format", "json")
    assert code == 0
    assert [(r["id"], r["severity"]) for r in json.loads(out)] == [("loss-nan", "info")]


def test_list_with_a_broken_pack_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken pack is one `Error: file:line: ...` line on stderr and exit 2."""
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\nid = "x"\n')
    code, out, err = run("rules", "list", "--rules", str(bad))
    assert (code, out) == (2, "")
    assert err == f"Error: {bad}:1: rule is missing required key 'type'\n"


def test_check_counts_the_rules_of_good_packs(pack: Path, tmp_path: Path) -> None:
    """Good packs (a file and a folder) give `N rules OK` and exit 0."""
    folder = tmp_path / "more"
    folder.mkdir()
    (folder / "one.toml").write_text(PACK.split("\n\n")[0].replace("loss-nan", "loss-nan-2") + "\n")
    assert run("rules", "check", str(pack), str(folder)) == (0, "3 rules OK\n", "")
    assert run("rules", "check", str(folder)) == (0, "1 rule OK\n", "")


BROKEN = """\
[[rule]]
id = "a"
type = "streak"
severity = "warning"
summary = "s"
applies = "snapshot"
condition = "gpu_keys = 0"
count = "3"

[[rule]]
id = "ok"
type = "match"
severity = "info"
pattern = "x"
summary = "s"

[[rule]]
id = "b"
type = "match"
severity = "loud"
pattern = "(unclosed"
summary = "s"

[[rule]]
id = "c"
type = "stalled"
severity = "warning"
summary = "s"
stall_after = "soon"
"""


def test_check_lists_every_problem_and_exits_2(pack: Path, tmp_path: Path) -> None:
    """Each broken rule table is one problem, the next tables still checked; an invalid-TOML file
    is one problem and the other files are still checked; a missing path is one too."""
    broken = tmp_path / "broken.toml"
    broken.write_text(BROKEN)
    garbled = tmp_path / "garbled.toml"
    garbled.write_text('[[rule]\nid = "x"\n')
    code, out, err = run("rules", "check", str(garbled), str(broken), str(pack), "nope")
    assert (code, err) == (2, "")
    assert out.splitlines() == [
        f"{garbled}:1: invalid TOML: Expected ']]' at the end of an array declaration",
        f"{broken}:8: 'count' must be of type int, got '3'",
        f"{broken}:17: rule 'b': pattern '(unclosed' is not a valid regex: missing ), unterminated subpattern at position 0",
        f"{broken}:24: rule 'c': stall_after: invalid duration 'soon' (expected a number with a unit: ms, s, m, h, d, w; e.g. '30s', '10m', '1h30m')",
        "nope: no such rule pack file or folder",
    ]


REPLACING = """\
[[rule]]
id = "nan-loss"
type = "nonfinite"
severity = "warning"
summary = "my nan {value}"
column = "loss"
"""


def test_check_refuses_a_built_in_id_without_replace(tmp_path: Path) -> None:
    """A pack rule with a built-in rule's id and no `replace = true` is a problem naming the
    pack's line, the id, the built-in it would replace and the fix (was: `1 rules OK`)."""
    mine = tmp_path / "mine.toml"
    mine.write_text(REPLACING)
    code, out, err = run("rules", "check", str(mine))
    assert (code, err) == (2, "")
    assert out == (
        f"{mine}:1: rule id 'nan-loss' is already taken by the built-in rule at "
        f"{builtin_rules_dir() / 'training.toml'}:6; add `replace = true` to this [[rule]] to "
        "replace it, or give it another id\n"
    )


def test_check_says_which_built_in_a_pack_replaces(tmp_path: Path) -> None:
    """With `replace = true` the pack checks OK and the check names the built-in it replaces."""
    mine = tmp_path / "mine.toml"
    mine.write_text(REPLACING + "replace = true\n")
    assert run("rules", "check", str(mine)) == (
        0,
        f"{mine}:1: rule 'nan-loss' replaces the built-in rule at "
        f"{builtin_rules_dir() / 'training.toml'}:6\n1 rule OK\n",
        "",
    )


def test_check_refuses_replace_that_replaces_nothing(tmp_path: Path) -> None:
    """`replace = true` on an id no built-in rule has (a typo) is a problem, not a new rule."""
    mine = tmp_path / "mine.toml"
    mine.write_text(REPLACING.replace('"nan-loss"', '"nan-los"') + "replace = true\n")
    assert run("rules", "check", str(mine)) == (
        2,
        f"{mine}:1: rule 'nan-los' says replace = true but no built-in or earlier rule has "
        "that id (a typo?); fix the id or drop replace\n",
        "",
    )


def test_the_built_in_packs_check_without_notes() -> None:
    """Checking the built-in folder itself finds no rule replacing itself."""
    code, out, _ = run("rules", "check", str(builtin_rules_dir()))
    assert code == 0 and out.endswith(" rules OK\n") and out.count("\n") == 1


def test_replay_refuses_a_pack_that_takes_a_built_in_id(write_log, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`replay --rules` with such a pack is one `Error:` line and exit 2, before any alert."""
    mine = tmp_path / "mine.toml"
    mine.write_text(REPLACING)
    log = tmp_path / "a.log"
    log.write_text("step 1 loss nan\n")
    code, out, err = run("replay", str(log), "--rules", str(mine))
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: {mine}:1: rule id 'nan-loss' is already taken by the built-in")
    assert err.endswith(
        "add `replace = true` to this [[rule]] to replace it, or give it another id\n"
    )


def test_check_needs_a_pack() -> None:
    """`rules check` without a PACK is a usage error (exit 2)."""
    assert run("rules", "check")[0] == 2


def test_a_folder_of_packs_skips_the_tests_beside_them(pack: Path, tmp_path: Path) -> None:
    """A folder holding packs with their `logwatch test` files beside them (`one.test.toml`, as
    in the repository's `rules/`) loads the packs only: listed, checked, and its rules run."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "one.toml").write_text(PACK.split("\n\n")[0] + "\n")
    (folder / "one.test.toml").write_text('[[test]]\nname = "t"\ninput = "x"\n')
    assert run("rules", "check", str(folder)) == (0, "1 rule OK\n", "")
    code, out, err = run("rules", "list", "--no-builtin-rules", "--rules", str(folder))
    assert (code, err) == (0, "")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["loss-nan"]
