"""Where things are: the repository root, the samples, the bundled logs the tests name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
NAN_LOG = str(SAMPLES / "dflash" / "train_nan.log")
BENCH = ROOT / "bench"


def load_bench(name: str) -> ModuleType:
    """A script of `bench/` (a generator, a benchmark) as a module, registered in `sys.modules`
    under its name (bench/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
