"""`--help` as a user reads it: options in sections (input, rules, output, time range, ...)
rather than in declaration order, defaults shown, a command's own extra section (top's keys),
and two or three examples at the end."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

SECTION_OF = {
    "max_line_bytes": "Input",
    "from_beginning": "Input",
    "from_end": "Input",
    "poll_interval": "Input",
    "partial_flush": "Input",
    "max_batch_delay": "Input",
    "warm_up": "Rules",
    "source": "Silence",
    "rule_paths": "Rules",
    "no_builtin_rules": "Rules",
    "since": "Time range",
    "until": "Time range",
    "fmt": "Output",
    "output": "Output",
    "png_dir": "Output",
    "fail_on": "Output",
    "junit_path": "Output",
    "interval": "Output",
    "export_metrics": "Output",
    "export_path": "Output",
    "events_path": "Output",
    "notify": "Alerting",
    "alertmanager_urls": "Alerting",
    "metrics": "Alerting",
    "metrics_textfile": "Alerting",
    "exit_on": "Alerting",
    "dry_run_actions": "Alerting",
    "actions_mode": "Alerting",
    "duration": "Silence",
    "comment": "Silence",
    "gpu_mode": "GPUs",
    "gpu_interval": "GPUs",
    "config_path": "Config and state",
    "state_dir": "Config and state",
    "verbose": "Config and state",
}
"""Which section of `--help` an option (by its parameter name) is listed under."""

SECTIONS = (
    "Input",
    "Rules",
    "Time range",
    "Output",
    "Alerting",
    "Silence",
    "GPUs",
    "Config and state",
    "Other options",
)
"""The sections in the order `--help` lists them; an option not in `SECTION_OF` is in the last."""


def _options_by_section(
    command: click.Command, ctx: click.Context, formatter: click.HelpFormatter
) -> None:
    rows: dict[str, list[tuple[str, str]]] = {name: [] for name in SECTIONS}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
        if record is not None:
            rows[SECTION_OF.get(param.name or "", SECTIONS[-1])].append(record)
    for name in SECTIONS:
        if rows[name]:
            with formatter.section(name):
                formatter.write_dl(rows[name])


def _examples(formatter: click.HelpFormatter, examples: Sequence[str]) -> None:
    """The examples as written (not re-wrapped), under their heading."""
    if examples:
        formatter.write_paragraph()
        formatter.write_text("Examples:")
        with formatter.indentation():
            for example in examples:
                formatter.write(f"{' ' * formatter.current_indent}{example}\n")


class HelpCommand(click.Command):
    """A command whose help lists options in sections, then `extra` (a heading and its
    (term, text) rows, computed when help is shown), then `examples`."""

    def __init__(
        self,
        *args: Any,
        examples: Sequence[str] = (),
        extra: Callable[[], tuple[str, Sequence[tuple[str, str]]]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.examples, self.extra = tuple(examples), extra

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _options_by_section(self, ctx, formatter)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        if self.extra is not None:
            heading, rows = self.extra()
            with formatter.section(heading):
                formatter.write_dl(list(rows))
        _examples(formatter, self.examples)


class HelpGroup(click.Group):
    """A group whose help ends with `examples`; its commands are `HelpCommand`s."""

    command_class = HelpCommand

    def __init__(self, *args: Any, examples: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.examples = tuple(examples)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        _examples(formatter, self.examples)
