"""Cache breakpoint placement (cache.plan) on the loopback's simulation of
Anthropic's prompt cache (loopback.cache), whose clock the tests move.

The requests a real agent session sends are what the simulated provider
received (``LoopbackServer.requests``): their ``cache_control`` markers, and
the ``cache_read`` the simulation reported for them. The property test plans
random contexts, ledgers and clocks and sends each plan to the simulation's
own rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli, write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.cache import plan as cache_plan
from nodecode.context import derived
from nodecode.context import model as context_model
from nodecode.context import take as takes
from nodecode.loopback import LoopbackServer
from nodecode.loopback.cache import CacheRules, Clock, PromptCache, breakpoints
from nodecode.loopback.tokens import Block, anthropic_blocks

MODEL = "claude-sonnet-4-5"  # minimum cacheable prefix 1,024 tokens
READINGS = ("found", "prefix")
SHORT = {"type": "ephemeral"}
LONG = {"type": "ephemeral", "ttl": "1h"}


# ------------------------------------------------------------------ plan(), unit and property


def _context(sizes: list[int], names: list[str]) -> tuple[list[str], list[int]]:
    tokens, total = [], 0
    for n in sizes:
        total += n
        tokens.append(total)
    return cache_plan.chain("seed", names), tokens


def test_spare_breakpoints_refresh_old_anchors_not_prefixes_too_short_to_cache():
    # The system prompt and the first small messages are under the minimum: no
    # entry can ever live there, so a breakpoint there is wasted. The anchors
    # above it hold 1-hour entries 40 minutes old, due for a refresh.
    sizes = [728, 40, 60] + [1500] * 27
    prefix, tokens = _context(sizes, [f"m{i}" for i in range(len(sizes))])
    ledger = cache_plan.Ledger()
    now = 2400.0
    anchors = cache_plan.keep_set(tokens, [True] * len(tokens), len(tokens) - 2)
    old = [i for i in anchors if tokens[i] >= 1024]
    for model in ledger.models:
        for i in old:
            model.entries[prefix[i]] = cache_plan.Entry(3600.0, 3600.0)  # written at 0
        model.entries[prefix[-2]] = cache_plan.Entry(300.0, now + 290.0)  # the last request's end

    got = cache_plan.plan(prefix, tokens, [True] * len(tokens), ledger, now, minimum=1024)

    refreshed = [m.index for m in got.marks if m.index in old]
    assert len(got.marks) == cache_plan.MAX_MARKS, got.marks
    assert refreshed, f"no old anchor refreshed: {got.marks}"


STEP = st.tuples(
    st.sampled_from(["append", "append", "edit", "delete"]),
    st.lists(st.integers(1, 3000), min_size=1, max_size=8),  # sizes of appended blocks
    st.floats(0.0, 1.0),  # where an edit or a deletion lands
    st.sampled_from([0, 5, 20, 120, 290, 310, 900, 1250, 3500, 3700, 7300]),  # seconds since
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(STEP, min_size=1, max_size=24),
    mode=st.sampled_from(cache_plan.MODES),
    minimum=st.sampled_from([512, 1024, 2048, 4096]),
    reading=st.sampled_from(READINGS),
)
def test_every_plan_is_a_request_the_provider_accepts(steps, mode, minimum, reading):
    """At most 4 breakpoints, no 1-hour entry after a 5-minute one, the end always
    marked; and what the ledger expects to read the simulation does read."""
    clock = Clock(start=0.0)
    cache = PromptCache(CacheRules(refresh=reading, min_tokens=minimum), clock)
    ledger = cache_plan.Ledger()
    names: list[str] = ["system"]
    sizes: list[int] = [700]
    fresh = 0
    for action, added, where, seconds in steps:
        clock.advance(seconds)
        at = min(1 + int(where * (len(names) - 1)), len(names) - 1)
        if action == "edit" and len(names) > 1:
            fresh += 1
            names[at] = f"edited-{fresh}"
        elif action == "delete" and len(names) > 1:
            del names[at], sizes[at]
        for n in added:
            fresh += 1
            names.append(f"block-{fresh}")
            sizes.append(n)
        prefix, tokens = _context(sizes, names)
        now = clock.now()
        got = cache_plan.plan(
            prefix, tokens, [True] * len(prefix), ledger, now, mode=mode, minimum=minimum
        )

        indices = [m.index for m in got.marks]
        assert 1 <= len(got.marks) <= 4 and indices == sorted(set(indices))
        assert indices[-1] == len(prefix) - 1
        ttls = [m.ttl for m in got.marks]
        assert ttls == sorted(ttls, reverse=True), f"a 1-hour entry after a 5-minute one: {ttls}"
        if mode == "5m":
            assert set(ttls) == {300.0}
        if mode == "1h":
            assert ttls[-1] == 3600.0
        blocks = [Block(names[i], sizes[i]) for i in range(len(names))]
        for m in got.marks:
            blocks[m.index] = Block(names[m.index], sizes[m.index], "1h" if m.ttl > 300 else "5m")
        usage = cache.apply("model", blocks, breakpoints(blocks))  # raises on a 400
        if got.read >= 0 and tokens[got.read] >= minimum:
            assert usage.read >= tokens[got.read], (got, usage)
        ledger.record(prefix, tokens, got.marks, now, minimum)


# ------------------------------------------------------------------ real sessions


class Paced(TurnCallbacks):
    """Moves the clock ``seconds`` once the first result of each round is in, as
    the model and the tools take time."""

    def __init__(self, clock: Clock, server: LoopbackServer, seconds: float = 10.0) -> None:
        self.clock, self.server, self.seconds = clock, server, seconds
        self.paced = -1
        self.notices: list[str] = []

    def on_result(self, seq: int, text: str, error: bool) -> None:
        if len(self.server.model_requests) != self.paced:
            self.paced = len(self.server.model_requests)
            self.clock.advance(self.seconds)

    def on_notice(self, text: str) -> None:
        self.notices.append(text)


def _source(n: int, lines: int) -> str:
    return "".join(
        f"def step_{n}_{k}(value, other=None):  # part {n} line {k}\n" for k in range(lines)
    )


class Session:
    """A home, a workspace of source files and a session, on ``clock``."""

    def __init__(
        self, tmp_path: Path, server: LoopbackServer, clock: Clock, ptype="anthropic", **config
    ) -> None:
        self.ws = tmp_path / "ws"
        self.ws.mkdir()
        for n in range(6):
            (self.ws / f"part{n}.py").write_text(_source(n, 120))  # ~2,000 tokens each
        self.home = write_config(tmp_path / "home", server, ptype, model=MODEL, **config)
        self.server, self.clock = server, clock
        self.app = App.open(home=self.home, cwd=self.ws, environ={})
        self.app.clock = clock.now
        self.sid = self.app.new_session(title="cache")
        self.turns = 0

    def turn(self, files: list[int]) -> Paced:
        """An ask, one round per file read, and a final answer."""
        self.turns += 1
        rounds = [
            {"text": f"Reading part {n}.", "calls": [{"code": f'(read-file "part{n}.py")'}]}
            for n in files
        ]
        self.server.add_rounds([*rounds, {"text": f"Turn {self.turns} done. " * 20}])
        cb = Paced(self.clock, self.server)
        result = Agent(self.app, self.sid).ask(f"Question {self.turns}: " + "why? " * 30, cb)
        assert result.status == "done", result
        return cb

    def messages(self) -> list[context_model.Message]:
        return derived.build(self.app.store, self.sid)

    def edit_file(self, remove: set[int] = frozenset(), rewrite: dict[int, str] | None = None):
        """Export context.txt, delete and rewrite blocks in it as a person would."""
        path = takes.export(self.app.workspace, self.sid)
        lines = path.read_text().split("\n")
        nonce = lines[0].rstrip("]").split()[-1]
        heads = [i for i, line in enumerate(lines) if line.startswith(f"[[m:{nonce} ")]
        out = lines[: heads[0]]
        for k, head in enumerate(heads):
            end = heads[k + 1] if k + 1 < len(heads) else len(lines)
            mid = int(lines[head].split()[1])
            body = (rewrite or {}).get(mid)
            if mid not in remove:
                out += lines[head:end] if body is None else [lines[head], *body.split("\n")]
        path.write_text("\n".join(out).rstrip("\n") + "\n")


def _marks(body: dict) -> list[dict]:
    parts = [*body.get("tools", []), *body.get("system", [])]
    parts += [p for m in body["messages"] if isinstance(m["content"], list) for p in m["content"]]
    return [p["cache_control"] for p in parts if isinstance(p, dict) and "cache_control" in p]


def _unchanged(previous: dict, body: dict) -> int:
    """Tokens of the leading blocks ``body`` shares with ``previous`` (the server's count)."""
    n = 0
    for a, b in zip(anthropic_blocks(previous), anthropic_blocks(body), strict=False):
        if a.key != b.key:
            break
        n += b.tokens
    return n


@pytest.mark.parametrize("reading", READINGS)
def test_a_session_with_edits_and_clock_jumps_never_breaks_the_breakpoint_rules(
    tmp_path, loopback, reading
):
    clock = Clock(start=0.0)
    srv = loopback([], clock=clock, cache_rules=CacheRules(refresh=reading))
    s = Session(tmp_path, srv, clock)
    for k, jump in enumerate([0, 40, 290, 310, 1250, 3700, 30, 7300]):
        clock.advance(jump)
        if k == 3:  # a person deletes the first round of turn 2
            call = next(m for m in s.messages() if m.role == "call" and m.turn == 2)
            result = next(m for m in s.messages() if m.role == "tool" and m.call_id == call.id)
            s.edit_file(remove={call.id, result.id})
        if k == 5:  # and rewrites the oldest tool result
            result = next(m for m in s.messages() if m.role == "tool")
            s.edit_file(rewrite={result.id: "shorter, by hand"})
        cb = s.turn([k % 6, (k + 2) % 6][: 1 + k % 2])
        if k in (3, 5):
            assert any("taken at seq" in n for n in cb.notices), cb.notices

    received = srv.model_requests
    assert [r.status for r in received] == [200] * len(received)
    for r in received:
        ttls = ["1h" if m.get("ttl") == "1h" else "5m" for m in _marks(r.body)]
        assert 1 <= len(ttls) <= 4
        assert "5m" not in ttls or "1h" not in ttls[ttls.index("5m") :], ttls
    assert sum(r.usage["cache_read"] for r in received) > 0


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
@pytest.mark.parametrize("mode", ["5m", "1h"])
def test_the_cache_switch_sets_the_entries_lifetime(tmp_path, loopback, ptype, mode):
    clock = Clock(start=0.0)
    srv = loopback([], clock=clock)
    s = Session(tmp_path, srv, clock, ptype, cache=mode)
    for jump in (0, 200, 900):
        clock.advance(jump)
        s.turn([0, 1])

    bodies = [r.body for r in srv.model_requests]
    assert len(bodies) == 9
    if ptype == "openai":  # OpenAI-compatible servers cache on their own: nothing to mark
        assert all("cache_control" not in json.dumps(b) for b in bodies)
        return
    for body in bodies:
        marks = _marks(body)
        if mode == "5m":
            assert marks and all(m == SHORT for m in marks), marks
        else:
            last = body["messages"][-1]["content"][-1]
            assert last.get("cache_control") == LONG, marks


@pytest.mark.parametrize("reading", READINGS)
def test_an_edit_half_an_hour_after_the_last_reply_reads_the_unchanged_prefix(
    tmp_path, loopback, reading
):
    clock = Clock(start=0.0)
    srv = loopback([], clock=clock, cache_rules=CacheRules(refresh=reading))
    s = Session(tmp_path, srv, clock)
    for k in range(7):  # 48 minutes: the first turns' entries need a refresh to last
        clock.advance(480 if k else 0)  # the person takes 8 minutes between turns
        s.turn([k % 6, (k + 3) % 6])
    previous = srv.model_requests[-1].body

    clock.advance(1800)
    results = [m for m in s.messages() if m.role == "tool"]
    target = results[3]  # turn 2's second read, some 9,000 tokens in
    s.edit_file(rewrite={target.id: "the person kept only this line"})
    cb = s.turn([])

    assert any("taken at seq" in n for n in cb.notices), cb.notices
    measured = srv.model_requests[-1]
    unchanged = _unchanged(previous, measured.body)
    assert unchanged > 8000
    assert measured.usage["cache_read"] >= 0.95 * unchanged, (measured.usage, unchanged)


@pytest.mark.parametrize("reading", READINGS)
def test_a_round_just_after_a_big_result_is_kept_half_an_hour(tmp_path, loopback, reading):
    # The big result ends its request as a 5-minute entry (the next round reads it
    # seconds later), and a 5-minute entry is never made a 1-hour one: what comes
    # just after it must carry the 1-hour entries, or deleting that round half an
    # hour later loses the big result.
    clock = Clock(start=0.0)
    srv = loopback([], clock=clock, cache_rules=CacheRules(refresh=reading))
    s = Session(tmp_path, srv, clock)
    (s.ws / "big.py").write_text(_source(9, 150))  # ~2,500 tokens: over 4% of the context
    (s.ws / "tiny.py").write_text("VALUE = 1\n")
    for k in range(4):
        clock.advance(120 if k else 0)
        s.turn([k, k + 1])
    srv.add_rounds(
        [
            {"text": "The big one.", "calls": [{"code": '(read-file "big.py")'}]},
            {"text": "And the value.", "calls": [{"code": '(read-file "tiny.py")'}]},
            {"text": "Done: " + "the value is one. " * 20},
        ]
    )
    clock.advance(120)
    assert (
        Agent(s.app, s.sid).ask("Look at big.py, then tiny.py.", Paced(clock, srv)).status == "done"
    )
    previous = srv.model_requests[-1].body

    clock.advance(1800)
    call = [m for m in s.messages() if m.role == "call"][-1]
    result = next(m for m in s.messages() if m.role == "tool" and m.call_id == call.id)
    s.edit_file(remove={call.id, result.id})
    cb = s.turn([])

    assert any("taken at seq" in n for n in cb.notices), cb.notices
    measured = srv.model_requests[-1]
    unchanged = _unchanged(previous, measured.body)
    assert measured.usage["cache_read"] >= 0.95 * unchanged, (measured.usage, unchanged)


def test_status_shows_what_the_last_request_read_and_wrote_and_where_the_cache_ends(
    tmp_path, loopback, workspace
):
    srv = loopback(
        [{"text": "first answer " * 200}, {"text": "second answer"}]  # real time: entries live
    )
    home = write_config(tmp_path / "home", srv, model=MODEL)
    assert run_cli("ask", "the first question " * 120, home=home, cwd=workspace).returncode == 0
    assert run_cli("ask", "the second question", home=home, cwd=workspace).returncode == 0

    out = run_cli("status", home=home, cwd=workspace)

    assert out.returncode == 0, out.stderr
    last = srv.model_requests[-1].usage
    prompt = last["input"] + last["cache_read"] + last["cache_write"]
    assert last["cache_read"] > 0 and last["cache_write"] > 0
    assert (
        f"read {last['cache_read']} of {prompt} prompt tokens from cache · "
        f"wrote {last['cache_write']}" in out.stdout
    ), out.stdout
    app = App.open(home=home, cwd=workspace, environ={})
    try:
        sid = app.store.read("SELECT id FROM sessions")[0][0]
        ask = next(m for m in derived.build(app.store, sid) if m.text == "the second question")
    finally:
        app.close()
    assert f"next request: cached through message {ask.id}" in out.stdout, out.stdout
