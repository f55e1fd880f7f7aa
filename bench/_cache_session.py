"""The cache bench's world: a person's session on the simulated Anthropic cache.

A session is grown by real turns (``Agent.ask``, the Anthropic provider, real
cells over a generated workspace) against an in-process ``LoopbackServer``
whose cache clock is the App's clock (``App.clock``): a manual
``cache.Clock`` that moves only when the person or the model would take time.
Each turn is an ask, 2–4 tool rounds (a sentence or none, then one or two
``read-file`` ranges of ~200–4,000 tokens, or a ``grep``), then a final reply;
rounds are 5–20 s apart (the model's latency and the tools'), turns 1–8
minutes apart (the person reads, thinks, types). Every time is a whole
second, so a replay reproduces the clock bit for bit.

A grown session is kept (its home, every body the server received, the usage
it reported and the time it was sent), and each measured case starts from a
copy of it: a fresh server whose cache is rebuilt by replaying the bodies at
their times — checked exact, usage for usage — and the copied home (whose
ledger is the App's belief of that same cache). The end-only anchor gets the
same bodies stripped to one 5-minute marker on the last block, through a
second server on the same clock.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx
from _common import WORDS, prose
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.context import derived
from nodecode.context import model as context_model
from nodecode.context import take as takes
from nodecode.loopback import LoopbackServer
from nodecode.loopback.cache import CacheRules, Clock

STORE = "default"
MODEL = "claude-sonnet-4-5"  # minimum cacheable prefix 1,024
ENVIRON: dict[str, str] = {}
HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}
USAGE_KEYS = ("input", "cache_read", "cache_write_1h", "cache_write_5m")
ROUND_SECONDS = (5, 20)
PAUSE_SECONDS = (60, 480)
LINE_CHARS = 44  # about 10 tokens a line: a read of 20–400 lines is ~200–4,000 tokens


# ------------------------------------------------------------------ the workspace


def _line(rng: random.Random, n: int) -> str:
    w = [rng.choice(WORDS) for _ in range(5)]
    return rng.choice(
        [
            f"def {w[0]}_{w[1]}({w[2]}, {w[3]}=None):",
            f"    return {w[0]}.{w[1]}({w[2]}, {w[3]})",
            f"    if {w[0]} is None or not {w[1]}_{w[4]}:",
            f'        raise ValueError("{w[0]} {w[1]} {w[2]}")',
            f"    {w[0]}_{w[1]} = {w[2]}[{n % 7}] + {w[3]}",
            f"# {' '.join(w)}",
        ]
    )


def make_workspace(ws: Path, rng: random.Random) -> dict[str, int]:
    """Source files of 300–900 lines; returns each file's line count."""
    lines = {}
    for i in range(10):
        name = f"src/{rng.choice(WORDS)}_{i}.py"
        n = rng.randint(300, 900)
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text("\n".join(_line(rng, k) for k in range(n)) + "\n")
        lines[name] = n
    return lines


def _call(rng: random.Random, files: dict[str, int]) -> str:
    name = rng.choice(sorted(files))
    if rng.random() < 0.15:  # a narrow grep: a few lines
        return f'(grep "def {rng.choice(WORDS)}_{rng.choice(WORDS)}" :path "src")'
    size = min(int(rng.choice([rng.uniform(20, 80), rng.uniform(20, 400)])), files[name] - 1)
    first = rng.randint(1, files[name] - size)
    return f'(read-file "{name}" :from {first} :to {first + size - 1})'


@dataclass
class Turn:
    ask: str
    rounds: list[dict[str, Any]]


def plan_turn(rng: random.Random, files: dict[str, int]) -> Turn:
    """One turn as scripted replies: 2–4 tool rounds, then the final answer."""
    rounds = []
    for _ in range(rng.randint(2, 4)):
        text = prose(rng, rng.randint(60, 400)) if rng.random() < 0.6 else ""
        calls = [_call(rng, files) for _ in range(rng.choice([1, 1, 2]))]
        rounds.append({"text": text, "calls": [{"code": c} for c in calls]})
    rounds.append({"text": prose(rng, rng.randint(300, 1500))})
    return Turn(prose(rng, rng.randint(80, 600)), rounds)


# ------------------------------------------------------------------ time


class Timeline:
    """The session's clock and the time each model request was sent: a request
    is stamped with the clock as it stood when time next moved."""

    def __init__(self, clock: Clock, server: LoopbackServer) -> None:
        self.clock, self.server = clock, server
        self.times: list[float] = []

    def stamp(self) -> None:
        now = self.clock.now()
        self.times += [now] * (len(self.server.model_requests) - len(self.times))

    def advance(self, seconds: int) -> None:
        self.stamp()
        self.clock.advance(seconds)


class Paced(TurnCallbacks):
    """Moves the clock 5–20 s once per round, when its first result is in."""

    def __init__(self, timeline: Timeline, rng: random.Random) -> None:
        self.timeline, self.rng = timeline, rng
        self.paced = -1
        self.notices: list[str] = []

    def on_result(self, seq: int, text: str, error: bool) -> None:
        sent = len(self.timeline.server.model_requests)
        if sent != self.paced:
            self.paced = sent
            self.timeline.advance(self.rng.randint(*ROUND_SECONDS))

    def on_notice(self, text: str) -> None:
        self.notices.append(text)


def ask(app: App, sid: str, timeline: Timeline, rng: random.Random, turn: Turn) -> Paced:
    timeline.server.add_rounds(turn.rounds)
    cb = Paced(timeline, rng)
    result = Agent(app, sid).ask(turn.ask, cb)
    if result.status != "done":
        raise RuntimeError(f"a turn ended {result.status}: {result.error}")
    timeline.stamp()
    return cb


# ------------------------------------------------------------------ growing


def write_config(home: Path, url: str, **settings: Any) -> None:
    config = {
        "provider": "loopback",
        "model": MODEL,
        "auto_approve": ["shell"],
        **settings,
        "providers": {"loopback": {"type": "anthropic", "base_url": url, "api_key_env": None}},
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.jsonc").write_text("// cache bench\n" + json.dumps(config, indent=2))


@dataclass
class Grown:
    """A session after its last reply: the home (App closed), what the server
    received and reported, and when."""

    seed: int
    turns: int
    reading: str
    home: Path
    ws: Path
    sid: str
    bodies: list[dict]
    usages: list[dict]
    times: list[float]
    messages: int
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def end(self) -> float:
        return self.times[-1]

    @cached_property
    def wire(self) -> list[tuple[bytes, bytes]]:
        """Each request as replayed: nodecode's body and the anchor's, serialized once."""
        return [(_wire(b), _wire(end_only(b))) for b in self.bodies]


def grow(root: Path, seed: int, turns: int, reading: str, **settings: Any) -> Grown:
    """``turns`` real turns of seed ``seed`` under refresh reading ``reading``."""
    rng = random.Random(f"{seed}-session")
    pace = random.Random(f"{seed}-pace")
    base = root / f"grown-{seed}-{turns}-{reading}"
    home, ws = base / "home", base / "ws"
    ws.mkdir(parents=True)
    files = make_workspace(ws, rng)
    clock = Clock(start=0.0)
    srv = LoopbackServer([], clock=clock, cache_rules=CacheRules(refresh=reading)).start()
    try:
        write_config(home, srv.url, **settings)
        app = App.open(home=home, store=STORE, cwd=ws, environ=ENVIRON)
        app.clock = clock.now
        timeline = Timeline(clock, srv)
        try:
            sid = app.new_session(title=f"cache bench {seed}")
            for k in range(turns):
                if k:
                    timeline.advance(pace.randint(*PAUSE_SECONDS))
                ask(app, sid, timeline, pace, plan_turn(rng, files))
            messages = len(derived.build(app.store, sid))
        finally:
            app.close()
        reqs = srv.model_requests
        bad = [r.status for r in reqs if r.status != 200]
        if bad:
            raise RuntimeError(f"the server refused requests of the grown session: {bad}")
        return Grown(
            seed,
            turns,
            reading,
            home,
            ws,
            sid,
            [r.body for r in reqs],
            [dict(r.usage) for r in reqs],
            list(timeline.times),
            messages,
            dict(settings),
        )
    finally:
        srv.stop()


# ------------------------------------------------------------------ the anchor and replay


def end_only(body: dict) -> dict:
    """The anchor's request: every ``cache_control`` removed, one 5-minute marker on
    the last block."""
    out = copy.deepcopy(body)
    out.pop("cache_control", None)
    for part in [*(out.get("tools") or []), *(out.get("system") or [])]:
        if isinstance(part, dict):
            part.pop("cache_control", None)
    for message in out.get("messages") or []:
        if isinstance(message.get("content"), list):
            for part in message["content"]:
                part.pop("cache_control", None)
    last = out["messages"][-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return out


def _wire(body: dict) -> bytes:
    return json.dumps({**body, "stream": False}).encode()


def send(client: httpx.Client, srv: LoopbackServer, body: dict | bytes) -> dict:
    """POST ``body`` as it is (not streamed); the usage the server recorded."""
    data = body if isinstance(body, bytes) else _wire(body)
    response = client.post(srv.url + "/v1/messages", content=data, headers=HEADERS)
    if response.status_code != 200:
        raise RuntimeError(f"the server answered {response.status_code}: {response.text[:200]}")
    return dict(srv.model_requests[-1].usage)


def figures(usage: dict) -> tuple[int, ...]:
    return tuple(int(usage.get(k) or 0) for k in USAGE_KEYS)


@dataclass
class Case:
    """One fresh session, ready for its edit: the copied home open on ``app``,
    nodecode's server and the anchor's, both caches rebuilt to the grown state."""

    grown: Grown
    clock: Clock
    ours: LoopbackServer
    anchor: LoopbackServer
    client: httpx.Client
    app: App
    anchor_usages: list[dict]

    def close(self) -> None:
        self.app.close()
        self.client.close()
        self.ours.stop()
        self.anchor.stop()


def start_case(grown: Grown, home: Path) -> Case:
    """Copy the grown home to ``home`` and replay the session into fresh servers;
    raises when the replay does not reproduce every usage the session saw."""
    clock = Clock(start=0.0)
    rules = CacheRules(refresh=grown.reading)
    ours = LoopbackServer([], clock=clock, cache_rules=rules).start()
    anchor = LoopbackServer([], clock=clock, cache_rules=rules).start()
    client = httpx.Client(timeout=120)
    try:
        anchor_usages = []
        for i, ((body, anchored), at) in enumerate(zip(grown.wire, grown.times, strict=True)):
            clock.advance(at - clock.now())
            got = send(client, ours, body)
            if figures(got) != figures(grown.usages[i]):
                raise RuntimeError(
                    f"replay is not exact at request {i}: {figures(got)} != "
                    f"{figures(grown.usages[i])}"
                )
            anchor_usages.append(send(client, anchor, anchored))
        shutil.copytree(grown.home, home)
        write_config(home, ours.url, **grown.settings)
        app = App.open(home=home, store=STORE, cwd=grown.ws, environ=ENVIRON)
        app.clock = clock.now
    except BaseException:
        client.close()
        ours.stop()
        anchor.stop()
        raise
    return Case(grown, clock, ours, anchor, client, app, anchor_usages)


# ------------------------------------------------------------------ edits through the file


def edit_context(app: App, sid: str, remove: set[int], rewrite: dict[int, str]) -> None:
    """As a person would: export context.txt, delete the blocks of ``remove`` and
    replace the bodies of ``rewrite``, save."""
    path = takes.export(app.workspace, sid)
    lines = path.read_text(encoding="utf-8").split("\n")
    nonce = lines[0].rstrip("]").split()[-1]
    heads = [i for i, line in enumerate(lines) if line.startswith(f"[[m:{nonce} ")]
    out = lines[: heads[0]]
    for k, head in enumerate(heads):
        end = heads[k + 1] if k + 1 < len(heads) else len(lines)
        mid = int(lines[head].split()[1])
        if mid in remove:
            continue
        if mid in rewrite:
            out += [lines[head], *rewrite[mid].split("\n")]
        else:
            out += lines[head:end]
    if out[-1] != "":
        out.append("")
    path.write_text("\n".join(out), encoding="utf-8")


def result_of(app: App, sid: str, call: int) -> context_model.Message:
    """The result message of call ``call``."""
    messages = derived.build(app.store, sid)
    return next(m for m in messages if m.role == "tool" and m.call_id == call)
