"""What the cluster tests share: the log of one run, and the config that points at Alertmanager."""

from __future__ import annotations

from pathlib import Path

RUN = "r42"
START = f"2026-11-30 06:00:00,000 INFO run start: run_id={RUN}\nstep=1 loss=2.0\n"
NAN = "step=2 loss=nan\n"
RECOVERED = "step=3 loss=1.9\n"


def am_config(*urls: str, resend: str = "1s", extra: str = "") -> str:
    """A logwatch.toml whose [alertmanager] table posts to `urls`, re-posting every `resend`."""
    listed = ", ".join(f'"{url}"' for url in urls)
    return (
        f'[alertmanager]\nurls = [{listed}]\nresend_interval = "{resend}"\ntimeout = "2s"\n'
        'labels = { cluster = "pod-3" }\n'
        'generator_url = "https://wandb.ai/team/proj/runs/{run}"\n' + extra
    )


def append(log: Path, text: str) -> None:
    """Append text to a log as a trainer would."""
    with log.open("a", encoding="utf-8") as out:
        out.write(text)
