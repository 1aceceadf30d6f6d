"""Build the stand-in libnvidia-ml.so.1 from fake_nvml.c with the machine's C compiler."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "fake_nvml.c"


def compiler() -> str | None:
    """gcc or cc, if this machine has one."""
    return shutil.which("gcc") or shutil.which("cc")


def build(out_dir: Path) -> Path:
    """Compile the stand-in into `out_dir/libnvidia-ml.so.1` (soname set, as the real one)."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler")
    out = out_dir / "libnvidia-ml.so.1"
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O2",
            "-Wall",
            "-Wl,-soname,libnvidia-ml.so.1",
            "-o",
            str(out),
            str(SOURCE),
            "-lpthread",
        ],
        check=True,
        capture_output=True,
    )
    return out


def write_control(path: Path, values: dict[str, object]) -> None:
    """Write the control file the stand-in reads (`{"g0.util": 5}` -> `g0.util=5`)."""
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="utf-8")
