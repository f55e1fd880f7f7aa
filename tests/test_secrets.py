"""Keys never leak around the redactor (issue 11.4): not split across streamed
deltas, not in what the person writes, not encoded, not from a key command or file."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.context import take as takes
from test_security import KEY, files_holding_a_key, key_env

WIRES = ("anthropic", "openai")
MARK = "[redacted:ANTHROPIC_API_KEY]"
CMD_KEY = "sk-cmd-nodecode-SECRET-5e6f7a8b9c0d1e2f"


def keyed_home(home: Path, srv, ptype: str, key: dict | None = None) -> Path:
    """A provider of wire format ``ptype`` whose key comes from its usual variable
    (or from ``key``: api_key_cmd / api_key_file)."""
    base = srv.url if ptype == "anthropic" else srv.url + "/v1"
    source = key or {
        "api_key_env": "ANTHROPIC_API_KEY" if ptype == "anthropic" else "OPENAI_API_KEY"
    }
    config = {
        "provider": "keyed",
        "model": "loopback-model",
        "max_retries": 0,
        "providers": {"keyed": {"type": ptype, "base_url": base, **source}},
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.jsonc").write_text(json.dumps(config))
    return home


def sent_bodies(srv) -> str:
    return "\n".join(json.dumps(r.body, ensure_ascii=False) for r in srv.model_requests)


def no_key_env() -> dict[str, str]:
    """The test's environment without any provider key."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "NODECODE_SESSION")
    }


class Seen(TurnCallbacks):
    """Everything a person is shown of a turn (what the host relays to the chat)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.other: list[str] = []

    def on_text(self, chunk: str) -> None:
        self.text.append(chunk)

    def on_notice(self, text: str) -> None:
        self.other.append(text)

    def on_result(self, seq: int, text: str, error: bool) -> None:
        self.other.append(text)

    def approve(self, kind: str, detail: str) -> bool:
        return True


# -- a key split across streamed deltas ---------------------------------------------

SPLIT_ROUNDS = [
    {
        "chunks": [f"Your key: {KEY[:11]}", KEY[11:30], f"{KEY[30:]} is set, ends {KEY[:9]}"],
        "calls": [{"code": "(list-files)"}],
    },
    {"chunks": ["done ", KEY[:20], KEY[20:]]},
]
SPLIT_SHOWN = f"Your key: {MARK} is set, ends {KEY[:9]}\ndone {MARK}\n"


@pytest.mark.parametrize("ptype", WIRES)
def test_a_key_split_across_streamed_deltas_never_reaches_stdout(loopback, home, workspace, ptype):
    srv = loopback(SPLIT_ROUNDS)
    keyed_home(home, srv, ptype)
    run_cli("new", home=home, env=key_env())
    out = run_cli("ask", "hi", home=home, cwd=workspace, env=key_env())
    assert out.returncode == 0, out.stderr
    assert KEY not in out.stdout and KEY not in out.stderr
    # The held-back tail (a prefix of the key that never completes) is shown at the round's end.
    assert out.stdout == SPLIT_SHOWN


@pytest.mark.parametrize("ptype", WIRES)
def test_the_chat_callback_never_sees_a_split_key(loopback, home, workspace, ptype):
    srv = loopback(SPLIT_ROUNDS)
    app = App.open(keyed_home(home, srv, ptype), "default", workspace, environ=key_env())
    sid = app.new_session()
    seen = Seen()
    result = Agent(app, sid).ask("hi", seen)
    app.close()
    assert result.status == "done" and KEY not in result.text  # the host shows it at the end
    assert all(KEY[:12] not in chunk for chunk in seen.text)  # no delta shows a key's part
    assert "".join(seen.text) == SPLIT_SHOWN.replace("\n", "", 1).rstrip("\n")


# -- what the person (or the agent) writes ------------------------------------------


def _note(text: str) -> str:
    return text.replace("\nhello\n", f"\nhello\n[[note]]\nthe key is {KEY}\n", 1)


def _rewrite(text: str) -> str:
    return text.replace("\nfirst reply\n", f"\nfirst reply, key {KEY}\n", 1)


def _bad_header(text: str) -> str:
    return re.sub(r"(\[\[m:\w+ \d+) user\]\]", rf"\1 user {KEY}]]", text, count=1)


def _first_line(text: str) -> str:
    first, rest = text.split("\n", 1)
    return f"{first} {KEY}\n{rest}"


FILE_EDITS = {
    "note": _note,
    "rewrite": _rewrite,
    "bad-header": _bad_header,
    "first-line": _first_line,
}
CELLS = {
    "eval-note": f'(context :note "remember {KEY}")',
    "eval-shell": f'(shell "echo {KEY}")',
}


@pytest.mark.parametrize("ptype", WIRES)
@pytest.mark.parametrize("path", [*FILE_EDITS, *CELLS, "agent-note", "title"])
def test_a_key_the_person_writes_is_redacted_before_it_is_kept_or_sent(
    loopback, home, workspace, ptype, path
):
    rounds = [{"text": "first reply"}, {"text": "second reply"}]
    if path == "agent-note":
        rounds.insert(1, {"text": "noting", "calls": [{"code": f'(context :note "{KEY}")'}]})
    srv = loopback(rounds)
    keyed_home(home, srv, ptype)
    title = ["--title", f"about {KEY}"] if path == "title" else []
    sid = run_cli("new", *title, home=home, env=key_env()).stdout.strip()
    app = App.open(home, "default", workspace, environ=key_env())
    assert Agent(app, sid).ask("hello", Seen()).status == "done"
    shown = []
    if path in FILE_EDITS:
        context = takes.export(app.workspace, sid)
        context.write_text(FILE_EDITS[path](context.read_text()))
    if path in CELLS:
        out = run_cli("eval", CELLS[path], home=home, cwd=workspace, env=key_env())
        assert out.returncode == 0, out.stderr
        shown += [out.stdout, out.stderr]
    seen = Seen()
    assert Agent(app, sid).ask("again", seen).status == "done"
    app.close()
    shown += seen.text + seen.other
    assert all(KEY not in text for text in shown)
    assert KEY not in sent_bodies(srv)
    assert files_holding_a_key(home) == []
    if path not in ("title", "eval-shell"):  # what enters the context arrives, keyless
        assert MARK in sent_bodies(srv)


# -- reversed and encoded forms ------------------------------------------------------


def _b64_cell(pid: int, pad: str) -> str:
    # The key line, shifted by ``pad`` so the key starts at each alignment mod 3;
    # base64 wraps its output at 76 columns, often inside the key's encoding.
    return f"(shell \"{{ printf '{pad}'; {_key_line(pid)}; }} | base64\")"


def _key_line(pid: int) -> str:
    return f"tr '\\\\0' '\\\\n' < /proc/{pid}/environ | grep -a ^ANTHROPIC_API_KEY="


def _hex(pid: int) -> str:
    return f"{_key_line(pid)} | od -An -v -tx1 | tr -d ' \\\\n'"


ENCODINGS = {
    "reversed": lambda pid: f"(shell \"tr '\\\\0' '\\\\n' < /proc/{pid}/environ | rev\")",
    "base64-0": lambda pid: _b64_cell(pid, ""),
    "base64-1": lambda pid: _b64_cell(pid, "x"),
    "base64-2": lambda pid: _b64_cell(pid, "xx"),
    "hex": lambda pid: f'(shell "{_hex(pid)} | fold -w 60")',
    "HEX": lambda pid: f'(shell "{_hex(pid)} | tr a-f A-F")',
    "percent": lambda pid: f"(shell \"{_hex(pid)} | sed 's/../%&/g'\")",
    "PERCENT": lambda pid: f"(shell \"{_hex(pid)} | tr a-f A-F | sed 's/../%&/g'\")",
}


def encoded_forms(key: str) -> list[str]:
    """What the test looks for: each encoding of the key, unwrapped."""
    raw = key.encode()
    forms = [key[::-1], raw.hex(), raw.hex().upper()]
    forms += ["".join(f"%{b:02x}" for b in raw), "".join(f"%{b:02X}" for b in raw)]
    for pad in range(3):
        text = base64.b64encode(b"\0" * pad + raw).decode()
        forms.append(text[(8 * pad + 5) // 6 : (8 * (pad + len(raw))) // 6])
    return forms


def unwrapped(data: bytes) -> bytes:
    return data.replace(b"\n", b"").replace(b"\r", b"")


@pytest.mark.parametrize("ptype", WIRES)
def test_reversed_and_encoded_keys_printed_by_a_shell_are_redacted(
    loopback, home, workspace, ptype
):
    srv = loopback([])
    keyed_home(home, srv, ptype)
    sid = run_cli("new", home=home, env=key_env()).stdout.strip()
    # Started through exec so that the pid of nodecode (whose environment holds the key) is known.
    proc = subprocess.Popen(
        ["bash", "-c", 'read _; exec "$0" "$@"', sys.executable, "-m", "nodecode"]
        + ["--home", str(home), "--cwd", str(workspace), "ask", "--yes", "encode it"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=key_env(),
    )
    cells = [make(proc.pid) for make in ENCODINGS.values()]
    srv.add_rounds([{"text": "Encoding.", "calls": [{"code": c} for c in cells]}, {"text": "ok"}])
    out, err = proc.communicate("go\n", timeout=90)
    assert proc.returncode == 0, err

    app = App.open(home, "default", workspace, environ={})
    results = [e.text for e in app.store.events(sid) if e.kind == "tool"]
    app.close()
    assert len(results) == len(ENCODINGS)
    for name, text in zip(ENCODINGS, results, strict=True):
        assert MARK in text, (name, text)
    forms = [f.encode() for f in encoded_forms(KEY)]
    assert all(len(f) >= 30 for f in forms)
    shown = unwrapped((out + err).encode())
    sent = unwrapped(sent_bodies(srv).encode())
    for form in forms:
        assert form not in shown and form not in sent, form
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = unwrapped(path.read_bytes())
            assert not [f for f in forms if f in data], path


# -- a key from a command or a file --------------------------------------------------


def key_script(tmp_path: Path, body: str = f"echo '  {CMD_KEY}  '") -> Path:
    """A key command that counts its runs in ``runs`` next to it."""
    script = tmp_path / "print-key"
    script.write_text(f"#!/bin/sh\necho run >> {tmp_path / 'runs'}\n{body}\n")
    script.chmod(0o700)
    return script


def sent_key(request, ptype: str) -> str | None:
    if ptype == "anthropic":
        return request.headers.get("x-api-key")
    return request.headers.get("authorization", "").removeprefix("Bearer ")


@pytest.mark.parametrize("ptype", WIRES)
def test_a_key_from_api_key_cmd_is_sent_and_never_kept(loopback, tmp_path, home, workspace, ptype):
    script = key_script(tmp_path)
    srv = loopback(
        [
            {"text": "Looking.", "calls": [{"code": f'(shell "{script}")'}]},
            {"text": "Again.", "calls": [{"code": f'(shell "{script} | rev")'}]},
            {"chunks": ["it is ", CMD_KEY[:15], CMD_KEY[15:]]},
        ]
    )
    keyed_home(home, srv, ptype, {"api_key_cmd": str(script)})
    env = no_key_env()
    run_cli("new", home=home, env=env)
    out = run_cli("ask", "--yes", "find the key", home=home, cwd=workspace, env=env)
    assert out.returncode == 0, out.stderr
    assert [sent_key(r, ptype) for r in srv.model_requests] == [CMD_KEY] * 3
    mark = "[redacted:providers.keyed.api_key_cmd]"
    assert out.stdout.endswith(f"it is {mark}\n")
    assert out.stderr.count(mark) == 2  # the two results: as printed, and reversed
    assert CMD_KEY not in out.stdout + out.stderr and CMD_KEY[::-1] not in out.stderr
    assert CMD_KEY not in sent_bodies(srv) and CMD_KEY[::-1] not in sent_bodies(srv)
    assert files_holding_a_key(home, (CMD_KEY, CMD_KEY[::-1])) == []
    # Run once for the whole turn; the cells ran it twice more.
    assert (tmp_path / "runs").read_text().count("run") == 3


@pytest.mark.parametrize(
    "body, why",
    [("echo oops >&2; exit 3", "failed (exit status 3): oops"), ("true", "printed no key")],
)
def test_a_failing_or_empty_key_command_is_one_line(loopback, tmp_path, home, workspace, body, why):
    script = key_script(tmp_path, body)
    srv = loopback([{"text": "never"}])
    keyed_home(home, srv, "anthropic", {"api_key_cmd": f"{script} --flag"})
    run_cli("new", home=home, env=no_key_env())
    out = run_cli("ask", "hi", home=home, cwd=workspace, env=no_key_env())
    assert out.returncode == 1
    assert out.stderr == f"nodecode: provider 'keyed': api_key_cmd '{script} --flag' {why}\n"
    assert srv.model_requests == []


@pytest.mark.parametrize("ptype", WIRES)
def test_a_key_from_api_key_file_is_sent_and_redacted(loopback, tmp_path, home, workspace, ptype):
    keyfile = tmp_path / "anthropic.key"
    keyfile.write_text(CMD_KEY + "\n")
    keyfile.chmod(0o600)
    srv = loopback(
        [{"text": "Reading.", "calls": [{"code": f'(shell "cat {keyfile}")'}]}, {"text": "ok"}]
    )
    keyed_home(home, srv, ptype, {"api_key_file": str(keyfile)})
    run_cli("new", home=home, env=no_key_env())
    out = run_cli("ask", "--yes", "read it", home=home, cwd=workspace, env=no_key_env())
    assert out.returncode == 0, out.stderr
    assert [sent_key(r, ptype) for r in srv.model_requests] == [CMD_KEY] * 2
    assert "[redacted:providers.keyed.api_key_file]" in out.stderr
    assert CMD_KEY not in out.stdout + out.stderr + sent_bodies(srv)
    assert files_holding_a_key(home, (CMD_KEY,)) == []


def test_a_key_file_others_can_read_is_refused(loopback, tmp_path, home, workspace):
    keyfile = tmp_path / "anthropic.key"
    keyfile.write_text(CMD_KEY + "\n")
    keyfile.chmod(0o644)
    srv = loopback([{"text": "never"}])
    keyed_home(home, srv, "anthropic", {"api_key_file": str(keyfile)})
    run_cli("new", home=home, env=no_key_env())
    out = run_cli("ask", "hi", home=home, cwd=workspace, env=no_key_env())
    assert out.returncode == 1
    assert out.stderr == (
        f"nodecode: provider 'keyed': api_key_file {keyfile} is readable by group or "
        "others (mode 644): expected mode 600 or stricter\n"
    )
    assert srv.model_requests == []


def test_a_provider_names_one_key_source(loopback, home, workspace):
    srv = loopback([])
    keyed_home(home, srv, "anthropic", {"api_key_env": "ANTHROPIC_API_KEY", "api_key_cmd": "x"})
    out = run_cli("ask", "hi", home=home, cwd=workspace, env=no_key_env())
    assert out.returncode == 1
    assert out.stderr == (
        "nodecode: config.jsonc: providers.keyed must name one key source: "
        "api_key_env, api_key_cmd or api_key_file (found api_key_env and api_key_cmd)\n"
    )


# -- a key with a stray character around it (Trust, third round, item 6) ------------

STRAYS = {
    "carriage return": KEY + "\r",
    "spaces": f"  {KEY} ",
    "BOM": "\ufeff" + KEY,
    "zero-width space": KEY + "\u200b",
    "no-break space and CRLF": "\u00a0" + KEY + "\r\n",
}


@pytest.mark.parametrize("value", STRAYS.values(), ids=STRAYS.keys())
def test_a_key_with_a_stray_character_around_it_is_sent_and_redacted_bare(
    loopback, home, workspace, value
):
    (workspace / "notes.txt").write_text(f"key={KEY}\n")
    srv = loopback(
        [
            {"text": "Reading.", "calls": [{"code": '(read-file "notes.txt")'}]},
            {"chunks": ["the key is ", KEY[:20], KEY[20:]]},
        ]
    )
    keyed_home(home, srv, "anthropic")
    env = {**no_key_env(), "ANTHROPIC_API_KEY": value}
    run_cli("new", home=home, env=env)
    out = run_cli("ask", "--yes", "read it", home=home, cwd=workspace, env=env)
    assert KEY not in out.stdout + out.stderr
    assert files_holding_a_key(home, (KEY,)) == []
    assert "Traceback" not in out.stderr
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"Reading.\nthe key is {MARK}\n"
    assert f"key={MARK}" in out.stderr  # the read's result
    assert [sent_key(r, "anthropic") for r in srv.model_requests] == [KEY, KEY]
    assert KEY not in sent_bodies(srv)


def test_a_key_holding_a_character_no_header_carries_is_one_line_without_it(
    loopback, home, workspace
):
    srv = loopback([{"text": "never"}])
    keyed_home(home, srv, "anthropic")
    env = {**no_key_env(), "ANTHROPIC_API_KEY": KEY + "\u00e9"}
    run_cli("new", home=home, env=env)
    out = run_cli("ask", "hi", home=home, cwd=workspace, env=env)
    assert "Traceback" not in out.stderr
    assert (out.returncode, out.stderr) == (
        1,
        "nodecode: provider 'keyed': the key from ANTHROPIC_API_KEY holds U+00E9 (latin "
        f"small letter e with acute) at character {len(KEY) + 1} of {len(KEY) + 1}: expected "
        "printable ASCII, which is all an HTTP header carries\n",
    )
    assert srv.model_requests == []


# -- more spellings (Trust, third round, item 8) ------------------------------------


def _cell(cmd: str) -> str:
    return '(shell "' + cmd.replace("\\", "\\\\").replace('"', '\\"') + '")'


# Each prints the key of key.txt (a file the person keeps in the workspace) spelled anew.
SPELLING_COMMANDS = {
    "upper case": "tr a-z A-Z < key.txt",
    "base32": "{ printf x; cat key.txt; } | base32",
    "letters separated by spaces": "sed 's/./& /g' key.txt",
    "od-style hex": "od -An -tx1 key.txt",
    "\\u escapes": "od -An -v -tx1 key.txt | tr -d ' \\n' | sed 's/../\\\\u00&/g'",
    "zero-width-joined": "sed \"s/./&$(printf '\\342\\200\\215')/g\" key.txt",
    "full-width": (
        f"{sys.executable} -c 'import sys; "
        'print("".join(chr(ord(c) + 0xFEE0) for c in open("key.txt").read().strip()))\''
    ),
}


@pytest.mark.parametrize("ptype", WIRES)
def test_more_spellings_of_a_key_never_reach_the_screen_the_log_or_the_provider(
    loopback, home, workspace, ptype
):
    (workspace / "key.txt").write_text(KEY + "\n")
    printed = {
        name: subprocess.run(
            ["bash", "-c", cmd], cwd=workspace, capture_output=True, text=True, check=True
        ).stdout
        for name, cmd in SPELLING_COMMANDS.items()
    }
    spaced, wide = printed["letters separated by spaces"], printed["full-width"].strip()
    srv = loopback(
        [
            {
                "text": "Encoding.",
                "calls": [{"code": _cell(c)} for c in SPELLING_COMMANDS.values()],
            },
            {"chunks": ["see ", wide[:9], wide[9:] + " and ", spaced[:15], spaced[15:]]},
        ]
    )
    keyed_home(home, srv, ptype)
    sid = run_cli("new", home=home, env=key_env()).stdout.strip()
    out = run_cli("ask", "--yes", "spell it", home=home, cwd=workspace, env=key_env())
    assert out.returncode == 0, out.stderr
    # Every line of every spelling is at least 12 characters of a key's encoding.
    pieces = {line.strip() for text in printed.values() for line in text.splitlines()}
    # base32's first two characters also encode the x before the key: they stay.
    pieces = {p.removeprefix(printed["base32"][:2]) for p in pieces}
    assert min(len(p) for p in pieces) >= 12
    shown, sent = out.stdout + out.stderr, sent_bodies(srv)
    assert [p for p in pieces if p in shown or p in sent] == []
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert [p for p in pieces if p.encode() in data] == [], path
    assert out.stdout == f"Encoding.\nsee {MARK} and {MARK} \n"
    app = App.open(home, "default", workspace, environ={})
    results = [e.text for e in app.store.events(sid) if e.kind == "tool"]
    app.close()
    assert len(results) == len(SPELLING_COMMANDS)
    assert all(MARK in text for text in results), results


# -- the retry line (Trust, third round, item 7) ------------------------------------

OTHER_KEY = "sk-other-nodecode-SECRET-9a8b7c6d5e4f3a2b"
B64_KEY = base64.b64encode(KEY.encode()).decode()
QUOTING_FAULTS = [  # each retried, each quoting a key in its error
    {"at": 1, "kind": "529", "message": f"Overloaded (the other key was {OTHER_KEY})"},
    {"at": 2, "kind": "sse_error", "message": f"stream broken for key {B64_KEY}"},
    {"at": 3, "kind": "400", "should_retry": True, "message": f"bad key {KEY[::-1]}"},
]


def two_providers(home: Path, srv) -> Path:
    """The active provider (key in ANTHROPIC_API_KEY) and another (key in OTHER_API_KEY)."""
    config = {
        "provider": "keyed",
        "model": "loopback-model",
        "max_retries": 3,
        "retry_backoff": 0.01,
        "providers": {
            "keyed": {"type": "anthropic", "base_url": srv.url, "api_key_env": "ANTHROPIC_API_KEY"},
            "other": {
                "type": "openai",
                "base_url": srv.url + "/v1",
                "api_key_env": "OTHER_API_KEY",
            },
        },
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.jsonc").write_text(json.dumps(config))
    return home


def quoted_keys_in(text: str) -> list[str]:
    return [k for k in (OTHER_KEY, KEY, B64_KEY[4:-4], KEY[::-1]) if k in text]


def test_retry_lines_quoting_keys_are_redacted_in_the_cli(loopback, home, workspace):
    srv = loopback([{"chunks": ["at ", "last"]}], faults=QUOTING_FAULTS)
    two_providers(home, srv)
    env = {**key_env(), "OTHER_API_KEY": OTHER_KEY}
    run_cli("new", home=home, env=env)
    out = run_cli("ask", "hi", home=home, cwd=workspace, env=env)
    retries = [line for line in out.stderr.splitlines() if "retrying in" in line]
    assert quoted_keys_in(out.stdout + out.stderr) == []
    assert out.returncode == 0, out.stderr
    assert len(retries) == 3, out.stderr
    assert "[redacted:OTHER_API_KEY]" in retries[0]
    assert all(MARK in line for line in retries[1:]), retries
    assert files_holding_a_key(home, (OTHER_KEY, KEY, B64_KEY[4:-4], KEY[::-1])) == []


def test_retry_lines_quoting_keys_reach_the_chat_redacted(loopback, home, workspace):
    srv = loopback([{"text": "at last"}], faults=QUOTING_FAULTS)
    env = {**key_env(), "OTHER_API_KEY": OTHER_KEY}
    app = App.open(two_providers(home, srv), "default", workspace, environ=env)
    retries: list[str] = []
    seen = Seen()
    seen.on_retry = retries.append  # what the host relays to the chat
    result = Agent(app, app.new_session()).ask("hi", seen)
    app.close()
    assert result.status == "done"
    assert len(retries) == 3
    assert quoted_keys_in("\n".join(retries)) == []
