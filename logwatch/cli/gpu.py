"""`logwatch gpu`: one snapshot of this host's GPUs through NVML."""

from __future__ import annotations

import json
import sys

import click

from logwatch.cli.help import HelpCommand
from logwatch.cli.options import text_or_json


@click.command("gpu", cls=HelpCommand, examples=("logwatch gpu", "logwatch gpu --format json"))
@text_or_json("text: the NVML status line and a table; json: one JSON object.")
def gpu_cmd(fmt: str) -> None:
    """Show one snapshot of this host's GPUs through NVML, the NVML status first (exit 1 when
    NVML does not work here)."""

    from logwatch.gpu.nvml import NvmlReader
    from logwatch.gpu.report import snapshot_json, snapshot_lines
    from logwatch.gpu.sampler import take_snapshot

    snapshot = take_snapshot(NvmlReader())
    if fmt == "json":
        click.echo(json.dumps(snapshot_json(snapshot), indent=2))
    else:
        for line in snapshot_lines(snapshot):
            click.echo(line)
    if not snapshot.status.available:
        sys.exit(1)
