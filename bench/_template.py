"""The session bench/fill.py measures, built straight through the store APIs.

``build_template`` logs asks, replies, calls, tool results and ``request``
events (as the agent logs them) with ``store.append``, to exactly n messages,
without sending a request: quick, for a bench that times no request. The
benches that time requests grow their session through the agent loop
(bench/_grow.py) instead.
"""

from __future__ import annotations

import random
from pathlib import Path

from _common import FILES, WORDS, log_message, numbered_lines, prose, write_config
from nodecode.app import App
from nodecode.context import derived
from nodecode.context import model as context_model
from nodecode.log import turns as turn_tree

STORE = "default"
ENVIRON = {"ANTHROPIC_API_KEY": "sk-ant-bench-0000-not-a-real-key-1234567890"}


def _code(rng: random.Random) -> str:
    f = rng.choice(FILES)
    return rng.choice(
        [
            f'(read-file "{f}" :from {rng.randint(1, 400)} :to {rng.randint(401, 800)})',
            f'(shell "rg -n \\"{rng.choice(WORDS)}_{rng.choice(WORDS)}\\" src tests")',
            f'(edit-file "{f}" :old "return {rng.choice(WORDS)}" :new "return {rng.choice(WORDS)}'
            f'_{rng.choice(WORDS)}(value)")',
            '(shell "python -m pytest -q tests/test_parser.py")',
            f'(list-files "{f.rsplit("/", 1)[0]}")',
        ]
    )


def _output(rng: random.Random) -> str:
    chars = rng.randint(350, 1400)
    return numbered_lines(rng, rng.randint(1, 300), chars)


def _turn_plan(rng: random.Random) -> list[tuple]:
    """One turn as the agent logs it: ('request',) marks a round's request event."""
    plan: list[tuple] = [("user", prose(rng, rng.randint(120, 600)))]
    for _ in range(rng.randint(1, 4)):
        plan.append(("request",))
        if rng.random() < 0.4:
            plan.append(("assistant", prose(rng, rng.randint(80, 400))))
        calls = rng.choice([1, 1, 1, 2])
        plan += [("call", _code(rng)) for _ in range(calls)]
        plan += [("tool", _output(rng)) for _ in range(calls)]
    plan += [("request",), ("assistant", prose(rng, rng.randint(400, 1500)))]
    return plan


def _fit(plan: list[tuple], room: int) -> list[tuple]:
    """The plan cut to ``room`` messages, never ending on a call without its result."""
    out: list[tuple] = []
    count = 0
    for item in plan:
        if item[0] != "request":
            if count == room:
                break
            count += 1
        out.append(item)
    while out[-1][0] == "request":
        out.pop()
    if out[-1][0] == "call":
        out[-1] = ("assistant", "Stopping here for now.")
    return out


def build_template(root: Path, n: int, url: str) -> tuple[Path, str, int, int]:
    """A home whose one session holds exactly ``n`` messages, its provider at ``url``;
    returns (home, sid, messages, characters)."""
    home = root / f"template-{n}"
    write_config(home, url)
    app = App.open(home=home, store=STORE, cwd=root, environ=ENVIRON)
    store = app.store
    sid = app.new_session(title=f"bench {n}")
    rng = random.Random(n)
    sent: list[tuple[int, str]] = []  # what each request carried: the whole context so far
    pending: list[int] = []  # call seqs awaiting their result, in order
    count = 0
    while count < n:
        plan = _fit(_turn_plan(rng), n - count)
        number = turn_tree.begin(store, sid, store.last_seq(sid) + 1).number
        for item in plan:
            kind = item[0]
            if kind == "request":
                store.append(
                    sid,
                    "request",
                    turn=number,
                    payload={
                        "provider": "loopback",
                        "model": "loopback-model",
                        "sent": [list(p) for p in sent],
                        "breakpoints": [sent[-1][0]],
                        "retries": 0,
                        "usage": {
                            "input": 40 * len(sent),
                            "output": 120,
                            "cache_read": 38 * len(sent),
                            "cache_write": 90,
                        },
                        "stop_reason": "end_turn",
                    },
                )
                continue
            event = log_message(store, sid, number, kind, item[1], pending)
            sent.append((event.seq, context_model.message_of(event).digest))
            count += 1
        turn_tree.finish(store, sid, number, store.last_seq(sid), "done")
    messages = len(derived.build(store, sid))
    chars = sum(len(m.text) for m in derived.build(store, sid))
    app.close()  # checkpoints the WAL: the template is the one .db file
    return home, sid, messages if messages == n else -messages, chars
