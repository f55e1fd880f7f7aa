"""A real session built by real turns against the loopback server, in process."""

from __future__ import annotations

import pytest
from helpers import write_config
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App


class Recorder(TurnCallbacks):
    def __init__(self):
        self.notices: list[str] = []
        self.text = ""

    def on_text(self, chunk: str) -> None:
        self.text += chunk

    def on_notice(self, text: str) -> None:
        self.notices.append(text)


ROUNDS_TURN_1 = [
    {"text": "Reading.", "calls": [{"code": ';; read a\n(read-file "a.txt")'}]},
    {"text": "a.txt says alpha."},
]
ROUNDS_TURN_2 = [
    {"text": "And b.", "calls": [{"code": ';; read b\n(read-file "b.txt")'}]},
    {"text": "b.txt says beta."},
]


class Harness:
    def __init__(self, app: App, srv, sid: str):
        self.app, self.srv, self.sid = app, srv, sid
        self.cb = Recorder()

    def ask(self, text: str, rounds=None):
        if rounds:
            self.srv.add_rounds(rounds)
        return Agent(self.app, self.sid).ask(text, self.cb)

    def last_body(self) -> dict:
        return self.srv.model_requests[-1].body

    def sent_texts(self) -> list[tuple[str, str]]:
        """(role, text) of every block of the last Anthropic request."""
        out = []
        for msg in self.last_body()["messages"]:
            for b in msg["content"]:
                if b["type"] == "text":
                    out.append((msg["role"], b["text"]))
                elif b["type"] == "tool_use":
                    out.append(("tool_use", b["id"]))
                else:
                    out.append(("tool_result", b["content"]))
        return out


@pytest.fixture
def harness(loopback, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    (ws / "b.txt").write_text("beta\n")
    srv = loopback([], cache_min_tokens=1)
    home = write_config(tmp_path / "home", srv, auto_approve=True)
    app = App.open(home, "default", ws, environ={})
    sid = app.new_session("t")
    h = Harness(app, srv, sid)
    h.ask("read a", ROUNDS_TURN_1)
    h.ask("read b", ROUNDS_TURN_2)
    yield h
    app.close()
