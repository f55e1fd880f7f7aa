"""Write DOC/tags for the help files in DOC, as Neovim's :helptags does.

The build (`make install`, lazy.nvim's `build`) runs this so `:help nodecode`
works in any plugin manager, a `dir =` spec included, without needing a
Neovim on PATH: the tags file is derived from the text alone. The rules are
Neovim's (runtime help.c): a tag is `*name*` preceded by the start of the line
or a blank, followed by a blank or the line end, with no blank or `|` inside;
lines of an example (after a line that is `>` or ends in ` >`) are skipped
until a line starts with a non-blank; tags sort bytewise. (Neovim 0.12 also
skips `>lua` examples; nodecode's help puts no tag inside one.)

    python scripts/helptags.py doc
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# The end of a line that opens an example block, as Neovim 0.11 reads it.
EXAMPLE_START = re.compile(r"(?:^| )>$")


def tags_of_line(line: str) -> list[str]:
    """The *tags* defined on one line of a help file."""
    found = []
    start = line.find("*")
    while start != -1:
        end = line.find("*", start + 1)
        if end == -1:
            break
        name = line[start + 1 : end]
        before_ok = start == 0 or line[start - 1] in " \t"
        after_ok = end + 1 == len(line) or line[end + 1] in " \t\r\n"
        if name and not re.search(r"[ \t|]", name) and before_ok and after_ok:
            found.append(name)
            end = line.find("*", end + 1)  # the closing star cannot open a tag
        start = end
    return found


def tags_of_file(path: Path) -> list[str]:
    """Every tag of one help file, examples skipped."""
    found: list[str] = []
    in_example = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if in_example:
            if line == "" or line[0] in " \t\r":
                continue
            in_example = False
        found.extend(tags_of_line(line))
        if EXAMPLE_START.search(line):
            in_example = True
    return found


def first_line_is_utf8(path: Path) -> bool:
    """Neovim writes an encoding line when a file's first line is non-ASCII."""
    with path.open("rb") as f:
        first = f.readline()
    return any(b >= 0x80 for b in first)


def escape(tag: str) -> str:
    """The search pattern's spelling of a tag: backslash before `\\` and `/`."""
    return re.sub(r"([\\/])", r"\\\1", tag)


def helptags(doc: Path) -> str:
    """The text of DOC/tags; a tag defined twice is an error naming both files."""
    entries: dict[str, str] = {}
    files = sorted(doc.glob("*.txt"))
    for path in files:
        for tag in tags_of_file(path):
            if tag in entries:
                raise SystemExit(
                    f"helptags: duplicate tag *{tag}* in {entries[tag]} and {path.name}"
                )
            entries[tag] = path.name
    lines = []
    if any(first_line_is_utf8(p) for p in files):
        lines.append("!_TAG_FILE_ENCODING\tutf-8\t//")
    for tag in sorted(entries, key=lambda t: t.encode()):
        lines.append(f"{tag}\t{entries[tag]}\t/*{escape(tag)}*")
    return "".join(line + "\n" for line in lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/helptags.py DOC_DIR", file=sys.stderr)
        return 2
    doc = Path(argv[0])
    if not doc.is_dir():
        print(f"helptags: {doc} is not a directory", file=sys.stderr)
        return 1
    (doc / "tags").write_text(helptags(doc), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
