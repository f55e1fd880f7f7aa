"""The host's developer hooks (nodecode.devtrace): off unless the environment
asks, and then what bench/README.md says they write."""

from __future__ import annotations

import gc
import sys
import tracemalloc

import pytest
from nodecode import devtrace

KEPT: list[object] = []


def profiling() -> object | None:
    """The profiler running on this thread (cProfile's, as the hook enables it)."""
    if sys.version_info >= (3, 12):  # cProfile is a sys.monitoring tool from 3.12
        return sys.monitoring.get_tool(sys.monitoring.PROFILER_ID)
    return sys.getprofile()


@pytest.mark.parametrize("value", [None, ""])  # unset, or set empty (`VAR= nvim`)
def test_no_hook_is_on_unless_asked(tmp_path, monkeypatch, value):
    """Off: the turn runs untraced, unprofiled, its collector unwatched, and writes
    nothing, not even where a path relative to the working directory would go."""
    for key in (devtrace.TRACE, devtrace.PROFILE, devtrace.TIMES):
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    callbacks = list(gc.callbacks)
    with devtrace.turn(100):  # a turn the tracer would take a snapshot after
        KEPT.append(bytearray(1000))
        during = tracemalloc.is_tracing(), profiling(), list(gc.callbacks)
    assert during == (False, None, callbacks)
    assert list(tmp_path.iterdir()) == []


def test_the_hooks_write_snapshots_a_diff_reads_profiles_and_times(tmp_path, monkeypatch):
    monkeypatch.setenv(devtrace.TRACE, str(tmp_path / "snaps"))
    monkeypatch.setenv(devtrace.PROFILE, str(tmp_path / "profiles"))
    monkeypatch.setenv(devtrace.TIMES, str(tmp_path / "times.txt"))
    try:
        with devtrace.turn(10):
            KEPT.append([str(i) for i in range(1000)])
        with devtrace.turn(11):
            pass
        with devtrace.turn(100):
            KEPT.append([str(i) * 50 for i in range(20_000)])  # about 2 MB kept
    finally:
        tracemalloc.stop()
    snaps = sorted(p.name for p in (tmp_path / "snaps").iterdir())
    assert snaps == ["turn-10.snap", "turn-100.snap"]
    profiles = sorted(p.name for p in (tmp_path / "profiles").iterdir())
    assert profiles == ["turn-10.prof", "turn-100.prof", "turn-11.prof"]
    times = (tmp_path / "times.txt").read_text().splitlines()
    assert [line.split()[0] for line in times] == ["10", "11", "100"]
    lines = devtrace.diff(tmp_path / "snaps" / "turn-10.snap", tmp_path / "snaps" / "turn-100.snap")
    held = float(lines[0].split()[0])
    assert 1.5 < held < 10, lines[0]  # the 2 MB list, in MiB
    assert "test_devtrace.py" in "\n".join(lines[1:4])
