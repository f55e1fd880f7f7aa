""":help nodecode where nothing but the runtimepath put the plugin there: the
demo's Neovim (`make demo` runs it with python/nodecode/demo/init.lua) on a
checkout whose doc/tags nobody built, and doc/tags kept out of git."""

from __future__ import annotations

import sys
from pathlib import Path

import pynvim
import pytest

from .conftest import NVIM, ROOT, shutdown

DEMO_INIT = ROOT / "python" / "nodecode" / "demo" / "init.lua"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The plugin as a fresh clone has it: the help file, no doc/tags."""
    root = tmp_path / "nodecode"
    (root / "doc").mkdir(parents=True)
    (root / "doc" / "nodecode.txt").write_bytes((ROOT / "doc" / "nodecode.txt").read_bytes())
    for name in ("lua", "plugin", "rplugin", "syntax"):
        (root / name).symlink_to(ROOT / name)
    return root


@pytest.fixture
def demo_nvim(nvim_env, checkout: Path, home: Path, workspace: Path, monkeypatch):
    """Neovim started the way the demo starts it, on ``checkout``."""
    monkeypatch.setenv("NODECODE_HOME", str(home))
    monkeypatch.setenv("NODECODE_DEMO_ROOT", str(checkout))
    monkeypatch.setenv("NODECODE_DEMO_PYTHON", sys.executable)
    monkeypatch.chdir(workspace)
    argv = [NVIM, "--embed", "--headless", "-n", "-i", "NONE", "-u", str(DEMO_INIT)]
    nv = pynvim.attach("child", argv=argv)
    yield nv
    shutdown(nv)


def test_help_nodecode_opens_in_the_demo_without_prebuilt_tags(demo_nvim, checkout):
    demo_nvim.command("help nodecode")

    assert demo_nvim.eval("&buftype") == "help"
    assert Path(demo_nvim.current.buffer.name) == checkout / "doc" / "nodecode.txt"
    # Line 1 of the file, not a section deep inside it: the file's first line holds *nodecode*.
    assert demo_nvim.funcs.line("w0") == 1
    assert demo_nvim.current.window.cursor[0] == 1
    demo_nvim.command("help nodecode-mcp")
    assert "MCP TOOLS" in demo_nvim.current.line


def test_doc_tags_is_ignored_by_git():
    ignored = [line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()]
    assert "doc/tags" in ignored or "/doc/tags" in ignored
