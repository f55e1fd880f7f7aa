"""Developer hooks that watch the host's turns: memory and time, never on by default.

``NODECODE_DEV_TRACEMALLOC=DIR``: the host traces allocations from its first
turn on and writes a ``tracemalloc`` snapshot after turns 10, 100, 200, …
(``DIR/turn-N.snap``, after a full collection: what is garbage in a cycle is
not in it). ``NODECODE_DEV_PROFILE=DIR``: each turn's worker thread runs
under ``cProfile`` (``DIR/turn-N.prof``; read with ``pstats``). Both slow a
turn several-fold: they find what is kept and what grows (bench/README.md).
``NODECODE_DEV_TIMES=FILE``: a line per turn, ``N MS GC_MS FULL``: the
worker's ms, the ms the collector ran meanwhile (any thread) and its full
passes.

    python -m nodecode.devtrace DIR/turn-100.snap DIR/turn-300.snap [TOP]

prints what the later snapshot holds that the earlier did not, by the line
that allocated it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

TIMES = "NODECODE_DEV_TIMES"
TRACE = "NODECODE_DEV_TRACEMALLOC"
PROFILE = "NODECODE_DEV_PROFILE"
FRAMES = 12  # frames kept per allocation: enough to see who asked for it


def snapshot_due(turn: int) -> bool:
    """After turn 10 and every hundredth."""
    return turn == 10 or (turn > 0 and turn % 100 == 0)


@contextlib.contextmanager
def turn(number: int) -> Iterator[None]:
    """Around one turn's work on its worker thread: as the environment asks."""
    trace, profile, times = (os.environ.get(k) for k in (TRACE, PROFILE, TIMES))
    if not trace and not profile and not times:
        yield
        return
    profiler, started = None, time.perf_counter()
    if times:
        _watch_gc()
    collected = list(_GC)
    if trace:
        import tracemalloc

        if not tracemalloc.is_tracing():
            tracemalloc.start(FRAMES)
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        yield
    finally:
        if times:
            with open(times, "a", encoding="utf-8") as out:
                gc_ms, full = _GC[0] - collected[0], _GC[1] - collected[1]
                took = (time.perf_counter() - started) * 1000
                out.write(f"{number} {took:.3f} {gc_ms:.3f} {full}\n")
        if profiler is not None and profile:
            profiler.disable()
            Path(profile).mkdir(parents=True, exist_ok=True)
            profiler.dump_stats(str(Path(profile) / f"turn-{number}.prof"))
        if trace and snapshot_due(number):
            _snapshot(Path(trace) / f"turn-{number}.snap")


_GC = [0.0, 0]  # ms the process spent collecting, full collections, since watched
_GC_START: list[float] = []


def _watch_gc() -> None:
    """Count the collector's time (any thread's) from now on."""
    import gc

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            _GC_START[:] = [time.perf_counter()]
        elif _GC_START:
            _GC[0] += (time.perf_counter() - _GC_START[0]) * 1000
            _GC[1] += info.get("generation") == 2

    if not _GC_START:  # once per process
        gc.callbacks.append(callback)
        _GC_START.append(0.0)


def _snapshot(path: Path) -> None:
    import gc
    import tracemalloc

    gc.collect()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    tracemalloc.take_snapshot().dump(str(partial))
    partial.replace(path)  # whoever waits for it finds it whole


def diff(before: Path, after: Path, top: int = 25) -> list[str]:
    """What ``after`` holds beyond ``before``, largest first, by the allocating
    line and its nearest callers in nodecode."""
    import tracemalloc

    old = tracemalloc.Snapshot.load(str(before))
    new = tracemalloc.Snapshot.load(str(after))
    stats = new.compare_to(old, "traceback")
    total = sum(s.size_diff for s in stats)
    lines = [f"{total / 2**20:+.1f} MiB held in all, {after.name} against {before.name}"]
    for stat in stats[:top]:
        frames = list(reversed(stat.traceback))  # the allocating frame first
        ours = [f for f in frames if "nodecode" in f.filename][:4]
        where = " < ".join(f"{_short(f.filename)}:{f.lineno}" for f in ours) or "-"
        last = frames[0]
        lines.append(
            f"{stat.size_diff / 2**20:+7.2f} MiB {stat.count_diff:+8d} blocks  "
            f"{_short(last.filename)}:{last.lineno}  [{where}]"
        )
    return lines


def _short(filename: str) -> str:
    for mark in ("/nodecode/", "/python3."):
        if mark in filename:
            return filename.split(mark, 1)[1]
    return filename


if __name__ == "__main__":  # pragma: no cover - a developer's tool
    args = sys.argv[1:]
    if len(args) not in (2, 3):
        sys.exit("usage: python -m nodecode.devtrace BEFORE.snap AFTER.snap [TOP]")
    print("\n".join(diff(Path(args[0]), Path(args[1]), int(args[2]) if len(args) > 2 else 25)))
