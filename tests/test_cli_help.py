"""`nodecode --help` and each command's --help speak to the person using the
tool: no references to the specification they have never read."""

from __future__ import annotations

import pytest
from helpers import run_cli
from nodecode.cli import COMMANDS, main


def cites_the_spec(page: str) -> bool:
    return "".join(("SP", "EC")) in page or "§" in page


def test_no_help_text_cites_the_spec(tmp_path, capsys):
    top = run_cli("--help", home=tmp_path)  # the installed entry point, once
    assert top.returncode == 0, top.stderr
    assert not cites_the_spec(top.stdout), top.stdout

    for name in COMMANDS:  # each command's page in this process: 30 starts cost 12 s
        with pytest.raises(SystemExit) as done:
            main(["--home", str(tmp_path), name, "--help"])
        page = capsys.readouterr()
        assert done.value.code == 0, page.err
        assert name in page.out and not cites_the_spec(page.out), page.out
