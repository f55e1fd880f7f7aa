"""`nodecode --help` and each command's --help speak to the person using the
tool: no references to the specification they have never read."""

from __future__ import annotations

from helpers import run_cli
from nodecode.cli import COMMANDS


def test_no_help_text_cites_the_spec(tmp_path):
    pages = [run_cli("--help", home=tmp_path)]
    pages += [run_cli(name, "--help", home=tmp_path) for name in COMMANDS]

    for page in pages:
        assert page.returncode == 0, page.stderr
        assert "".join(("SP", "EC")) not in page.stdout and "§" not in page.stdout, page.stdout
