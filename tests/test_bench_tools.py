"""The benchmarks' own tools (bench/): the model server that never parses a body,
the verdicts that say UNRESOLVED rather than guess, and the table that shows them.

They decide what ``make bench`` prints, so they are tested like the product:
a real server process, the real Anthropic provider, the real table code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import run_all  # noqa: E402
from _common import ServerProcess, difference_verdict, ratio_verdict  # noqa: E402
from nodecode.providers import make_provider  # noqa: E402

ROUNDS = [
    {"text": "first reply, long enough to come in more than one delta of text", "calls": []},
    {"text": "", "calls": ['(read-file "a.txt")']},
]


def test_bench_server_streams_its_rounds_to_the_real_provider(tmp_path: Path) -> None:
    with ServerProcess(tmp_path, ROUNDS) as server:
        provider = make_provider("anthropic", base_url=server.url, api_key=None)
        try:
            body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
            chunks: list[str] = []
            first = provider.stream(body, on_text=chunks.append)
            second = provider.stream(body)
        finally:
            provider.close()
    assert first.text == ROUNDS[0]["text"] and "".join(chunks) == ROUNDS[0]["text"]
    assert len(chunks) > 1
    assert [(c.name, c.input) for c in second.calls] == [("eval", {"code": '(read-file "a.txt")'})]
    assert second.stop_reason == "tool_use"


def test_bench_server_never_parses_the_body(tmp_path: Path) -> None:
    """A body that is not JSON at all gets the same streamed reply: its parse
    cost is in neither side of a first-token measurement."""
    with ServerProcess(tmp_path, ROUNDS[:1], save=tmp_path / "bodies") as server:
        raw = b"\x00not json" * 100_000
        with httpx.Client() as client:
            response = client.post(server.url + "/v1/messages", content=raw)
    assert response.status_code == 200
    assert "text_delta" in response.text and "message_stop" in response.text
    assert (tmp_path / "bodies" / "1.json").read_bytes() == raw


def test_verdicts_pass_fail_and_unresolved() -> None:
    tight = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 10.1, 9.9, 10.0]
    assert difference_verdict([x + 2 for x in tight], tight, 5.0, ("a", "b")).result == "PASS"
    assert difference_verdict([x + 9 for x in tight], tight, 5.0, ("a", "b")).result == "FAIL"
    assert ratio_verdict([x * 2 for x in tight], tight, 3.0, ("a", "b")).result == "PASS"
    assert ratio_verdict([x * 4 for x in tight], tight, 3.0, ("a", "b")).result == "FAIL"
    # An anchor swinging by ±70 ms cannot resolve a 25 ms goal (issue 12's first token).
    wide = [10.0 + 70 * (-1) ** i * (i % 3) / 2 for i in range(30)]
    got = difference_verdict([x + 20 for x in wide], wide, 25.0, ("a", "b"))
    assert got.result.startswith("UNRESOLVED (spread ") and "ms > margin" in got.result
    assert "[" in got.figures and "–" in got.figures  # each side's p10–p90 is shown


def test_table_shows_unresolved_rows_and_their_figures() -> None:
    line = json.dumps(
        {
            "bar": "first token overhead, 200 messages, warm App",
            "measured": 3.2,
            "goal": 5.0,
            "pass": True,
            "unit": "ms",
            "result": "UNRESOLVED (spread 8.6 ms > margin 1.8 ms)",
            "figures": "nodecode 9.5 [4.4–16.9] ms vs raw httpx 6.3 [2.1–10.6] ms",
        }
    )
    rows = run_all.json_rows("first_token", "a note\n" + line)
    assert [r.result for r in rows] == ["UNRESOLVED (spread 8.6 ms > margin 1.8 ms)"]
    shown = run_all.table(rows)
    assert "nodecode 9.5 [4.4–16.9] ms vs raw httpx 6.3 [2.1–10.6] ms" in shown
    assert shown.endswith(
        "1 bars: 0 pass, 0 fail, 1 unresolved, 0 error; 0 rows shown that are not a bar"
    )


def test_a_row_that_is_not_a_bar_is_shown_but_not_counted_as_one() -> None:
    def line(bar: str, result: str) -> str:
        row = {"bar": bar, "measured": 3.0, "goal": 2.0, "pass": False, "unit": "×"}
        return json.dumps({**row, "result": result, "figures": "2000 21 ms vs 200 7 ms"})

    out = "\n".join(
        [
            line("request round (first ask of an App), 2,000 vs 200 messages", "NOT A BAR (why)"),
            line("request round (warm App), 2,000 vs 200 messages", "FAIL"),
        ]
    )
    shown = run_all.table(run_all.json_rows("flat_costs", out))
    assert "NOT A BAR (why)" in shown and "2000 21 ms vs 200 7 ms" in shown
    assert shown.endswith(
        "1 bars: 0 pass, 1 fail, 0 unresolved, 0 error; 1 row shown that is not a bar"
    )


def test_first_ask_row_keeps_its_verdict_and_shows_the_reads(tmp_path: Path) -> None:
    import flat_costs
    from nodecode.log import sessions as session
    from nodecode.log.store import Store

    home = tmp_path / "home"
    store = Store(home / "store" / "default.db")
    sid = session.create(store)
    for i in range(3):
        store.append(sid, "user", role="user", text=f"message {i}")
    store.close()
    ms = flat_costs.rows_read(home, sid, tmp_path / "copy")
    assert ms > 0 and not (tmp_path / "copy").exists()  # read through a copy, then gone

    tight = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8]
    v = ratio_verdict([x * 3 for x in tight], tight, 2.0, ("2000", "200"))
    row = flat_costs.first_ask_row(v, {"2000": [3.8, 3.7], "200": [0.5, 0.5]}, tight)
    assert row.result == "NOT A BAR (FAIL at ≤ 2×: a new App reads every row once)"
    assert row.measured == v.measured and row.figures.startswith(v.figures)
    assert "the rows' read alone 2000 3.8 [3.7–3.8] ms vs 200 0.5 [0.5–0.5] ms" in row.figures
    assert row.figures.endswith("it grows 3.2 ms of the 10.0 ms the bar allows")
