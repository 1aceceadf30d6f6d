"""`report --png DIR`: each chart as a PNG, drawn by a headless Chromium.

The charts are SVG inside HTML; a browser draws them exactly as the report shows them, so no
second plotting library is needed. Without a browser on PATH this is one error line.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from logwatch.errors import ReportError
from logwatch.report.page import CSS

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_SIZE = re.compile(r'<svg class="chart" id="([\w-]+)" width="(\d+)" height="(\d+)"')


def find_browser() -> str:
    """The path of a Chromium-family browser on PATH; ReportError with the fix otherwise."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise ReportError(
        "--png needs a headless Chromium and none is on PATH (looked for "
        + ", ".join(BROWSERS)
        + "): install one (Debian/Ubuntu: apt install chromium) or leave out --png; "
        "the HTML report needs no browser"
    )


def write_pngs(charts: Sequence[str], out_dir: str, browser: str) -> list[Path]:
    """Each chart as `<chart id>.png` in `out_dir`; the files written, in chart order."""
    target = Path(out_dir)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"--png {out_dir}: cannot create it: {exc.strerror or exc}") from None
    with tempfile.TemporaryDirectory(prefix="logwatch-png-") as tmp:
        jobs = []
        for svg in charts:
            found = _SIZE.search(svg)
            if found is None:
                continue
            name, width, height = found[1], int(found[2]), int(found[3])
            page = Path(tmp) / f"{name}.html"
            page.write_text(
                f'<!doctype html><html><head><meta charset="utf-8"><style>{CSS}'
                f"body{{margin:0}} svg.chart{{margin:0;border:0}}</style></head><body>{svg}"
                "</body></html>",
                encoding="utf-8",
            )
            jobs.append((page, target / f"{name}.png", width, height, Path(tmp) / name))
        with ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(lambda job: _shoot(browser, *job), jobs))


def _shoot(browser: str, page: Path, out: Path, width: int, height: int, profile: Path) -> Path:
    """One screenshot, the network off (nothing may be fetched) and a profile of its own."""
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--proxy-server=127.0.0.1:9",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        f"--screenshot={out}",
        page.as_uri(),
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReportError(f"--png: {browser} failed on {out.name}: {exc}") from None
    if done.returncode != 0 or not out.exists():
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise ReportError(f"--png: {browser} exited {done.returncode} on {out.name}: {last}")
    return out
