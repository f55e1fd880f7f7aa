"""The system prompt and the tool definition are made from the verb table: every
verb listed by its usage and doc, a new family adding itself, the same bytes every time."""

from __future__ import annotations

from nodecode.cells.registry import Family, table, verb
from nodecode.verbs import files, shell
from nodecode.verbs.prompt import SYSTEM_PROMPT, TOOLS, system_prompt, tools
from nodecode.verbs.table import VERBS


def verbs_section(prompt: str) -> list[str]:
    """The lines between 'Verbs:' and the line about `[seq N]`."""
    lines = prompt.splitlines()
    start = lines.index("Verbs:") + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("Every tool result"))
    return lines[start:end]


def test_every_verb_of_the_table_is_listed_in_its_order_with_usage_and_doc():
    listed = [line for line in verbs_section(SYSTEM_PROMPT) if line.startswith("- (")]
    assert listed == [f"- {v.usage} - {v.doc}" for v in VERBS.values()]
    assert listed[0] == "- (read-file PATH :from L :to L) - A file's text, optionally lines L..L."


def test_the_prompt_keeps_what_the_model_relies_on():
    for words in [
        "through one tool, `eval`",
        'Its input is {"code": "<cell>"}: a cell of Lisp forms, evaluated in order.',
        "Start every cell\nwith a `;;` comment line",
        "Paths are relative to the workspace root and may not leave it (your context folder is "
        "the\none exception).",
        "Writes may need the person's approval.",
        "Shell commands may need the person's approval.",
        "Every tool result ends with `[seq N]`",
        "(recall-entry N) shows the whole of it.",
        "- (grep PATTERN :path PATH) - Rust regex search, path:line:text; skips gitignored files.",
        "# Your context is a file",
        "(context :drop SPANS :keep IDS :note TEXT) makes the same edit without the file.",
        "# Budget",
        "Near 85% you get a notice",
        "# Working",
        "answer\nin plain text without calling the tool.",
    ]:
        assert words in SYSTEM_PROMPT, words


def test_a_new_family_adds_its_verbs_and_guidance():
    @verb("mcp-echo", args=["text"])
    def echo(env, text):
        """Say TEXT back (an MCP server's tool)."""
        return text

    mcp = Family("MCP tools", (echo,), guidance="MCP tools run on servers you configured.")
    verbs = table(files.FAMILY, shell.FAMILY, mcp)
    prompt = system_prompt(verbs)
    section = verbs_section(prompt)
    assert "- (mcp-echo TEXT) - Say TEXT back (an MCP server's tool)." in section
    guidance = [files.FAMILY.guidance.splitlines()[0], shell.FAMILY.guidance, mcp.guidance]
    assert [section.index(line) for line in guidance] == sorted(
        section.index(line) for line in guidance
    )
    assert section[-1] == mcp.guidance
    assert not [line for line in section if line.startswith("- (recall-")]
    assert tools(verbs)[0]["description"].startswith(
        "Evaluate a cell of Lisp forms (verbs for files, shell and MCP tools)."
    )


def test_the_prompt_and_tools_are_the_same_bytes_every_time():
    again = table(*VERBS.families)  # another table of the same families
    assert system_prompt(VERBS) is SYSTEM_PROMPT
    assert system_prompt(again) == SYSTEM_PROMPT
    assert tools(VERBS) is TOOLS
    assert TOOLS[0]["name"] == "eval"
    assert TOOLS[0]["description"].startswith(
        "Evaluate a cell of Lisp forms (verbs for files, shell, context and recall)."
    )
