"""What the budget and eviction tests share (no tests here): a session of real
turns against the loopback server with a small window, and a structural check
of what the provider received."""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any
from unittest import mock

from helpers import write_config
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App

WORDS = 60  # words per workspace file: a read costs ~300 tokens


class Recorder(TurnCallbacks):
    def __init__(self) -> None:
        self.notices: list[str] = []

    def on_notice(self, text: str) -> None:
        self.notices.append(text)


def read_round(n: int, code: str | None = None, text: str | None = None) -> dict:
    return {
        "text": text or f"Reading {n}.",
        "calls": [{"code": code or f';; read f{n}\n(read-file "f{n}.txt")'}],
    }


class Session:
    """A home, workspace and session whose config points at ``srv``."""

    def __init__(
        self,
        tmp: Path,
        srv: Any,
        *,
        ptype: str = "anthropic",
        window: int | None = 4000,
        files: int = 30,
        config: dict | None = None,
        provider: dict | None = None,
    ):
        self.srv, self.ptype, self.tmp = srv, ptype, tmp
        self.ws = tmp / "ws"
        self.ws.mkdir(parents=True, exist_ok=True)
        for i in range(1, files + 1):
            (self.ws / f"f{i}.txt").write_text(
                " ".join(f"word{i}x{j}" for j in range(WORDS)) + "\n"
            )
        self.home = write_config(tmp / "home", srv, ptype, auto_approve=True, **(config or {}))
        if provider:
            self.set_provider(**provider)
        self.environ = {"NODECODE_CONTEXT_TOKENS": str(window)} if window else {}
        self.app = App.open(self.home, "default", self.ws, environ=self.environ)
        self.sid = self.app.new_session("budget")
        self.cb = Recorder()

    def set_provider(self, **fields: Any) -> None:
        """Change providers.loopback in config.jsonc (``models``, ``models_dev``…)."""
        path = self.home / "config.jsonc"
        raw = json.loads(path.read_text().split("\n", 1)[1])
        raw["providers"]["loopback"].update(fields)
        for key in [k for k, v in fields.items() if v is None]:
            del raw["providers"]["loopback"][key]
        path.write_text("// test config\n" + json.dumps(raw, indent=2))

    def reopen(self, environ: dict[str, str] | None = None) -> App:
        self.app.close()
        self.environ = self.environ if environ is None else environ
        self.app = App.open(self.home, "default", self.ws, environ=self.environ)
        return self.app

    def ask(self, text: str, rounds: list[dict]):
        self.srv.add_rounds(rounds)
        return Agent(self.app, self.sid).ask(text, self.cb)

    def read_turn(self, n: int, **kw):
        return self.ask(f"read f{n}", [read_round(n, **kw), {"text": f"f{n} read."}])

    def events(self, *kinds: str):
        return self.app.store.events(self.sid, kinds=kinds or None)

    def close(self) -> None:
        self.app.close()


def cli(*args: str, home: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``nodecode --home HOME ARGS…`` in this process (the CLI's own ``main``):
    exit status, stdout, stderr. One subprocess test covers the process itself."""
    from nodecode.cli import main

    with mock.patch.dict(os.environ):
        for key in (
            "NODECODE_CONTEXT_TOKENS",
            "NODECODE_SESSION",
            "NODECODE_MODELS_URL",
            "NODECODE_PROVIDER",
            "NODECODE_MODEL",
        ):
            os.environ.pop(key, None)
        os.environ.update(env or {})
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["--home", str(home), *args])
    return code, out.getvalue(), err.getvalue()


# -- what the provider received -------------------------------------------------


def texts(body: dict) -> list[str]:
    """Every text the request carries (text blocks, results, user/tool contents)."""
    out: list[str] = []
    for msg in body["messages"]:
        content = msg.get("content")
        if isinstance(content, str):
            out.append(content)
        for b in content if isinstance(content, list) else []:
            if b.get("type") == "text":
                out.append(b["text"])
            elif b.get("type") == "tool_result":
                out.append(b["content"])
    return out


def prompt_total(ptype: str, usage: dict) -> int:
    if ptype == "anthropic":
        return usage["input"] + usage["cache_read"] + usage["cache_write"]
    return usage["input"]


def check_valid(ptype: str, body: dict) -> None:
    """Every call answered next, no empty texts, a user message first."""
    msgs = body["messages"]
    if ptype == "anthropic":
        assert msgs[0]["role"] == "user"
        for i, m in enumerate(msgs):
            assert m["role"] == ("user" if i % 2 == 0 else "assistant"), i
            for b in m["content"]:
                assert b["type"] != "text" or b["text"].strip(), (i, b)
            uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
            if uses:
                nxt = msgs[i + 1]["content"]
                results = [b["tool_use_id"] for b in nxt[: len(uses)]]
                assert results == uses, (i, uses, results)
        return
    assert msgs[0]["role"] == "system" and msgs[1]["role"] == "user"
    for i, m in enumerate(msgs):
        if m["role"] in ("user", "tool"):
            assert isinstance(m["content"], str) and m["content"].strip(), (i, m)
        calls = [c["id"] for c in m.get("tool_calls") or []]
        if calls:
            answered = [msgs[i + 1 + k].get("tool_call_id") for k in range(len(calls))]
            assert answered == calls, (i, calls, answered)
