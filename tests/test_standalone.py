"""The repository stands alone: a clone with nothing beside it passes `make test`.

The tests, benchmarks and scripts once read the project's shared folder
next to the repository. Nothing may point there again: no path climbing
out to it, no string naming it as a path part. The word in prose ("rounds
are shared across endpoints") is fine. The fixtures the tests read live in
tests/fixtures, each with its origin and sha256 in tests/fixtures/SOURCES.md.

One use is allowed: .ci/run points NODECODE_TEST_DEPS at the Neovim plugin
checkouts there (nvim-deps) when that folder exists, so that CI runs the
tests that need them; without it those tests skip and make test passes.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT

SCANNED = ("tests", "bench", "scripts", ".ci", "Makefile", "pyproject.toml")
THIS = Path(__file__).resolve()  # holds the bad samples below, so it is not scanned

# A reference to the shared folder as a path, in code, config or prose. The
# pattern and the bad samples are put together from pieces (the folder's name,
# the parent step) so that no line of this file is itself such a reference.
NAME = "shared"
UP = ".."
OUTSIDE = re.compile(
    re.escape(UP) + r"[/\\]+" + NAME + r"\b"  # the parent step, then the folder
    r"""|(["'])""" + NAME + r"""(\1|[/\\])"""  # "shared" or 'shared' as a path part
    r"|\b" + NAME + r"[/\\]+(fixtures|data)\b"  # shared/fixtures, shared/data
    r"|/work/" + NAME + r"\b"  # this machine's copy
)

# The one allowed reference: the optional plugin checkouts, from .ci/run only.
ALLOWED = (".ci/run", re.compile(re.escape(UP) + "/" + NAME + r"/nvim-deps\b"))

BAD = [
    line.format(up=UP, name=NAME)
    for line in (
        'FIXTURES = REPO / "{up}" / "{name}" / "fixtures"',
        'SHARED = ROOT.parent / "{name}"',
        "SHARED = ROOT.parent / '{name}'",
        'source = OUT.parents[3] / "{name}/data/models.dev-api.json"',
        "python scripts/derive_models_windows.py {up}/{name}/data/models.dev-api.json",
        r"open('{up}\{name}\fixtures\x.sse')",
        '"""Every recorded stream in {name}/fixtures, replayed over real HTTP."""',
        "cp /work/{name}/fixtures/*.sse tests/fixtures/",
        "DEPS = ROOT / '{up}/{name}/nvim-deps'",
    )
]
PROSE = [
    "def test_rounds_are_shared_across_endpoints_and_can_be_added():",
    '"""One big session, the rest of the events shared evenly by the others."""',
    "# -- the shared part ------------------------------------------------------",
    '"""Shared fixtures: a nodecode home wired to a loopback provider server."""',
    "never in the shared python3 host; shared_state = {}",
    "copied from the project's shared fixture folder on 2026-12-01",
]


@pytest.mark.parametrize("line", BAD)
def test_the_check_catches_a_path_to_the_shared_folder(line):
    assert OUTSIDE.search(line)


@pytest.mark.parametrize("line", PROSE)
def test_the_check_lets_the_word_in_prose_pass(line):
    assert not OUTSIDE.search(line)


def scanned_files() -> list[Path]:
    files = []
    for name in SCANNED:
        top = ROOT / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in candidates:
            parts = path.relative_to(ROOT).parts
            if any(p == "__pycache__" or (p.startswith(".") and p != ".ci") for p in parts):
                continue  # caches: bench/.cache, .pytest_cache, bytecode
            if path.is_file() and path.resolve() != THIS:
                files.append(path)
    return files


def allowed(path: Path, line: str) -> bool:
    """Whether `line` of `path` is .ci/run's use of the optional plugin checkouts."""
    name, pattern = ALLOWED
    return path.relative_to(ROOT).as_posix() == name and bool(pattern.search(line))


def test_no_file_points_at_the_shared_folder():
    files = scanned_files()
    assert any(p.name == "helpers.py" for p in files) and len(files) > 50
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(
            path.read_bytes().decode("utf-8", "replace").splitlines(), start=1
        )
        if OUTSIDE.search(line) and not allowed(path, line)
    ]
    assert found == []


def test_ci_uses_the_plugin_checkouts_only_when_they_are_there():
    lines = (ROOT / ".ci/run").read_text(encoding="utf-8").splitlines()
    uses = [i for i, line in enumerate(lines) if allowed(ROOT / ".ci/run", line)]
    assert len(uses) == 1, uses  # named once, in a variable the guard tests
    assert lines[uses[0]].startswith("deps=")
    assert 'if [ -d "$deps" ]; then' in lines[uses[0] + 1 :]


def test_the_fixtures_are_inside_the_repository():
    assert FIXTURES.resolve().is_relative_to(ROOT.resolve())
    assert (FIXTURES / "errors").is_dir()


def test_every_fixture_has_its_origin_and_checksum_in_sources():
    sources = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    checksums = re.findall(r"^([0-9a-f]{64})  (\S+)$", sources, flags=re.M)
    listed = {name: digest for digest, name in checksums}
    on_disk = {
        p.relative_to(FIXTURES).as_posix(): p
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name != "SOURCES.md"
    }
    assert set(listed) == set(on_disk)
    for name, path in on_disk.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed[name], name
        assert f"| `{path.name}` |" in sources, f"{name} has no provenance row"
