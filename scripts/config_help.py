"""Write the settings reference of doc/nodecode.txt (`:help nodecode-config`) from
the config schema (python/nodecode/config/schema.py).

The part it owns runs from the line after the `*nodecode-config*` tag to the
blank line before the next `====` rule. `--check` changes nothing and exits 1
when the help file says something else than the schema (a test runs it).

    .venv/bin/python scripts/config_help.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "doc" / "nodecode.txt"
TAG = "*nodecode-config*"
RULE = "=" * 78

sys.path.insert(0, str(ROOT / "python"))

from nodecode.config import reference  # noqa: E402

INTRO = """\
Made from the schema (python/nodecode/config/schema.py) by
scripts/config_help.py: `nodecode config` prints the same list. A key that
is not a setting is a warning naming the nearest one; a value of the wrong
kind, a number that is not finite, or a fraction where a count goes is an
error naming the key (|nodecode-config-jsonc|).
"""


def generated() -> str:
    return INTRO + "\n" + reference.text(markup=True) + "\n"


def written(text: str) -> str:
    """``text`` (the help file) with its generated part made anew."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if TAG in line) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].rstrip("\n") == RULE)
    return "".join(lines[:start]) + generated() + "".join(lines[end:])


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    new = written(text)
    if "--check" in argv:
        if new != text:
            print(f"{DOC}: the settings differ from the schema: run {__file__}", file=sys.stderr)
            return 1
        return 0
    if new != text:
        DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
