"""The benchmark's harness: timing blocks and calls, the result rows and the table they print."""

from __future__ import annotations

import dataclasses
import datetime
import gc
import importlib.metadata
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import beartype
import jaxtyping
import tensordict
import torch

import trajschema as ts

# ---------------------------------------------------------------------------
# Timing


@dataclasses.dataclass(frozen=True)
class Timing:
    median_ns: float
    min_ns: float
    max_ns: float
    number: int  # calls per block
    repeats: int  # blocks
    per_call: tuple[float, ...]  # ns per call in each block, in round order

    def spread(self) -> str:
        return f"{self.repeats}x{self.number} calls, min {fmt_ns(self.min_ns)}, max {fmt_ns(self.max_ns)}"


def _block(fn: Callable[[], Any], number: int) -> int:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn()
        return time.perf_counter_ns() - t0
    finally:
        gc.enable()


def _calibrate(fn: Callable[[], Any], min_block_s: float, warmup_s: float) -> int:
    """Warm ``fn`` up and return how many calls make a block of at least ``min_block_s``."""
    t_end = time.perf_counter() + warmup_s
    fn()
    fn()
    while time.perf_counter() < t_end:
        fn()
    number = 1
    target_ns = min_block_s * 1e9
    while True:
        took = _block(fn, number)
        if took >= target_ns:
            return number
        grow = target_ns / max(took, 1) * 1.1
        number = max(number + 1, min(int(number * grow) + 1, number * 100))


def measure(
    fns: Mapping[str, Callable[[], Any]], *, min_block_s: float, repeats: int, warmup_s: float
) -> dict[str, Timing]:
    """Median per-call time of each of ``fns`` over ``repeats`` blocks of >= ``min_block_s``.

    The blocks of the functions are interleaved round-robin (a, b, c, a, b, c, ...), so
    load from other work on a shared machine falls on all of them alike and the ratios
    between them stay meaningful even when the absolute times drift.
    """
    numbers = {k: _calibrate(fn, min_block_s, warmup_s) for k, fn in fns.items()}
    per_call: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            per_call[k].append(_block(fn, numbers[k]) / numbers[k])
    return {k: Timing(statistics.median(v), min(v), max(v), numbers[k], repeats, tuple(v)) for k, v in per_call.items()}


def _nothing() -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Call:
    """One candidate of :func:`measure_calls`: ``run`` is timed; ``before`` and ``after`` are not."""

    run: Callable[[], Any]
    before: Callable[[], Any] = _nothing
    after: Callable[[], Any] = _nothing


def measure_calls(calls: Mapping[str, Call], *, repeats: int) -> dict[str, Timing]:
    """Time ``repeats`` single calls of each candidate, round-robin (a, b, c, a, b, c, ...).

    For operations that change state (a TransferQueue put needs fresh keys, cleared
    afterwards): each round runs, per candidate, ``before()``, then ``run()`` as a
    timed block of one call (``gc`` collected before, disabled during, as in
    :func:`measure`), then ``after()``. Warm the candidates up before calling this.
    """
    per_call: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(repeats):
        for k, c in calls.items():
            c.before()
            per_call[k].append(float(_block(c.run, 1)))
            c.after()
    return {k: Timing(statistics.median(v), min(v), max(v), 1, repeats, tuple(v)) for k, v in per_call.items()}


def fmt_ratio(r: float) -> str:
    # three decimals under 0.1: a share of a step (target 0.02x, 0.05x) reads apart from its bound
    if r >= 1:
        return f"{r:.1f}×"
    return f"{r:.2f}×" if r >= 0.1 else f"{r:.3f}×"


def fmt_ns(ns: float) -> str:
    if ns < 10_000:
        return f"{ns / 1e3:.2f} µs"
    if ns < 10_000_000:
        return f"{ns / 1e3:.0f} µs"
    if ns < 10_000_000_000:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.2f} s"


# ---------------------------------------------------------------------------
# The run


@dataclasses.dataclass
class Row:
    operation: str
    ours: Timing | None
    baseline: str
    theirs: Timing | None
    target: float | None
    # "speedup": ratio = baseline / trajschema, target is a minimum.
    # "overhead": ratio = trajschema / baseline, target is a maximum.
    # "added": ratio = trajschema - baseline (ns per call), target is a maximum in ns.
    kind: str = "speedup"
    #: why a side of the row was not measured (the row then reads "skipped")
    skipped: str | None = None

    def _ratio(self, ours: float, theirs: float) -> float:
        if self.kind == "added":
            return ours - theirs
        return ours / theirs if self.kind == "overhead" else theirs / ours

    def fmt(self, ratio: float) -> str:
        """The ratio as the table prints it (a time difference for an "added" row)."""
        if self.kind == "added":
            return ("+" if ratio >= 0 else "−") + fmt_ns(abs(ratio))
        return fmt_ratio(ratio)

    @property
    def ratio(self) -> float | None:
        if self.ours is None or self.theirs is None:
            return None
        return self._ratio(self.ours.median_ns, self.theirs.median_ns)

    def paired(self) -> tuple[float, float, float] | None:
        """Median, min and max of the per-round ratios (blocks of one round ran back to back)."""
        if self.ours is None or self.theirs is None:
            return None
        r = [self._ratio(a, b) for a, b in zip(self.ours.per_call, self.theirs.per_call)]
        return statistics.median(r), min(r), max(r)

    @property
    def result(self) -> str:
        if self.skipped:
            return "skipped"
        if self.target is None or self.ratio is None:
            return "info"
        ok = self.ratio <= self.target if self.kind in ("overhead", "added") else self.ratio >= self.target
        return "PASS" if ok else "FAIL"


HEADER = ("operation", "trajschema", "baseline", "baseline time", "ratio", "target", "result")


def _cells(row: Row) -> tuple[str, ...]:
    ratio = row.ratio
    return (
        row.operation,
        fmt_ns(row.ours.median_ns) if row.ours else "—",
        row.baseline or "—",
        fmt_ns(row.theirs.median_ns) if row.theirs else "—",
        "—" if ratio is None else row.fmt(ratio),
        "—" if row.target is None else _target_cell(row),
        row.result,
    )


def _target_cell(row: Row) -> str:
    assert row.target is not None
    if row.kind == "added":
        return f"≤+{fmt_ns(row.target)}"
    return f"{'≤' if row.kind == 'overhead' else '≥'}{row.target:g}×"


def render(rows: list[Row], markdown: bool, header: Sequence[str] = HEADER) -> str:
    table = [tuple(header), *(_cells(r) for r in rows)]
    if markdown:
        out = [
            "| " + " | ".join(header) + " |",
            "|" + "|".join(["---", "---:", "---", "---:", "---:", "---:", "---"]) + "|",
        ]
        out += ["| " + " | ".join(c) + " |" for c in table[1:]]
        return "\n".join(out)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    right = {1, 3, 4, 5}
    lines = []
    for j, r in enumerate(table):
        lines.append(
            "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        )
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_rev() -> str:
    try:
        root = Path(__file__).resolve().parent.parent
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "trajschema"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        return rev + (" (trajschema/ has uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_info() -> list[str]:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"machine: {_cpu_model()}, os.cpu_count()={os.cpu_count()}, usable cpus={affinity}, {platform.platform()}",
        f"python {platform.python_version()}, torch {torch.__version__} (intra-op threads: {torch.get_num_threads()}), "
        f"tensordict {tensordict.__version__}, jaxtyping {jaxtyping.__version__}, beartype {beartype.__version__}, "
        f"trajschema {ts.__version__} @ {_git_rev()}, TransferQueue {_dist_version('TransferQueue')}, "
        f"verl {_dist_version('verl')}",
    ]


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
