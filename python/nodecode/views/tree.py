"""The session tree as a person reads it: one line per turn, branches indented.

```
1  read a · seq 1–6 · done · $0.0123
├─ 2  read b · seq 7–12 · done · $0.0040 (undone)
└─ 3  write c · seq 13–20 · done · $0.0051 ← head
```

A chain of turns stays in one column; where a turn has several children each
child's subtree hangs under ``├─``/``└─``. Turns off the head's path are the
branches an undo (or a continue elsewhere) left: ``(undone)``. A turn whose
requests had a price shows what they cost (``providers.pricing``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from nodecode import recall
from nodecode.log import sessions
from nodecode.log import turns as turn_tree
from nodecode.log.store import Store
from nodecode.providers import pricing
from nodecode.views.titles import ask_title


@dataclass(frozen=True)
class Node:
    number: int
    parent: int | None
    session: str
    ask: str
    first_seq: int
    last_seq: int | None
    status: str
    on_path: bool
    head: bool
    cost: float | None = None  # its requests' dollars, when any was priced

    @property
    def span(self) -> str:
        return f"seq {self.first_seq}–{self.last_seq if self.last_seq is not None else '…'}"

    @property
    def spent(self) -> str | None:
        """``$0.0123``: what its requests cost (None: none had a price)."""
        return pricing.money(self.cost) if self.cost is not None else None

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "span": self.span,
            "spent": self.spent,
            "title": ask_title(self.ask),
        }


def ask_text(store: Store, turn: turn_tree.Turn) -> str:
    """The turn's ask, whole ("" when it has none)."""
    rows = store.read(
        "SELECT text FROM events WHERE session = ? AND turn = ? AND role = 'user' "
        "AND seq >= ? ORDER BY seq LIMIT 1",
        (turn.session, turn.number, turn.first_seq),
    )
    return rows[0][0] if rows else ""


def nodes(store: Store, sid: str) -> list[Node]:
    """Every turn the session can see, by number, marked on the head's path or not."""
    head = sessions.get(store, sid).head
    on_path = {t.number for t in turn_tree.path(store, sid)}
    spending: dict[str, recall.Spent] = {}

    def cost(t: turn_tree.Turn) -> float | None:
        if t.session not in spending:
            spending[t.session] = recall.spent(store, t.session)
        total = spending[t.session].turns.get(t.number)
        return total.dollars if total is not None and total.priced else None

    return [
        Node(
            t.number,
            t.parent,
            t.session,
            ask_text(store, t),
            t.first_seq,
            t.last_seq,
            t.status,
            t.number in on_path,
            t.number == head,
            cost(t),
        )
        for _, t in sorted(turn_tree.visible(store, sid).items())
    ]


def render(tree: list[Node]) -> str:
    """The tree as text, one line per turn (no trailing newline)."""
    known = {n.number for n in tree}
    children: dict[int | None, list[Node]] = {}
    for n in tree:
        children.setdefault(n.parent if n.parent in known else None, []).append(n)
    lines: list[str] = []
    if tree and not any(n.head for n in tree):
        lines.append("(before the first turn) ← head")
    _chain(children.get(None, []), children, "", lines)
    return "\n".join(lines)


def _chain(
    siblings: list[Node], children: dict[int | None, list[Node]], prefix: str, lines: list[str]
) -> None:
    """Draw ``siblings``: one alone continues the column; several branch."""
    while len(siblings) == 1:  # a loop, not recursion: chains can be thousands long
        node = siblings[0]
        lines.append(prefix + _label(node))
        siblings = children.get(node.number, [])
    for i, node in enumerate(siblings):
        last = i == len(siblings) - 1
        lines.append(prefix + ("└─ " if last else "├─ ") + _label(node))
        _chain(children.get(node.number, []), children, prefix + ("   " if last else "│  "), lines)


def _label(n: Node) -> str:
    mark = " ← head" if n.head else ("" if n.on_path else " (undone)")
    spent = f" · {n.spent}" if n.spent is not None else ""
    return f"{n.number}  {ask_title(n.ask)} · {n.span} · {n.status}{spent}{mark}"
