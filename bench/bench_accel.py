"""The gate pass over a block, by polars and by each accelerator candidate (issue 30, decision 1).

Usage: python bench/bench_accel.py LOG [--block-mb 12] [--runs 3] [--only NAME,...]

Needs what logwatch does not depend on (each a prebuilt wheel on PyPI):
    pip install numpy hyperscan google-re2 pyahocorasick numba

The work: which lines of a block each built-in rule gate selects (`GateScan.hits`: the rows of
the lines matching each gate's regex), over every block of LOG (cut at line ends, as replay
cuts them), on one thread. Each candidate finds candidate lines its own way, then every gate's
own regex confirms them with polars on those lines only (as `GateScan._split` does), so each
gives exactly polars' rows (checked, gate by gate); a gate a candidate cannot read (a regex
it cannot take, or no literal to look for) is read by polars over every line, and that time
counts too. Not timed: cutting the block into lines (replay has them) and compiling (once per
process; said apart).

  polars        `GateScan.hits` as the engine runs it: unions of plain gates (one regex
                pass each, Teddy prefilter), then each gate on its union's lines
  hyperscan     one multi-pattern database of every gate's regex, one scan over the block's
                bytes; each match's end offset mapped to its line (numpy searchsorted)
  re2-set       google-re2 `Set` of every gate's regex: one `Match` per line (a Python call
                per line)
  re2-union     google-re2: `finditer` of the union of every gate over the whole block
  aho-corasick  pyahocorasick: the gates that are alternations of literals, on the lowercased
                block (a superset: case folded), each hit's end offset mapped to its line
  numba         a JIT kernel (cached to disk) marking, per line, which literal gates'
                literals it holds (lowercased, first-byte table), over the block's bytes
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import polars as pl

import logwatch
from logwatch.engine import Engine
from logwatch.rules.scan import GateScan

Hits = dict[str, pl.Series]


def blocks(path: Path, size: int) -> Iterator[bytes]:
    """The file in blocks of about `size` bytes, cut after a newline."""
    with path.open("rb") as f:
        rest = b""
        while chunk := f.read(size):
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            yield data[:cut]
            rest = data[cut:]
        if rest:
            yield rest + b"\n"


def lines_of(block: bytes) -> pl.DataFrame:
    """The block's lines as replay's frame holds them (`text`, without the newline)."""
    text = block[:-1].decode("utf-8", errors="replace")
    return pl.DataFrame({"text": text.split("\n")})


def confirm(frame: pl.DataFrame, rows: dict[str, pl.Series], exprs: dict[str, pl.Expr]) -> Hits:
    """Each gate's rows among its candidate rows, by its own regex (exact), in one select."""
    out: Hits = {}
    for gate, candidates in rows.items():
        if candidates.is_empty():
            out[gate] = candidates
            continue
        picked = frame.get_column("text").gather(candidates).to_frame()
        keep = picked.select(exprs[gate].fill_null(False)).to_series()
        out[gate] = candidates.filter(keep)
    return out


def polars_all(frame: pl.DataFrame, gates: list[str], exprs: dict[str, pl.Expr]) -> Hits:
    """The gates polars reads over every line (those a candidate cannot take)."""
    if not gates:
        return {}
    found = frame.select(
        exprs[g].fill_null(False).arg_true().implode().alias(f"_{i}") for i, g in enumerate(gates)
    )
    return {g: found.get_column(f"_{i}")[0] for i, g in enumerate(gates)}


def line_rows(block: bytes, ends: np.ndarray) -> np.ndarray:
    """The line (row) of each match end offset (exclusive end: the byte before it)."""
    newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    return np.searchsorted(newlines, ends - 1, side="left")


def by_gate(ids: np.ndarray, rows: np.ndarray, gates: list[str]) -> dict[str, pl.Series]:
    """Sorted unique rows per gate, from (gate index, row) pairs."""
    out = {}
    for i, gate in enumerate(gates):
        picked = np.unique(rows[ids == i]).astype(np.uint32)
        out[gate] = pl.Series(picked, dtype=pl.UInt32)
    return out


_TOP_BAR = re.compile(r"(?<!\\)\|")


def literals(gate: str) -> list[str] | None:
    """The literals a gate is an alternation of (lowercased: a case-folded superset), or None
    where an alternative is no plain literal (or a `(?i:a|b)` group of them)."""
    out: list[str] = []
    depth, start, parts = 0, 0, []
    for i, ch in enumerate(gate):
        if ch == "(" and (i == 0 or gate[i - 1] != "\\"):
            depth += 1
        elif ch == ")" and gate[i - 1] != "\\":
            depth -= 1
        elif ch == "|" and depth == 0 and gate[i - 1] != "\\":
            parts.append(gate[start:i])
            start = i + 1
    parts.append(gate[start:])
    for part in parts:
        inner = part[4:-1] if part.startswith("(?i:") and part.endswith(")") else None
        for alt in _TOP_BAR.split(inner) if inner is not None else [part]:
            plain = re.sub(r"\\(.)", r"\1", alt)
            if not alt or re.search(r"(?<!\\)[\[\](){}*+?.^$]|\\[a-zA-Z]", alt):
                return None
            out.append(plain.lower())
    return sorted(set(out))


class Method:
    """One way to find each gate's lines: `setup` once (compile), `run` per block."""

    name = ""

    def __init__(self, gates: list[str], exprs: dict[str, pl.Expr]) -> None:
        self.gates, self.exprs = gates, exprs
        self.note = ""

    def run(self, block: bytes, frame: pl.DataFrame) -> Hits:
        raise NotImplementedError


class Polars(Method):
    name = "polars (GateScan.hits, today)"

    def __init__(self, gates: list[str], exprs: dict[str, pl.Expr]) -> None:
        super().__init__(gates, exprs)
        self.scan = GateScan(exprs)
        self.note = (
            f"{len(self.scan.unions)} unions + {len(gates) - sum(map(len, self.scan.unions))} own"
        )

    def run(self, block: bytes, frame: pl.DataFrame) -> Hits:
        return self.scan.hits(frame)


class Hyperscan(Method):
    name = "hyperscan (one database, block scan)"

    def __init__(self, gates: list[str], exprs: dict[str, pl.Expr]) -> None:
        import hyperscan

        super().__init__(gates, exprs)
        self.taken, self.rest = [], []
        for gate in gates:  # Rust regex and Hyperscan's PCRE subset differ: try each alone
            db = hyperscan.Database()
            try:
                db.compile(expressions=[gate.encode()], flags=[hyperscan.HS_FLAG_MULTILINE])
                self.taken.append(gate)
            except hyperscan.error:
                self.rest.append(gate)
        self.db = hyperscan.Database()
        self.db.compile(
            expressions=[g.encode() for g in self.taken],
            ids=list(range(len(self.taken))),
            flags=[hyperscan.HS_FLAG_MULTILINE] * len(self.taken),
        )
        self.note = f"{len(self.taken)} gates in the database, {len(self.rest)} by polars"
        self.matches = 0

    def run(self, block: bytes, frame: pl.DataFrame) -> Hits:
        ids: list[int] = []
        ends: list[int] = []

        def seen(i: int, start: int, end: int, flags: int, context: object) -> None:
            ids.append(i)
            ends.append(end)

        self.db.scan(block, match_event_handler=seen)
        self.matches += len(ids)
        rows = line_rows(block, np.asarray(ends, dtype=np.int64))
        found = by_gate(np.asarray(ids), rows, self.taken)
        return {**confirm(frame, found, self.exprs), **polars_all(frame, self.rest, self.exprs)}


class Re2Set(Method):
    name = "google-re2 Set, one Match per line"

    def __init__(self, gates: list[str], exprs: dict[str, pl.Expr]) -> None:
        import re2

        super().__init__(gates, exprs)
        self.set = re2.Set.SearchSet()
        self.taken, self.rest = [], []
        for gate in gates:
            try:
                re2.compile(gate)
                self.set.Add(gate)
                self.taken.append(gate)
            except re2.error:
                self.rest.append(gate)
        self.set.Compile()
        self.note = f"{len(self.taken)} gates in the set, {len(self.rest)} by polars"

    def run(self, block: bytes, frame: pl.DataFrame) -> Hits:
        match = self.set.Match
        rows: list[list[int]] = [[] for _ in self.taken]
        for row, line in enumerate(block.split(b"\n")[:-1]):
            for i in match(line) or ():
                rows[i].append(row)
        found = {g: pl.Series(r, dtype=pl.UInt32) for g, r in zip(self.taken, rows, strict=True)}
        return {**found, **polars_all(frame, self.rest, self.exprs)}


class Re2Union(Method):
    name = "google-re2 finditer of the union, whole block"

    def __init__(self, gates: list[str], exprs: dict[str, pl.Expr]) -> None:
        import re2

        super().__init__(gates, exprs)
        self.union = re2.compile("|".join(f"(?:{g})" for g in gates).encode())
        self.note = "candidates for every gate, each gate confirmed by polars"

    def run(self, block: bytes, frame: pl.DataFrame) -> Hits:
        ends = np.asarray([m.end() for m in self.union.finditer(block)], dtype=np.int64)
        rows = np.unique(line_rows(block, ends)).astype(np.uint32)
        candidates = pl.Series(rows, dtype=pl.UInt32)
        return confirm(frame, dict.fromkeys(self.gates, candidates), self.exprs)


class AhoCorasick(Method):
    name = "pyahocorasick, literal gates, lowercased block"

    def __init__(self, gates: list[str], exprs: dict[str, pl.Expr]) -> None:
        import ahocorasick

        super().__init__(gates, exprs)
        self.auto = ahocorasick.Automaton(ahocorasick.STORE_INTS)
        self.taken = [g for g in gates if literals(g)]
        self.rest = [g for g in gates if g not in self.taken]
        owners: dict[str, list[int]] = {}
        for i, gate in enumerate(self.taken):
            for lit in literals(gate) or []:
                owners.setdefault(lit, []).append(i)
        self.owners = list(owners.values())
        for n, lit in enumerate(owners):
            self.auto.add_word(lit.encode().decode("latin-1"), n)  # a byte a char
        self.auto.make_automaton()
        self.note = (
            f"{len(self.taken)} literal gates ({len(owners)} literals), {len(self.rest)} by polars"
        )

    def run(self, block: bytes, frame: pl.DataFrame) -> Hits:
        ids: list[int] = []
        ends: list[int] = []
        owners = self.owners
        for end, n in self.auto.iter(block.lower().decode("latin-1")):
            for i in owners[n]:
                ids.append(i)
                ends.append(end + 1)
        rows = line_rows(block, np.asarray(ends, dtype=np.int64))
        found = by_gate(np.asarray(ids), rows, self.taken)
        return {**confirm(frame, found, self.exprs), **polars_all(frame, self.rest, self.exprs)}


class Numba(Method):
    name = "numba kernel, literal gates, per line"

    def __init__(self, gates: list[str], exprs: dict[str, pl.Expr]) -> None:
        super().__init__(gates, exprs)
        self.taken = [g for g in gates if literals(g)]
        self.rest = [g for g in gates if g not in self.taken]
        lits = [(lit.encode(), i) for i, g in enumerate(self.taken) for lit in literals(g) or []]
        lits.sort()
        width = max(len(lit) for lit, _ in lits)
        self.table = np.zeros((len(lits), width), dtype=np.uint8)
        self.lengths = np.array([len(lit) for lit, _ in lits], dtype=np.int64)
        self.owner = np.array([i for _, i in lits], dtype=np.int64)
        self.first = np.full(257, len(lits), dtype=np.int64)  # byte -> its literals' start
        for n, (lit, _) in enumerate(lits):
            self.table[n, : len(lit)] = np.frombuffer(lit, dtype=np.uint8)
        for b in range(255, -1, -1):
            at = [n for n, (lit, _) in enumerate(lits) if lit[0] == b]
            self.first[b] = at[0] if at else self.first[b + 1]
        self.last = np.zeros(256, dtype=np.int64)
        for b in range(256):
            self.last[b] = sum(1 for lit, _ in lits if lit[0] <= b)
        start = time.perf_counter()
        self.kernel = _kernel()
        self.kernel(np.zeros(2, np.uint8), self.table, self.lengths, self.owner, self.first,
                    self.last, len(self.taken))  # fmt: skip
        self.note = (
            f"{len(self.taken)} literal gates ({len(lits)} literals), {len(self.rest)} by "
            f"polars; first call (JIT or cache load) {time.perf_counter() - start:.2f} s"
        )

    def run(self, block: bytes, frame: pl.DataFrame) -> Hits:
        data = np.frombuffer(block, dtype=np.uint8)
        marks = self.kernel(data, self.table, self.lengths, self.owner, self.first, self.last,
                            len(self.taken))  # fmt: skip
        found = {
            gate: pl.Series(np.flatnonzero(marks[:, i]).astype(np.uint32), dtype=pl.UInt32)
            for i, gate in enumerate(self.taken)
        }
        return {**confirm(frame, found, self.exprs), **polars_all(frame, self.rest, self.exprs)}


def _kernel() -> Callable[..., np.ndarray]:
    import numba

    @numba.njit(cache=True, nogil=True)
    def kernel(data, table, lengths, owner, first, last, gates):  # type: ignore[no-untyped-def]
        lines = 0
        for b in data:
            if b == 10:
                lines += 1
        marks = np.zeros((max(lines, 1), gates), dtype=np.bool_)
        row = 0
        n = data.shape[0]
        for i in range(n):
            c = data[i]
            if c == 10:
                row += 1
                continue
            if 65 <= c <= 90:
                c += 32
            for k in range(first[c], last[c]):
                size = lengths[k]
                if i + size > n:
                    continue
                ok = True
                for j in range(1, size):
                    d = data[i + j]
                    if 65 <= d <= 90:
                        d += 32
                    if d != table[k, j]:
                        ok = False
                        break
                if ok:
                    marks[row, owner[k]] = True
        return marks

    return kernel


METHODS: dict[str, type[Method]] = {
    "polars": Polars,
    "hyperscan": Hyperscan,
    "re2-set": Re2Set,
    "re2-union": Re2Union,
    "aho-corasick": AhoCorasick,
    "numba": Numba,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--block-mb", type=int, default=12)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=",".join(METHODS))
    args = parser.parse_args()
    engine = Engine(logwatch.load_rules(), stats=False)
    exprs: dict[str, pl.Expr] = dict(engine._gate_scan._rows)  # every built-in gate
    gates = list(exprs)
    data = [(b, lines_of(b)) for b in blocks(args.log, args.block_mb << 20)]
    size = sum(len(b) for b, _ in data)
    methods = []
    for name in args.only.split(","):
        start = time.perf_counter()
        method = METHODS[name](gates, exprs)
        methods.append((method, time.perf_counter() - start))
    truth = [Polars(gates, exprs).run(b, f) for b, f in data]
    best: dict[str, float] = {}
    for _ in range(args.runs):  # rounds interleave the methods: load hits them alike
        for method, _ in methods:
            start = time.process_time()
            got = [method.run(b, f) for b, f in data]
            spent = time.process_time() - start
            best[method.name] = min(best.get(method.name, spent), spent)
            for want, have in zip(truth, got, strict=True):
                for gate in gates:
                    if not want[gate].equals(have[gate], check_names=False):
                        raise SystemExit(f"{method.name}: gate {gate[:40]!r} differs")
    base = best[methods[0][0].name]
    print(f"{args.log.name}: {size / 1e6:.0f} MB, {len(data)} blocks, {len(gates)} gates")
    print(f"| method | CPU s (best of {args.runs}) | vs polars | setup s | note |")
    print("|---|---:|---:|---:|---|")
    for method, setup in methods:
        spent = best[method.name]
        print(
            f"| {method.name} | {spent:.3f} | {spent / base:.2f}x | {setup:.2f} | {method.note} |"
        )


if __name__ == "__main__":
    main()
