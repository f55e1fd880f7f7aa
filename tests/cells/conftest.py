"""A real temporary workspace on disk and a CellEnv over it."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodecode.cells.env import CellEnv
from nodecode.verbs.table import VERBS


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "hello.txt").write_text("one\ntwo\nthree\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    return 42\n")
    return root


@pytest.fixture
def approvals() -> list[tuple[str, str]]:
    return []


@pytest.fixture
def env(ws: Path, approvals: list[tuple[str, str]]) -> CellEnv:
    def approve(kind: str, detail: str) -> bool:
        approvals.append((kind, detail))
        return True

    return CellEnv(workspace=ws, verbs=VERBS, approve=approve)
