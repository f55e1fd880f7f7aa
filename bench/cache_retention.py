"""SPEC §11: cache retention after an edit, on the simulated Anthropic prompt cache.

Goal: ≥ 95% of the tokens before the first change read from cache; 100% of
the previous request on a plain append.

For each seed a base session is built by real turns: ``Agent.ask`` through the
Anthropic provider against an in-process ``LoopbackServer`` (cache simulation
on, ``cache_min_tokens=1024``), 60 turns of 1–3 rounds whose calls are real
cells (``read-file`` line ranges, ``grep``, ``list-files``) over a generated
workspace, so the session holds 200+ messages. Every body the server received
is kept.

Then each scenario starts from a copy of that home and fresh servers whose
caches are warmed by replaying the base bodies (so no scenario's entries help
another), makes one edit and runs the next real turn:

* file delete / file rewrite at 10%, 50%, 90% of the context: ``takes.export``,
  then in context.txt the block of the message at that depth is removed
  (whatever its role), or the body of the first tool result from there on is
  replaced by a shorter text, then a new ask (the take runs at its request);
* form drop at the same depths: a scripted round calls
  ``(context :drop ((FROM . TO)))`` as a real cell over the whole turn whose
  ask is the first from there on; the next round's request takes it;
* append: a new ask with no edit.

The measured request is the first one that reads the edit. Its unchanged
prefix is the longest run of leading prompt blocks equal to the previous
request's, both cut into blocks and counted by the loopback's own
``anthropic_blocks`` (tiktoken, the server's counter), so numerator and
denominator use the same tokenizer: retention = cache_read / tokens of that
prefix. A plain append's figure is cache_read / tokens of the previous request;
every request of the base build that follows a request of at least 1,024
tokens is such an append too, and counts.

End-only: the same bodies with every ``cache_control`` stripped except the
system prompt's and the last block's (a naive strategy), sent in the same
order by raw httpx to a second server with the same history.

    python bench/cache_retention.py [--json] [--seeds 2] [--turns 60]
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WORDS, Report, arg_parser, prose, write_config  # noqa: E402
from nodecode.agent import Agent, TurnCallbacks  # noqa: E402
from nodecode.app import App  # noqa: E402
from nodecode.context import model as context_model  # noqa: E402
from nodecode.context import take as takes  # noqa: E402
from nodecode.loopback import LoopbackServer  # noqa: E402
from nodecode.loopback.tokens import anthropic_blocks  # noqa: E402

STORE = "default"
MIN_TOKENS = 1024
EDIT_GOAL, APPEND_GOAL = 95.0, 100.0
DEPTHS = (0.10, 0.50, 0.90)
KINDS = ("file delete", "file rewrite", "form drop")
HEADERS = {
    "anthropic-version": "2023-06-01",
    "accept": "text/event-stream",
    "content-type": "application/json",
}

# ------------------------------------------------------------------ realistic texts

_FILES = [
    "src/parser.py",
    "src/lexer.py",
    "src/config.py",
    "src/store.py",
    "src/cli.py",
    "src/render.py",
    "tests/test_parser.py",
    "tests/test_store.py",
]


def _source(rng: random.Random, lines: int) -> str:
    out = []
    for n in range(lines):
        w = [rng.choice(WORDS) for _ in range(4)]
        out.append(
            rng.choice(
                [
                    f"def {w[0]}_{w[1]}({w[2]}, {w[3]}=None):",
                    f"    return {w[0]}.{w[1]}({w[2]})",
                    f"    if {w[0]} is None or not {w[1]}:",
                    f'        raise ValueError("{w[0]} {w[1]} {w[2]}")',
                    f"    {w[0]}_{w[1]} = {w[2]}[{n % 7}]",
                    f"# {' '.join(w)}",
                    "",
                ]
            )
        )
    return "\n".join(out) + "\n"


def make_workspace(ws: Path, rng: random.Random) -> None:
    for f in _FILES:
        path = ws / f
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_source(rng, 400))


def _call(rng: random.Random) -> dict:
    f = rng.choice(_FILES)
    start = rng.randint(1, 360)
    code = rng.choice(
        [
            f'(read-file "{f}" :from {start} :to {start + rng.randint(12, 40)})',
            f'(read-file "{f}" :from {start} :to {start + rng.randint(12, 40)})',
            f'(grep "def {rng.choice(WORDS)}_{rng.choice(WORDS)}" :path "src")',
            '(list-files "src")',
        ]
    )
    return {"code": code}


def turn_rounds(rng: random.Random) -> list[dict]:
    """One turn's scripted replies: 0–2 tool rounds (text + 1–2 calls), then an answer."""
    rounds = []
    for _ in range(rng.choice([0, 1, 1, 2])):
        text = prose(rng, rng.randint(60, 300)) if rng.random() < 0.7 else ""
        rounds.append({"text": text, "calls": [_call(rng) for _ in range(rng.choice([1, 1, 2]))]})
    rounds.append({"text": prose(rng, rng.randint(300, 1500))})
    return rounds


class _Quiet(TurnCallbacks):
    def __init__(self) -> None:
        self.notices: list[str] = []

    def on_notice(self, text: str) -> None:
        self.notices.append(text)


def ask(app: App, sid: str, srv: LoopbackServer, text: str, rounds: list[dict]) -> _Quiet:
    srv.add_rounds(rounds)
    cb = _Quiet()
    result = Agent(app, sid).ask(text, cb)
    if result.status != "done":
        raise RuntimeError(f"the turn ended {result.status}: {result.error}")
    return cb


# ------------------------------------------------------------------ the base session


@dataclass
class Base:
    home: Path
    ws: Path
    sid: str
    bodies: list[dict]
    usages: list[dict]
    messages: int
    seed: int


def build_base(root: Path, seed: int, turns: int) -> Base:
    rng = random.Random(seed)
    home, ws = root / f"base-{seed}" / "home", root / f"base-{seed}" / "ws"
    ws.mkdir(parents=True)
    make_workspace(ws, rng)
    srv = LoopbackServer([], cache_min_tokens=MIN_TOKENS).start()
    try:
        write_config(home, srv.url, auto_approve=["shell"])
        app = App.open(home=home, store=STORE, cwd=ws, environ={})
        sid = app.new_session(title=f"cache bench {seed}")
        for _ in range(turns):
            ask(app, sid, srv, prose(rng, rng.randint(100, 600)), turn_rounds(rng))
        messages = len(context_model.build(app.store, sid))
        app.close()
        reqs = srv.model_requests
        return Base(
            home, ws, sid, [r.body for r in reqs], [dict(r.usage) for r in reqs], messages, seed
        )
    finally:
        srv.stop()


# ------------------------------------------------------------------ the two strategies


def end_only(body: dict) -> dict:
    """The naive strategy: ``cache_control`` only on the system prompt and the last block."""
    out = copy.deepcopy(body)
    out.pop("cache_control", None)
    for tool in out.get("tools") or []:
        tool.pop("cache_control", None)
    for message in out.get("messages") or []:
        if isinstance(message.get("content"), list):
            for part in message["content"]:
                part.pop("cache_control", None)
    last = out["messages"][-1]["content"]
    last[-1]["cache_control"] = {"type": "ephemeral"}
    return out


def send(client: httpx.Client, srv: LoopbackServer, body: dict) -> dict:
    """POST ``body`` as it is, read the stream to its end; the usage the server reported."""
    with client.stream(
        "POST", srv.url + "/v1/messages", content=json.dumps(body), headers=HEADERS
    ) as response:
        for _ in response.iter_lines():
            pass
        if response.status_code != 200:
            raise RuntimeError(f"the server answered {response.status_code}")
    return dict(srv.requests[-1].usage)


def unchanged_prefix(previous: dict, body: dict) -> tuple[int, int]:
    """(blocks, tokens) of the leading prompt blocks ``body`` shares with ``previous``."""
    a, b = anthropic_blocks(previous), anthropic_blocks(body)
    n = 0
    for x, y in zip(a, b, strict=False):
        if x.key != y.key:
            break
        n += 1
    return n, sum(block.tokens for block in b[:n])


def total_tokens(body: dict) -> int:
    return sum(block.tokens for block in anthropic_blocks(body))


# ------------------------------------------------------------------ scenarios


@dataclass
class Outcome:
    kind: str
    depth: float | None
    seed: int
    target: str
    prefix_tokens: int
    prefix_blocks: int
    ours: int
    naive: int
    receipt: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def share(self, read: int) -> float:
        return 100.0 * read / self.prefix_tokens if self.prefix_tokens else 0.0


def _target(app: App, sid: str, depth: float, role: str | None = None):
    """The message at ``depth`` of the context, or the first of ``role`` from there on."""
    messages = context_model.build(app.store, sid)
    at = min(int(round(depth * len(messages))), len(messages) - 1)
    if role is not None:
        at = next((i for i in range(at, len(messages)) if messages[i].role == role), at)
    return messages[at]


def _turn_span(app: App, sid: str, depth: float) -> tuple[int, int]:
    """(first id, last id) of the whole turn whose ask is the first at ``depth`` or after."""
    messages = context_model.build(app.store, sid)
    ask_ = _target(app, sid, depth, "user")
    k = next(i for i, m in enumerate(messages) if m.id == ask_.id)
    end = (
        next((i for i in range(k + 1, len(messages)) if messages[i].role == "user"), len(messages))
        - 1
    )
    return ask_.id, messages[end].id


def _edit_file(app: App, sid: str, target_id: int, rewrite: str | None) -> None:
    """Export, then delete (``rewrite`` None) or rewrite the target's block in context.txt."""
    path = takes.export(app.workspace, sid)
    text = path.read_text(encoding="utf-8")
    nonce = text.split("\n", 1)[0].rstrip("]").split()[-1]
    lines = text.split("\n")
    head = next(i for i, line in enumerate(lines) if line.startswith(f"[[m:{nonce} {target_id} "))
    end = next(
        (i for i in range(head + 1, len(lines)) if lines[i].startswith(f"[[m:{nonce} ")),
        len(lines) - 1,
    )
    if rewrite is None:
        lines[head:end] = []
    else:
        lines[head + 1 : end] = rewrite.split("\n")
    path.write_text("\n".join(lines), encoding="utf-8")


def run_scenario(root: Path, base: Base, kind: str, depth: float | None, n: int) -> Outcome:
    rng = random.Random(f"{base.seed}-{kind}-{depth}")
    home = root / f"run-{n}"
    shutil.copytree(base.home, home)
    ours_srv = LoopbackServer([], cache_min_tokens=MIN_TOKENS).start()
    naive_srv = LoopbackServer([], cache_min_tokens=MIN_TOKENS).start()
    app = None
    try:
        with httpx.Client(timeout=120) as client:
            # Both caches get the history the base session gave them.
            for body in base.bodies:
                replayed = send(client, ours_srv, body)
                send(client, naive_srv, end_only(body))
            if replayed["cache_read"] != base.usages[-1]["cache_read"]:
                raise RuntimeError("the replayed history did not reproduce the base's cache")
            write_config(home, ours_srv.url, auto_approve=["shell"])
            app = App.open(home=home, store=STORE, cwd=base.ws, environ={})
            sid = base.sid
            question = prose(rng, 300)
            target = ""
            if kind == "append":
                ask(app, sid, ours_srv, question, [{"text": prose(rng, 400)}])
                measured_at = len(base.bodies)
            elif kind.startswith("file"):
                m = _target(app, sid, depth, None if kind == "file delete" else "tool")
                target = f"{m.role} {m.id}"
                rewrite = (
                    None
                    if kind == "file delete"
                    else prose(rng, max(40, len(m.text) // 2)) + "\n(shortened by the person)"
                )
                _edit_file(app, sid, m.id, rewrite)
                ask(app, sid, ours_srv, question, [{"text": prose(rng, 400)}])
                measured_at = len(base.bodies)
            else:  # form drop: the agent's own (context :drop …) call, taken next round
                lo, hi = _turn_span(app, sid, depth)
                target = f"turn {lo}–{hi}"
                ask(
                    app,
                    sid,
                    ours_srv,
                    question,
                    [
                        {
                            "text": "Dropping an exchange that is no longer needed.",
                            "calls": [{"code": f"(context :drop (({lo} . {hi})))"}],
                        },
                        {"text": prose(rng, 400)},
                    ],
                )
                measured_at = len(base.bodies) + 1
            reqs = ours_srv.model_requests
            previous, body = reqs[measured_at - 1].body, reqs[measured_at].body
            receipt = ""
            if kind != "append":
                receipt = _receipt(app, sid)
                if "\ntaken at seq" not in receipt:
                    raise RuntimeError(f"{kind} at {depth}: the edit was not taken:\n{receipt}")
            ours = reqs[measured_at].usage["cache_read"]
            # The naive server sees the same sequence of requests, end-only.
            for r in reqs[len(base.bodies) : measured_at + 1]:
                naive_usage = send(client, naive_srv, end_only(r.body))
            naive = naive_usage["cache_read"]
        if kind == "append":
            blocks, tokens = len(anthropic_blocks(previous)), total_tokens(previous)
        else:
            blocks, tokens = unchanged_prefix(previous, body)
        return Outcome(
            kind,
            depth,
            base.seed,
            target,
            tokens,
            blocks,
            ours,
            naive,
            receipt,
            {"blocks": len(anthropic_blocks(body)), "total": total_tokens(body)},
        )
    finally:
        if app is not None:
            app.close()
        ours_srv.stop()
        naive_srv.stop()
        shutil.rmtree(home, ignore_errors=True)


def _receipt(app: App, sid: str) -> str:
    rows = app.store.read(
        "SELECT seq FROM events WHERE session = ? AND kind = 'receipt' ORDER BY seq DESC LIMIT 1",
        (sid,),
    )
    return app.store.event(sid, rows[0][0]).text if rows else "(no receipt)"


def build_appends(base: Base, root: Path) -> list[tuple[int, int, int]]:
    """Every request of the base build after one of ≥ MIN_TOKENS: (previous tokens,
    nodecode's cache_read, end-only's cache_read) — the naive figure from a replay of
    the end-only bodies."""
    srv = LoopbackServer([], cache_min_tokens=MIN_TOKENS).start()
    try:
        with httpx.Client(timeout=120) as client:
            naive = [send(client, srv, end_only(b))["cache_read"] for b in base.bodies]
    finally:
        srv.stop()
    out = []
    for i in range(1, len(base.bodies)):
        prev = total_tokens(base.bodies[i - 1])
        if prev >= MIN_TOKENS:
            out.append((prev, base.usages[i]["cache_read"], naive[i]))
    return out


# ------------------------------------------------------------------ report


def _pct(read: int, tokens: int) -> float:
    return 100.0 * read / tokens if tokens else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=2, help="base sessions (2)")
    parser.add_argument("--turns", type=int, default=60, help="turns per base session (60)")
    args = parser.parse_args(argv)
    report = Report(args.json)
    try:
        with tempfile.TemporaryDirectory(prefix="nodecode-cache-bench-") as tmp:
            root = Path(tmp)
            outcomes: list[Outcome] = []
            appends: list[tuple[int, int, int]] = []
            n = 0
            for seed in range(1, args.seeds + 1):
                t = time.perf_counter()
                base = build_base(root, seed, args.turns)
                tokens = total_tokens(base.bodies[-1])
                report.note(
                    f"  session {seed}: {base.messages} messages, {len(base.bodies)} "
                    f"requests, last request {tokens} tokens, built in "
                    f"{time.perf_counter() - t:.1f} s"
                )
                appends += build_appends(base, root)
                plan = [("append", None)] + [(k, d) for d in DEPTHS for k in KINDS]
                for kind, depth in plan:
                    n += 1
                    o = run_scenario(root, base, kind, depth, n)
                    outcomes.append(o)
                    where = "" if depth is None else f" at {depth:.0%} ({o.target})"
                    report.note(
                        f"    {kind}{where}: prefix {o.prefix_blocks} blocks / "
                        f"{o.prefix_tokens} tokens of {o.extra['total']}; read "
                        f"nodecode {o.ours} ({o.share(o.ours):.1f}%), end-only "
                        f"{o.naive} ({o.share(o.naive):.1f}%)"
                    )
            for depth in DEPTHS:
                rows = [o for o in outcomes if o.depth == depth]
                tokens = sum(o.prefix_tokens for o in rows)
                ours, naive = (
                    _pct(sum(o.ours for o in rows), tokens),
                    _pct(sum(o.naive for o in rows), tokens),
                )
                worst = min(o.share(o.ours) for o in rows)
                ok = worst >= EDIT_GOAL
                report.row(
                    f"cache retention after an edit at {depth:.0%}",
                    round(worst, 2),
                    EDIT_GOAL,
                    ok,
                    unit="%",
                    line=(
                        f"cache retention after an edit at {depth:.0%}: nodecode "
                        f"{ours:.1f}% (worst {worst:.1f}%), end-only {naive:.1f}% "
                        f"(goal ≥ {EDIT_GOAL:g}%, {len(rows)} edits: "
                        f"{', '.join(KINDS)}) {'PASS' if ok else 'FAIL'}"
                    ),
                    nodecode_pct=round(ours, 2),
                    end_only_pct=round(naive, 2),
                    edits=len(rows),
                )
            asks = [o for o in outcomes if o.kind == "append"]
            pooled = appends + [(o.prefix_tokens, o.ours, o.naive) for o in asks]
            total = sum(p for p, _, _ in pooled)
            ours = _pct(sum(r for _, r, _ in pooled), total)
            naive = _pct(sum(r for _, _, r in pooled), total)
            worst = min(_pct(r, p) for p, r, _ in pooled)
            naive_worst = min(_pct(r, p) for p, _, r in pooled)
            ok = worst >= APPEND_GOAL
            report.row(
                "cache retention on a plain append",
                round(worst, 2),
                APPEND_GOAL,
                ok,
                unit="%",
                line=(
                    f"cache retention on a plain append: nodecode {ours:.1f}% "
                    f"(worst {worst:.1f}%), end-only {naive:.1f}% (worst "
                    f"{naive_worst:.1f}%) of the previous request over {len(pooled)} "
                    f"requests (goal {APPEND_GOAL:g}%) {'PASS' if ok else 'FAIL'}"
                ),
                nodecode_pct=round(ours, 2),
                end_only_pct=round(naive, 2),
                requests=len(pooled),
            )
    except Exception as exc:  # noqa: BLE001 — a benchmark reports; it never fails the build
        traceback.print_exc(file=sys.stderr)
        report.row(
            "cache retention",
            None,
            EDIT_GOAL,
            False,
            unit="%",
            error=str(exc),
            line=f"cache retention: ERROR {exc} → FAIL",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
