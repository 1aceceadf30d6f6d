"""What the action tests share: a recording command, a trainer stand-in, tail with a config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.process import Collected
from tests.support.tailkit import wait_until

RECORDER = """\
import json, os, sys, time
with open(sys.argv[1], "a", encoding="utf-8") as out:
    env = {k: v for k, v in os.environ.items() if k.startswith("LOGWATCH_")}
    out.write(json.dumps({"argv": sys.argv[2:], "env": env, "at": time.time()}) + "\\n")
if os.environ.get("RECORDER_SLEEP"):
    time.sleep(float(os.environ["RECORDER_SLEEP"]))
"""


def recorder(folder: Path) -> tuple[Path, Path]:
    """A command that appends its argv, its LOGWATCH_* environment and the time to a file:
    (the script, the file)."""
    script = folder / "recorder.py"
    script.write_text(RECORDER, encoding="utf-8")
    return script, folder / "runs.jsonl"


def runs(record: Path) -> list[dict[str, Any]]:
    """What the recorder wrote, one object per run."""
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]


def action_config(folder: Path, *tables: str) -> Path:
    """A config of `[[action]]` tables (TOML text each)."""
    config = folder / "logwatch.toml"
    config.write_text("\n".join(f"[[action]]\n{table}" for table in tables), encoding="utf-8")
    return config


def argv_toml(*argv: str) -> str:
    """A `run = [...]` list in TOML."""
    return "run = " + json.dumps(list(argv))


def python_argv(script: Path, *rest: str) -> str:
    """`run` for a Python script of the test."""
    return argv_toml(sys.executable, str(script), *rest)


def trainer() -> subprocess.Popen[bytes]:
    """A child process standing in for the trainer (ends on SIGTERM)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def tail(folder: Path, config: Path, *extra: str, env: dict[str, str] | None = None) -> Collected:
    """`logwatch tail folder/*.log` with the config, ready (following its files)."""
    args = ["tail", str(folder / "*.log"), "--gpu", "off", "--config", str(config)]
    args += ["--state-dir", str(folder / "state"), "--poll-interval", "0.2s", *extra]
    proc = Collected(args, env=env)
    wait_until(lambda: _ready(proc) or proc.proc.poll() is not None)
    assert proc.proc.poll() is None, "".join(proc.err)
    return proc


def append(path: Path, text: str) -> None:
    """Append lines to a log, as the trainer does."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(text)


def _ready(proc: Collected) -> bool:
    """Following its files: history caught up, or resumed from the checkpoint."""
    return proc.said("following it") or proc.said("(checkpoint)")
