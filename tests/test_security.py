"""Security (issue 7.5): confinement, keys never kept, private files, approval for shell."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers import run_cli, write_config
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App

KEY = "sk-ant-nodecode-SECRET-7f3a9c2e51d04b88"
OPENAI_KEY = "sk-proj-nodecode-SECRET-0c1d2e3f4a5b6c7d"
KEYS = (KEY, OPENAI_KEY)


def keyed_config(home: Path, base_url: str, **extra) -> None:
    """A provider whose key comes from $ANTHROPIC_API_KEY (sent as the x-api-key header)."""
    config = {
        "provider": "keyed",
        "model": "loopback-model",
        "max_retries": 0,
        "providers": {
            "keyed": {"type": "anthropic", "base_url": base_url, "api_key_env": "ANTHROPIC_API_KEY"}
        },
        **extra,
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.jsonc").write_text(json.dumps(config))


def key_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NODECODE_SESSION"}
    env.update(ANTHROPIC_API_KEY=KEY, OPENAI_API_KEY=OPENAI_KEY)
    return env


def files_holding_a_key(root: Path, keys: tuple[str, ...] = KEYS) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path} holds {key[:12]}…" for key in keys if key.encode() in data]
    return found


def not_private(home: Path) -> list[str]:
    """Directories of the home's store and context trees that are not 0700, files
    not 0600. The home itself is the person's when it existed before (here the
    test makes it): nodecode leaves its mode alone."""
    wrong = []
    trees = [home / "store", home / "context"]
    for path in [*trees, *(p for tree in trees for p in tree.rglob("*"))]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode != (0o700 if path.is_dir() else 0o600):
            wrong.append(f"{path} is {mode:o}")
    # The shadow git store: git makes its objects read-only; no one else may read any.
    for path in (home / "shadow").rglob("*"):
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            wrong.append(f"{path} is {mode:o}")
    return wrong


def tool_results(app: App, sid: str) -> list[str]:
    return [e.text for e in app.store.events(sid) if e.kind == "tool"]


# -- workspace confinement ----------------------------------------------------------


@pytest.fixture
def escape_world(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret outside\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    (ws / "link-out").symlink_to(outside, target_is_directory=True)
    (ws / "link-file.txt").symlink_to(outside / "secret.txt")
    return ws, outside


ESCAPES = [
    '(read-file "../outside/secret.txt")',
    '(read-file "{outside}/secret.txt")',
    '(read-file "link-out/secret.txt")',
    '(read-file "link-file.txt")',
    '(read-file "a.txt/../../outside/secret.txt")',
    '(write-file "../outside/new.txt" "x")',
    '(write-file "{outside}/new.txt" "x")',
    '(write-file "link-out/new.txt" "x")',
    '(write-file "link-file.txt" "overwritten")',
    '(edit-file "link-file.txt" "secret" "changed")',
    '(list-files "..")',
    '(list-files "link-out")',
    '(grep "secret" :path "{outside}")',
    '(grep "secret" :path "link-out")',
    '(read-file "~/.bashrc")',
]


def test_workspace_escapes_are_refused_through_the_agent(loopback, tmp_path, escape_world):
    ws, outside = escape_world
    calls = [{"code": code.format(outside=outside)} for code in ESCAPES]
    srv = loopback([{"text": "trying", "calls": calls}, {"text": "done"}])
    home = write_config(tmp_path / "home", srv, auto_approve=True)  # refusal is not approval
    app = App.open(home, "default", ws, environ={})
    sid = app.new_session()
    assert Agent(app, sid).ask("escape").status == "done"
    results = tool_results(app, sid)
    assert len(results) == len(ESCAPES)
    for code, text in zip(ESCAPES, results, strict=True):
        assert text.startswith("error:") and "outside the workspace" in text, (code, text)
        assert "secret outside" not in text
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret outside\n"
    sent = json.dumps(srv.model_requests[-1].body)
    assert "secret outside" not in sent
    app.close()


def test_a_symlinked_workspace_root_is_allowed(loopback, tmp_path, escape_world):
    ws, _ = escape_world
    linked = tmp_path / "linked-ws"
    linked.symlink_to(ws, target_is_directory=True)
    srv = loopback(
        [
            {
                "text": "working",
                "calls": [
                    {"code": '(read-file "a.txt")'},
                    {"code": '(write-file "made.txt" "made\n")'},
                    {"code": '(edit-file "a.txt" "alpha" "beta")'},
                    {"code": "(list-files)"},
                    {"code": '(grep "beta")'},
                    {"code": '(read-file "link-out/secret.txt")'},
                ],
            },
            {"text": "done"},
        ]
    )
    home = write_config(tmp_path / "home", srv, auto_approve=True)
    app = App.open(home, "default", linked, environ={})
    sid = app.new_session()
    assert Agent(app, sid).ask("work").status == "done"
    results = tool_results(app, sid)
    assert [r.startswith("error:") for r in results] == [False] * 5 + [True]
    assert results[0].startswith("alpha") and "made.txt" in results[3]
    assert (ws / "made.txt").read_text() == "made\n" and (ws / "a.txt").read_text() == "beta\n"
    assert "outside the workspace" in results[5]
    app.close()


# -- the key appears nowhere ----------------------------------------------------------


def test_the_api_key_appears_nowhere_even_after_the_agent_goes_looking(loopback, home, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    srv = loopback([])
    keyed_config(home, srv.url)
    sid = run_cli("new", home=home, env=key_env()).stdout.strip()
    # Started through exec so that its pid (the agent's parent process) is known first.
    proc = subprocess.Popen(
        [
            "bash",
            "-c",
            'read _; exec "$0" "$@"',
            sys.executable,
            "-m",
            "nodecode",
            "--home",
            str(home),
            "--cwd",
            str(workspace),
            "ask",
            "--yes",
            f"my key is {KEY}, look for it",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=key_env(),
    )
    looking = [
        '(shell "env")',
        '(shell "xargs -0 -n1 < /proc/$PPID/environ")',
        f'(read-file "/proc/{proc.pid}/environ")',
        '(read-file "/proc/self/environ")',
        '(shell "echo key=$ANTHROPIC_API_KEY openai=$OPENAI_API_KEY")',
        "(context)",
    ]
    srv.add_rounds(
        [
            {"text": "Looking.", "calls": [{"code": c} for c in looking]},
            {"text": "Noting.", "calls": [{"code": '(context :note "keep looking")'}]},
            {"text": f"Found {KEY} and {OPENAI_KEY}."},
        ]
    )
    out, err = proc.communicate("go\n", timeout=90)
    assert proc.returncode == 0, err
    for key in KEYS:
        assert key not in out and key not in err
    assert "Found [redacted:ANTHROPIC_API_KEY] and [redacted:OPENAI_API_KEY]." in out

    app = App.open(home, "default", workspace, environ={})
    env_out, parent_env, by_pid, by_self, echoed, _ = tool_results(app, sid)[:6]
    assert "PATH=" in env_out and "ANTHROPIC_API_KEY=" not in env_out
    assert "OPENAI_API_KEY=" not in env_out
    # The parent's environment holds the key; the output shows only its mark.
    assert "ANTHROPIC_API_KEY=[redacted:ANTHROPIC_API_KEY]" in parent_env
    assert "outside the workspace" in by_pid and "outside the workspace" in by_self
    assert echoed.startswith("key= openai=\n")
    assert app.store.events(sid)[0].text == "my key is [redacted:ANTHROPIC_API_KEY], look for it"
    app.close()

    model = srv.model_requests
    assert len(model) == 3
    assert all(r.headers.get("x-api-key") == KEY for r in model)  # sent where it belongs
    for r in model:
        body = json.dumps(r.body)
        assert all(key not in body for key in KEYS)
    context = home / "context" / "default" / sid
    assert (context / "context.txt").exists() and (context / "context.receipt.txt").exists()
    assert files_holding_a_key(home) == []
    assert not_private(home) == []


class _Echoing(BaseHTTPRequestHandler):
    """A provider that echoes the key it was sent in its error, as some do."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps(
            {
                "type": "error",
                "error": {
                    "type": "authentication_error",
                    "message": f"invalid x-api-key: {self.headers.get('x-api-key')}",
                },
            }
        ).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_an_error_that_echoes_the_key_is_shown_and_logged_without_it(home, workspace):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echoing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        keyed_config(home, f"http://127.0.0.1:{server.server_address[1]}")
        run_cli("new", home=home, env=key_env())
        out = run_cli("ask", "hi", home=home, cwd=workspace, env=key_env())
    finally:
        server.shutdown()
        server.server_close()
    assert out.returncode == 3
    assert "authentication_error" in out.stderr and "invalid x-api-key" in out.stderr
    for key in KEYS:
        assert key not in out.stdout and key not in out.stderr
    assert files_holding_a_key(home) == []


# -- private files --------------------------------------------------------------------


def test_context_receipt_and_database_files_are_0600_in_0700_directories(loopback, tmp_path):
    os.umask(0o022)  # a usual umask: nodecode must not rely on a strict one
    ws = tmp_path / "ws"
    ws.mkdir()
    srv = loopback(
        [
            {"text": "a", "calls": [{"code": "(context)"}]},
            {"text": "b", "calls": [{"code": '(context :note "n")'}]},
            {"text": "done"},
        ]
    )
    home = tmp_path / "home"
    write_config(home, srv)
    os.chmod(home, 0o755)
    app = App.open(home, "default", ws, environ={})
    sid = app.new_session()
    assert Agent(app, sid).ask("export and note").status == "done"
    app.close()
    context = home / "context" / "default" / sid
    expected = [
        home / "store" / "default.db",
        context / "context.txt",
        context / "context.receipt.txt",
    ]
    assert all(p.exists() for p in expected)
    assert not_private(home) == []


def test_an_existing_home_keeps_its_mode_and_only_what_nodecode_creates_is_0700(tmp_path):
    """`--home /tmp` must not make /tmp 0700 for every other user (issue 11, item 8)."""
    os.umask(0o022)
    everyone = tmp_path / "everyone"
    everyone.mkdir()
    os.chmod(everyone, 0o1777)  # like /tmp: world-writable, sticky
    made = everyone / "nc" / "home"  # two levels nodecode creates
    for home in (everyone, made):
        proc = run_cli("new", home=home)
        assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(everyone.stat().st_mode) == 0o1777
    for path in (everyone / "store", made.parent, made, made / "store"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


# -- shell needs approval -------------------------------------------------------------


@pytest.mark.parametrize(
    "auto_approve, runs", [([], False), (["write"], False), (["shell"], True), (True, True)]
)
def test_shell_runs_only_with_approval_or_auto_approve(loopback, tmp_path, auto_approve, runs):
    ws = tmp_path / "ws"
    ws.mkdir()
    srv = loopback(
        [{"text": "x", "calls": [{"code": '(shell "touch ran.txt")'}]}, {"text": "done"}]
    )
    home = write_config(tmp_path / "home", srv, auto_approve=auto_approve)
    app = App.open(home, "default", ws, environ={})
    sid = app.new_session()
    asked = []

    class Refuses(TurnCallbacks):
        def approve(self, kind: str, detail: str) -> bool:
            asked.append((kind, detail))
            return False

    Agent(app, sid).ask("run it", Refuses())
    assert (ws / "ran.txt").exists() is runs
    assert asked == ([] if runs else [("shell", "touch ran.txt")])
    [result] = tool_results(app, sid)
    assert ("shell not approved" in result) is not runs
    app.close()


def test_the_cli_runs_shell_only_with_yes(loopback, home, workspace):
    srv = loopback(
        [
            {"text": "x", "calls": [{"code": '(shell "touch ran.txt")'}]},
            {"text": "done"},
            {"text": "x", "calls": [{"code": '(shell "touch ran.txt")'}]},
            {"text": "done"},
        ]
    )
    write_config(home, srv)
    run_cli("new", home=home)
    refused = run_cli("ask", "run it", home=home, cwd=workspace, input="y\n")
    assert refused.returncode == 0 and not (workspace / "ran.txt").exists()
    assert "shell not approved (no terminal; use --yes)" in refused.stderr
    approved = run_cli("ask", "--yes", "run it", home=home, cwd=workspace)
    assert approved.returncode == 0 and (workspace / "ran.txt").exists()
