"""Installed as a plugin manager installs it: a checkout that was never built
(lazy.nvim runs no build for a `dir =` spec) says so once, naming both
remedies; the README's lazy.nvim spec is the one the help shows."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pynvim

from .conftest import NVIM, ROOT, shutdown
from .ui_helpers import after_scheduled, messages_of

PLUGIN_PARTS = ("lua", "plugin", "rplugin", "doc", "syntax")


def unbuilt_checkout(dest: Path) -> Path:
    """The plugin's files without a .venv, as a fresh `dir =` checkout has them."""
    for part in PLUGIN_PARTS:
        shutil.copytree(ROOT / part, dest / part, ignore=shutil.ignore_patterns("tags"))
    return dest


def spawn_with(plugin: Path, tmp_path: Path) -> pynvim.Nvim:
    """A Neovim with `plugin` on the runtimepath and no g:nodecode_python."""
    init = tmp_path / "init.lua"
    init.write_text(f"vim.opt.rtp:prepend({str(plugin)!r})\nvim.opt.shadafile = 'NONE'\n")
    argv = [NVIM, "--embed", "--headless", "-n", "-i", "NONE", "-u", str(init)]
    return pynvim.attach("child", argv=argv)


def test_an_unbuilt_checkout_says_so_once_naming_both_remedies(
    nvim_env, tmp_path, home, monkeypatch
):
    monkeypatch.setenv("NODECODE_HOME", str(home))
    plugin = unbuilt_checkout(tmp_path / "nodecode")
    nv = spawn_with(plugin, tmp_path)
    try:
        nv.exec_lua("vim.o.columns = 400")  # the whole line fits: not cut to a float
        nv.command("Nodecode hello")
        after_scheduled(nv)

        said = [m for m in messages_of(nv).splitlines() if "venv" in m]
        assert len(said) == 1, said
        assert said[0] == (
            f"nodecode: no .venv in {plugin} (the plugin is not built): "
            "run :Lazy build nodecode, or make install there"
        )
    finally:
        shutdown(nv)


def lua_block(text: str, after: str) -> str:
    """The first ```lua block (README) or `>lua` block (help) after `after`."""
    rest = text[text.index(after) :]
    fenced = re.search(r"```lua\n(.*?)```", rest, re.S)
    help_block = re.search(r">lua\n(.*?)\n<", rest, re.S)
    found = min((m for m in (fenced, help_block) if m), key=lambda m: m.start())
    return textwrap.dedent(found.group(1)).strip()


def test_the_readme_and_the_help_show_the_same_lazy_spec():
    readme = lua_block((ROOT / "README.md").read_text(), "## Install with lazy.nvim")
    help_spec = lua_block((ROOT / "doc" / "nodecode.txt").read_text(), "*nodecode-install*")

    assert readme == help_spec
    assert "lazy = false" in readme and "cmd =" not in readme
    assert "build = 'make install'" in readme and "<Plug>(nodecode-" in readme
