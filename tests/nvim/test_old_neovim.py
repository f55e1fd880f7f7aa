"""Older Neovims, run for real whatever NVIM_BIN the other tests use.

Debian bookworm's 0.7.2 (NODECODE_NVIM07): loading the plugin says one line,
that it needs 0.10, and :checkhealth nodecode says the same as an ERROR, never a
Lua error. Debian trixie's 0.10.4 (NODECODE_NVIM010) with the real telescope
checkout, whose plugin/ guard needs 0.11: recall skips telescope for the
built-in picker and :checkhealth nodecode says why. Each binary is looked for
where this machine has it; where it is absent its tests skip, naming the path."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pynvim
import pytest

from .conftest import (
    DEPS_DIR,
    INIT,
    configure,
    guard_unmet,
    recall_falls_back_from,
    shutdown,
)

NVIM07 = Path(os.environ.get("NODECODE_NVIM07", "/opt/nvim07/nvim"))
NVIM010 = Path(os.environ.get("NODECODE_NVIM010", "/opt/nvim010/nvim"))

needs_07 = pytest.mark.skipif(
    not os.access(NVIM07, os.X_OK),
    reason=f"no Neovim 0.7 at {NVIM07} (set NODECODE_NVIM07 to one)",
)


def run_old(tmp_path: Path, *commands: str) -> tuple[str, str]:
    """Run the old Neovim headless with the tests' init and `commands`, then
    quit; its messages (stderr) and the current buffer written to a file."""
    out = tmp_path / "buffer.txt"
    argv = [str(NVIM07), "--headless", "-n", "-i", "NONE", "-u", str(INIT)]
    for c in (*commands, f"silent write! {out}", "qall!"):
        argv += ["-c", c]
    env = dict(os.environ)
    for d in ("config", "data", "state", "cache"):
        (tmp_path / d).mkdir(exist_ok=True)
        env[f"XDG_{d.upper()}_HOME"] = str(tmp_path / d)
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    return r.stderr + r.stdout, out.read_text() if out.exists() else ""


@needs_07
def test_version_on_0_7_is_what_the_test_runs():
    r = subprocess.run([str(NVIM07), "--version"], capture_output=True, text=True, timeout=30)
    assert r.stdout.startswith("NVIM v0.7"), r.stdout.splitlines()[:1]


@needs_07
def test_loading_on_0_7_says_one_line_that_it_needs_0_10(tmp_path):
    messages, _ = run_old(tmp_path)

    assert messages.strip() == "nodecode needs Neovim 0.10 or newer", messages


@needs_07
def test_setup_on_0_7_is_no_error(tmp_path):
    messages, _ = run_old(tmp_path, "lua require('nodecode').setup({ chat = { size = 40 } })")

    assert messages.strip() == "nodecode needs Neovim 0.10 or newer", messages


@needs_07
def test_checkhealth_on_0_7_says_it_needs_0_10_and_no_lua_error(tmp_path):
    _, report = run_old(tmp_path, "checkhealth nodecode")

    assert "ERROR: Neovim 0.7.2: nodecode needs 0.10 or newer" in report, report
    assert "Failed to run healthcheck" not in report, report
    assert "E5108" not in report and "traceback" not in report, report
    assert report.count("ERROR") == 1, report


needs_010 = pytest.mark.skipif(
    not os.access(NVIM010, os.X_OK),
    reason=f"no Neovim 0.10 at {NVIM010} (set NODECODE_NVIM010 to one)",
)
needs_telescope = pytest.mark.skipif(
    DEPS_DIR is None or not (DEPS_DIR / "telescope.nvim" / "lua").is_dir(),
    reason="set NODECODE_TEST_DEPS to a directory holding plenary.nvim and telescope.nvim",
)


@pytest.fixture
def nvim010(nvim_env, home, workspace, monkeypatch):
    """A Neovim 0.10 as the `nvim` fixture starts one (the tests' init, isolated)."""
    monkeypatch.setenv("NODECODE_HOME", str(home))
    monkeypatch.setenv("FZF_LUA_NVIM_BIN", str(NVIM010))
    monkeypatch.chdir(workspace)
    nv = pynvim.attach(
        "child", argv=[str(NVIM010), "--embed", "--headless", "-n", "-i", "NONE", "-u", str(INIT)]
    )
    yield nv
    shutdown(nv)


@needs_010
@needs_telescope
def test_on_0_10_recall_skips_the_real_telescope_and_checkhealth_says_why(nvim010, home, loopback):
    assert DEPS_DIR is not None
    telescope = DEPS_DIR / "telescope.nvim"
    assert guard_unmet(telescope, str(NVIM010))  # the case itself: its guard needs 0.11
    configure(home, loopback([]))
    nv = nvim010
    assert nv.exec_lua("return vim.version().minor") == 10
    report = recall_falls_back_from(nv, DEPS_DIR / "plenary.nvim", telescope)
    assert "WARNING telescope skipped: telescope.nvim needs Neovim 0.11 (this is 0.10." in report
    assert 'OK pickers use builtin (picker.backend = "auto"; installed: telescope)' in report
    assert "ERROR" not in report, report
