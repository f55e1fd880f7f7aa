"""nodecode.host without Neovim: a recording Port stands in for async_call."""

from __future__ import annotations

import threading

import pytest
from nodecode.agent.relay import Batcher
from nodecode.errors import UserError
from nodecode.host import Host

from .conftest import configure, wait_for


class RecordingPort:
    """Records events; answers approval prompts like the Lua side would."""

    def __init__(self, answer: bool | None = None):
        self.events: list[dict] = []
        self.answer = answer
        self.host: Host | None = None

    def emit(self, event: dict) -> None:
        self.events.append(event)
        if event["kind"] == "approve" and self.answer is not None:
            threading.Thread(
                target=self.host.answer, args=(event["job"], event["id"], self.answer)
            ).start()

    def done(self) -> dict | None:
        return next((e for e in self.events if e["kind"] == "done"), None)


def start(answer: bool | None = None) -> tuple[Host, RecordingPort]:
    port = RecordingPort(answer)
    port.host = Host(port)
    return port.host, port


def test_batcher_coalesces_text_and_flushes_it_before_any_other_event():
    out: list[dict] = []
    batch = Batcher(out.append, interval=60.0)

    for i in range(100):
        batch.text(f"{i} ")
    batch.event({"kind": "done"})

    assert [e["kind"] for e in out] == ["text", "text", "done"]
    assert "".join(e["text"] for e in out[:2]) == "".join(f"{i} " for i in range(100))


def test_ask_streams_text_then_done_and_pins_the_session(home, workspace, loopback):
    configure(home, loopback([{"text": "one two three"}]))
    host, port = start()
    ctx = {"home": str(home), "cwd": str(workspace)}

    job = host.ask(ctx, "hi")

    done = wait_for(port.done)
    assert done == {
        "job": job,
        "kind": "done",
        "status": "done",
        "turn": 1,
        "text": "one two three",
        "error": None,
    }
    assert "".join(e["text"] for e in port.events if e["kind"] == "text") == "one two three"
    assert [m["role"] for m in host.messages(ctx)] == ["user", "assistant"]
    assert host.session(ctx)["id"] == host.session(ctx)["id"]


@pytest.mark.parametrize("yes", [True, False])
def test_a_write_waits_for_the_persons_answer(yes, home, workspace, loopback):
    configure(home, loopback([{"calls": [{"code": '(write-file "b.txt" "x")'}]}, {"text": "ok"}]))
    host, port = start(answer=yes)

    host.ask({"home": str(home), "cwd": str(workspace)}, "write b")

    assert wait_for(port.done)["status"] == "done"
    prompt = next(e for e in port.events if e["kind"] == "approve")
    assert prompt["approval"] == "write" and "b.txt" in prompt["detail"]
    assert (workspace / "b.txt").exists() is yes
    result = next(e for e in port.events if e["kind"] == "result")
    assert result["error"] is not yes


def test_stop_while_an_approval_waits_ends_the_turn_stopped(home, workspace, loopback):
    configure(home, loopback([{"calls": [{"code": '(shell "true")'}]}, {"text": "never"}]))
    host, port = start(answer=None)  # nobody answers
    job = host.ask({"home": str(home), "cwd": str(workspace)}, "run it")
    wait_for(lambda: any(e["kind"] == "approve" for e in port.events))

    assert host.stop() == [job]

    assert wait_for(port.done)["status"] == "stopped"


def test_errors_are_user_errors_with_one_line(home, workspace, loopback):
    configure(home, loopback([{"text": "slow " * 40}], chunk_delay=0.1))
    host, port = start()
    ctx = {"home": str(home), "cwd": str(workspace)}

    with pytest.raises(UserError, match="expected some text"):
        host.ask(ctx, "  ")
    with pytest.raises(UserError, match="no job 7"):
        host.answer(7, 1, True)
    job = host.ask(ctx, "first")
    with pytest.raises(UserError, match="^a turn is running — :NodecodeStop to stop it$"):
        host.ask(ctx, "second")
    host.stop(job)
    assert wait_for(port.done)["status"] == "stopped"


class FailingPort(RecordingPort):
    """A port whose first ``call`` event raises, as a broken callback would."""

    def emit(self, event: dict) -> None:
        super().emit(event)
        if event["kind"] == "call" and sum(e["kind"] == "call" for e in self.events) == 1:
            raise RuntimeError("the chat went away")


def test_a_turn_that_raises_is_finished_failed_and_the_next_ask_runs(home, workspace, loopback):
    configure(
        home,
        loopback(
            [{"calls": [{"code": "(list-files)"}]}, {"text": "never"}, {"text": "second turn"}]
        ),
    )
    port = FailingPort()
    host = port.host = Host(port)
    ctx = {"home": str(home), "cwd": str(workspace)}

    host.ask(ctx, "first")
    done = wait_for(port.done)
    assert (done["status"], done["error"]) == ("failed", "RuntimeError: the chat went away")
    assert [(r["number"], r["status"]) for r in host.tree(ctx)] == [(1, "failed")]

    port.events.clear()
    host.ask(ctx, "again")
    assert wait_for(port.done)["status"] == "done"
    assert [(r["number"], r["status"]) for r in host.tree(ctx)] == [(1, "failed"), (2, "done")]
    log = host.recall(ctx, "chat went away", False)
    assert any("RuntimeError: the chat went away" in str(row) for row in log), log


def test_history_comes_in_parts_newest_first_each_starting_at_an_ask(
    home, workspace, loopback, monkeypatch
):
    monkeypatch.setattr("nodecode.host.HISTORY_PART", 2)  # a turn per part
    configure(home, loopback([{"text": f"answer {i}"} for i in range(3)]))
    host, port = start()
    ctx = {"home": str(home), "cwd": str(workspace)}
    for i in range(3):
        host.ask(ctx, f"question {i}")
        wait_for(lambda n=i + 1: sum(e["kind"] == "done" for e in port.events) == n)
    port.events.clear()

    for part in (1, 2, 3):
        host.history(ctx, 7, part)
    rows = [e.get("rows") for e in port.events]

    assert [e["part"] for e in port.events] == [1, 2, 3]
    assert [e["last"] for e in port.events] == [False, False, True]
    assert [[r["role"] for r in part] for part in rows] == [["user", "assistant"]] * 3
    assert [r[0]["text"] for r in rows] == ["question 2", "question 1", "question 0"]
    assert [e["token"] for e in port.events] == [7, 7, 7]
