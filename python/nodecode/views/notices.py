"""The agent's notices as the person in Neovim is told them: one line each,
naming the Neovim commands where the agent's text names its own forms.

The agent reads ``edit it with (context)``; the person gets a notification
saying ``:NodecodeContext`` and ``:NodecodeEvict``. The agent's text itself is
never changed (it is logged and sent as it is); these lines only go to the
notification, the chat keeps the whole text.
"""

from __future__ import annotations

import re
from typing import Any

from nodecode.budget.evict import WARNING_PREFIX

# The agent's forms in texts the person reads, most specific first.
_FOR_PERSON = (
    ("run (context) again", "export it again with :NodecodeContext"),
    ("run (context) first", "export it first with :NodecodeContext"),
    ("(context)", ":NodecodeContext"),
)
_WARNING = re.compile(re.escape(WARNING_PREFIX) + r"(\d+)% of the budget \((\d+) of (\d+) tokens\)")
_BODY = re.compile(r"^(taken|refused|evicted) at seq \d+: (.*)$")


def for_person(text: str) -> str:
    """``text`` with the agent's ``(context)`` forms replaced by the Neovim command."""
    for agent, person in _FOR_PERSON:
        text = text.replace(agent, person)
    return text


def notification(text: str) -> dict[str, Any]:
    """What the person is told of the notice ``text``: {about, level, say}, ``say``
    one line (``about`` is warning, taken, refused, evicted or notice)."""
    warning = _WARNING.match(text)
    if warning:
        percent, fill, budget = warning.groups()
        return {
            "about": "warning",
            "level": "warn",
            "say": f"context at {percent}% of the budget ({fill} of {budget} tokens): "
            ":NodecodeContext to edit it, :NodecodeEvict to evict now",
        }
    lines = [line for line in text.splitlines() if line.strip()]
    body = next((m for m in map(_BODY.match, lines) if m), None)
    if text.startswith("[[receipt ") and body is not None:
        return _receipt(body.group(1), body.group(2), lines)
    first = lines[0] if lines else text
    return {"about": "notice", "level": "warn", "say": for_person(first)}


def _receipt(what: str, rest: str, lines: list[str]) -> dict[str, Any]:
    if what == "refused":
        say = f"your context edit was refused: {for_person(rest)} (the receipt is in the chat)"
        return {"about": "refused", "level": "warn", "say": say}
    if what == "evicted":
        return {"about": "evicted", "level": "info", "say": f"evicted {rest}"}
    tokens = next((line for line in lines if line.startswith("tokens: ")), None)
    say = f"context edit taken: {rest}" + (f" · {tokens}" if tokens else "")
    return {"about": "taken", "level": "info", "say": say}
