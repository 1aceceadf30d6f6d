"""A real headless Chromium for the report tests: the DOM it renders, and screenshots.

Missing locally: the test is skipped with the reason. With LOGWATCH_CI=1 a missing browser fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from logwatch.report.png import BROWSERS

# The network is off for the page: any fetch would go to a closed port and fail.
OFFLINE = ["--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9"]


def browser() -> str:
    """The Chromium on PATH, else skip (fail under LOGWATCH_CI=1)."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    reason = "no headless Chromium on PATH (apt install chromium) for the report browser tests"
    if os.environ.get("LOGWATCH_CI") == "1":
        pytest.fail(reason + "; LOGWATCH_CI=1 requires it")
    pytest.skip(reason)


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [browser(), *OFFLINE, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )


def dump_dom(page: Path, profile: Path, *, shot: Path | None = None, width: int = 1400) -> str:
    """The DOM after Chromium loaded and ran the page, serialized; with `shot`, also a
    `width`x3000 screenshot of that same load written there (one browser start, not two)."""
    window = [*_window(width, dark=False), f"--screenshot={shot}"] if shot is not None else []
    return _run([*window, "--dump-dom", page.as_uri()], profile).stdout


def screenshot(
    page: Path, out: Path, profile: Path, *, width: int = 1400, dark: bool = False
) -> Path:
    """A `width`x3000 screenshot of the page (`dark`: with the system in dark mode)."""
    _run([*_window(width, dark=dark), f"--screenshot={out}", page.as_uri()], profile)
    return out


def _window(width: int, *, dark: bool) -> list[str]:
    """A `width`x3000 window with no scrollbars (`dark`: the system in dark mode)."""
    return [
        "--hide-scrollbars",
        *(["--force-dark-mode"] if dark else []),
        f"--window-size={width},3000",
    ]


def first_pixel(png: Path) -> tuple[int, int, int]:
    """The RGB of a PNG's top-left pixel (8-bit RGB or RGBA): whatever a scanline's filter,
    its first pixel is stored as it is, having no neighbour to the left or above."""
    data = png.read_bytes()
    pos, idat = 8, b""
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + size]
        pos += 12 + size
    row = zlib.decompress(idat)
    return row[1], row[2], row[3]


def keep_artefact(path: Path) -> None:
    """Copy a test's artefact (a screenshot) to `$LOGWATCH_ARTEFACTS`, when it is set."""
    folder = os.environ.get("LOGWATCH_ARTEFACTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, Path(folder) / path.name)


class Dom(HTMLParser):
    """The elements of a DOM dump: (tag, attributes) in document order, the text inside
    table cells by class, and the text of each SVG `text` element (`texts`, by its index in
    `elements`)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.rows: list[dict[str, str]] = []
        self.texts: dict[int, str] = {}
        self._cell: str | None = None
        self._text: int | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.elements.append((tag, found))
        if tag == "tr" and "alert" in found.get("class", "").split():
            self.rows.append({})
        if tag == "td" and self.rows:
            self._cell = found.get("class", "")
            self.rows[-1][self._cell] = ""
        if tag == "text":
            self._text = len(self.elements) - 1
            self.texts[self._text] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        if tag == "text":
            self._text = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self.rows[-1][self._cell] += data
        if self._text is not None:
            self.texts[self._text] += data

    def chart_texts(self, chart_id: str, cls: str) -> list[str]:
        """The text of each `text` element with class `cls` inside chart `chart_id`."""
        out, current = [], None
        for i, (tag, attrs) in enumerate(self.elements):
            if tag == "svg" and "chart" in attrs.get("class", ""):
                current = attrs["id"]
            elif current == chart_id and tag == "text" and cls in attrs.get("class", "").split():
                out.append(self.texts.get(i, ""))
        return out

    def charts(self) -> dict[str, list[tuple[str, dict[str, str]]]]:
        """Each `svg.chart` by id, with the elements inside it."""
        out: dict[str, list[tuple[str, dict[str, str]]]] = {}
        current: str | None = None
        for tag, attrs in self.elements:
            if tag == "svg" and "chart" in attrs.get("class", ""):
                current = attrs["id"]
                out[current] = []
            elif current is not None:
                out[current].append((tag, attrs))
        return out
