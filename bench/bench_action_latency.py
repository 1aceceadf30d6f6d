"""How soon an `[[action]]` command runs after the line that fires its alert, against how soon
`logwatch tail` prints that alert (the baseline), both measured in the same run.

One `logwatch tail` follows a log; each trial appends a NaN line (a new `nan-loss` alert, the
previous one having recovered) and records when the alert's line reached our stdout reader,
when the action's `start` was journaled (fsynced, before the command starts), and when the
command itself (a Python one-liner) was running. Prints medians and maxima, and the ratio of
the medians to the baseline. Usage: .venv/bin/python bench/bench_action_latency.py [TRIALS]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RECORD = "import sys, time; open(sys.argv[1], 'a').write(str(time.time()) + chr(10))"


def main(trials: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-action-"))
    record, log = folder / "ran.txt", folder / "train.log"
    log.write_text("step 1 | loss 2.0\n", encoding="utf-8")
    run = json.dumps([sys.executable, "-c", RECORD, str(record)])
    config = folder / "logwatch.toml"
    config.write_text(f'[[action]]\nname = "bench"\non = ["nan-loss"]\nrun = {run}\n', "utf-8")
    args = [sys.executable, "-m", "logwatch", "tail", str(log), "--gpu", "off", "--format", "jsonl"]
    args += ["--config", str(config), "--state-dir", str(folder / "state")]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed: list[float] = []
    ready = threading.Event()

    def pump_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if '"status": "firing"' in line:
                printed.append(time.time())

    def pump_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "following it" in line:
                ready.set()

    threading.Thread(target=pump_out, daemon=True).start()
    threading.Thread(target=pump_err, daemon=True).start()
    if not ready.wait(60):
        raise SystemExit(f"logwatch tail did not start following (exit {proc.poll()})")
    alert, journal, command = [], [], []
    for trial in range(trials):
        written = time.time()
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"step {2 * trial + 2} | loss nan\n")
        while not record.exists() or len(record.read_text().splitlines()) <= trial:
            time.sleep(0.002)
        while len(printed) <= trial:
            time.sleep(0.002)
        starts = [
            json.loads(line)["at"]
            for line in (folder / "state" / "actions.jsonl").read_text().splitlines()
            if '"op": "start"' in line
        ]
        alert.append(printed[trial] - written)
        journal.append(starts[-1] - written)
        command.append(float(record.read_text().splitlines()[trial]) - written)
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"step {2 * trial + 3} | loss 1.0\n")
        time.sleep(0.3)
    proc.terminate()
    proc.wait(30)
    base = statistics.median(alert)
    print(f"load average {os.getloadavg()[0]:.1f}, {trials} trials, after = 0s")
    for name, values in (
        ("alert printed", alert),
        ("start journaled", journal),
        ("command running", command),
    ):
        med = statistics.median(values)
        print(
            f"{name:16s} median {med * 1000:6.1f} ms  max {max(values) * 1000:6.1f} ms  "
            f"x{med / base:.2f} of the alert"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
