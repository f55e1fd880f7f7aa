"""Driver for tests/test_reliability_crash.py: export, edit and take in a loop until killed.

    python tests/reliability_take_driver.py HOME WORKSPACE SESSION

Each round exports the context, edits context.txt the way a person would (a
note, a deleted note, a broken header that is refused), and takes the edit,
as the start of a request does. It prints ``ready`` once, then one line per
take, and never stops by itself: the test SIGKILLs it at random moments.
"""

from __future__ import annotations

import sys
from itertools import count

from nodecode.app import App
from nodecode.context import take as takes
from nodecode.context.fileformat import split
from nodecode.paths import write_private


def nonce_of(text: str) -> str:
    return text.split("\n", 1)[0].split()[-1].rstrip("]")


def edited(text: str, n: int) -> str:
    """Round ``n``'s edit of an export: add a note, delete a note, or break a header."""
    nonce = nonce_of(text)
    blocks = split(text, nonce).blocks
    kind = n % 3
    if kind == 0:  # a note under the last block
        return text + f"[[note]]\ndriver note {n}\n"
    if kind == 1:  # delete the oldest note block, if any (keeps the context small)
        notes = [b for b in blocks if b.role == "note"]
        if not notes:
            return text + f"[[note]]\ndriver note {n}\n"
        lines = text.split("\n")
        start = notes[0].line - 1
        end = start + 1
        while end < len(lines) and not lines[end].startswith(f"[[m:{nonce} "):
            end += 1
        return "\n".join(lines[:start] + lines[end:])
    # a header whose role changed: refused
    first = blocks[0]
    wrong = "note" if first.role != "note" else "user"
    return text.replace(
        f"[[m:{nonce} {first.id} {first.role}]]", f"[[m:{nonce} {first.id} {wrong}]]", 1
    )


def main(home: str, cwd: str, sid: str) -> int:
    app = App.open(home, "default", cwd, environ={})
    print("ready", flush=True)
    for n in count():
        path = takes.export(app.workspace, sid)
        write_private(path, edited(path.read_text(encoding="utf-8"), n))
        if n % 4 == 3:
            takes.export(app.workspace, sid)  # the export records the edit as pending first
        report = takes.take(app.workspace, sid, None)
        print(f"take {n} {'taken' if report.taken else 'refused'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
