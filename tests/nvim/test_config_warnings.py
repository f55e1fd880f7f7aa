"""What a person in Neovim sees of config.jsonc's problems: an unknown key is one
warning message while the host runs and a warning in :checkhealth nodecode; a
wrong value is an error there."""

from __future__ import annotations

from .conftest import configure, wait_for
from .ui_helpers import notes, notified

TYPO = 'config.jsonc: "auto_aprove" is not a setting; did you mean "auto_approve"?'


def test_an_unknown_key_is_one_warning_message_however_often_the_config_is_read(
    nvim, home, loopback
):
    configure(home, loopback([]), auto_aprove=True)
    notified(nvim)

    nvim.command("NodecodeBudget")
    wait_for(lambda: [n for n in notes(nvim) if "window:" in n])
    nvim.command("NodecodeStatus")
    nvim.command("NodecodeBudget")
    wait_for(lambda: [n for n in notes(nvim) if "window:" in n][1:])

    assert [n for n in notes(nvim) if "auto_aprove" in n] == [f"nodecode: {TYPO}"]


def test_checkhealth_shows_an_unknown_key_as_a_warning(nvim, home, loopback):
    configure(home, loopback([]), auto_aprove=True)

    nvim.command("checkhealth nodecode")

    report = "\n".join(nvim.current.buffer[:])
    assert f"WARNING {TYPO}" in report, report
    assert "nodecode config lists every setting, and so does :help" in report, report
    assert "OK provider loopback" in report and "ERROR" not in report


def test_checkhealth_shows_a_wrong_value_as_an_error(nvim, home, loopback):
    configure(home, loopback([]), max_rounds=0.5)

    nvim.command("checkhealth nodecode")

    report = "\n".join(nvim.current.buffer[:])
    line = 'ERROR config.jsonc: "max_rounds" must be a whole number ≥ 1 (found 0.5)'
    assert line in report, report
    assert "no provider configured" not in report


def test_a_sound_config_is_ok_in_checkhealth(nvim, home, loopback):
    configure(home, loopback([]))

    nvim.command("checkhealth nodecode")

    report = "\n".join(nvim.current.buffer[:])
    assert "OK config.jsonc and the environment: every setting known and valid" in report
