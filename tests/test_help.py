"""`--help`: options in sections, defaults shown, top's keys, what tail prints from the history,
and every command's help ending with two or three examples that the command accepts."""

from __future__ import annotations

import shlex

import click
import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.top.view import HELP


def _commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group under `logwatch`, as its words (`()` is logwatch itself)."""
    found = [prefix]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the top group imports its commands when asked
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found += _commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


def _help(*words: str) -> str:
    result = CliRunner().invoke(cli, [*words, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def _examples(text: str) -> list[str]:
    head, _, examples = text.rpartition("\nExamples:\n")
    assert head, "no Examples: section"
    return [line.strip() for line in examples.splitlines()]


def _parses(example: str) -> None:
    """The example's `logwatch ...` words parse as its command's arguments (no usage error)."""
    words = shlex.split(example.split("|")[-1], comments=True)
    words = words[: words.index(">")] if ">" in words else words
    assert words[0] == "logwatch", example
    command: click.Command = cli
    args = words[1:]
    while isinstance(command, click.Group):  # the top group imports a command when asked
        found = command.get_command(click.Context(command), args.pop(0))
        assert found is not None, example
        command = found
    command.make_context(command.name or "", args)


@pytest.mark.parametrize("words", _commands(), ids=lambda w: " ".join(w) or "logwatch")
def test_help_ends_with_two_or_three_examples_that_parse(words: tuple[str, ...]) -> None:
    """The help's last section is `Examples:` with 2 or 3 runnable `logwatch` lines, within 80
    columns, each accepted by the command it shows."""
    text = _help(*words)
    examples = _examples(text)
    assert 2 <= len(examples) <= 3, examples
    for example in examples:
        assert "logwatch " + " ".join(words) in example, example
        _parses(example)
    assert max(len(line) for line in text.splitlines()) <= 80


def test_options_are_grouped_in_sections() -> None:
    """replay's options are listed under Input, Rules, Time range, Output (in that order),
    not in declaration order; each option once."""
    text = _help("replay")
    order = [
        text.index(f"\n{heading}:\n") for heading in ("Input", "Rules", "Time range", "Output")
    ]
    assert order == sorted(order)
    rules = text[text.index("\nRules:\n") : text.index("\nTime range:\n")]
    assert "--rules PATH" in rules and "--no-builtin-rules" in rules
    since = text[text.index("\nTime range:\n") : text.index("\nOutput:\n")]
    assert "--since T" in since and "--until T" in since
    assert text.count("--max-line-bytes") == 1


def test_defaults_are_shown() -> None:
    """`--fail-on` says its default is never; formats, intervals and sizes show theirs."""
    replay = " ".join(_help("replay").split())
    assert "worse fired [default: never]." in replay
    assert "[default: text]" in replay and "[default: 1048576; x>=256]" in replay
    tail = " ".join(_help("tail").split())
    assert "[default: 1s]" in tail and "[default: 5s]" in tail


def test_top_help_lists_its_keys() -> None:
    """Every key of the view's own help is in `top --help`, under Keys, before the examples."""
    text = _help("top")
    keys = text[text.index("\nKeys:\n") : text.index("\nExamples:\n")]
    for key, what in HELP:
        assert f"  {key}  " in keys and what.split()[0] in keys


def test_tail_help_says_what_the_history_prints_at_start() -> None:
    """tail's help says that only the alerts still firing at the end of the existing history
    are printed, and what --from-beginning and --from-end change."""
    text = " ".join(_help("tail").split())
    assert "only the alerts still firing at its end are printed" in text
    assert "--from-beginning prints every alert of the history, --from-end none" in text
