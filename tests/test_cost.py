"""Cost in money (``:help nodecode-cost``): each request, each turn and the session
priced from models.dev's table, shown in the log, the tree and ``/context``; an
edit's receipt says what it does to the next request's cost. Through the real CLI
against the loopback, every figure checked against a hand computation from the
usage the loopback recorded and the prices in the shipped models.dev snapshot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import ROOT, run_cli, write_config

SNAPSHOT = ROOT / "python" / "nodecode" / "data" / "models_dev"
# Anthropic's prompt-caching page, "Pricing": read 0.1×, 5-minute write 1.25×,
# 1-hour write 2× the base input price.
READ, WRITE_5M, WRITE_1H = 0.1, 1.25, 2.0


def listed(provider: str, model: str) -> dict:
    """The model's prices as the shipped models.dev snapshot lists them."""
    return json.loads((SNAPSHOT / f"{provider}.json").read_text())[model]["cost"]


def anthropic_dollars(usage: dict, prices: dict) -> float:
    """A request's cost by hand: the loopback's recorded parts at the listed prices."""
    base = prices["input"]
    return (
        usage["input"] * base
        + usage["cache_read"] * prices["cache_read"]
        + usage["cache_write_5m"] * prices["cache_write"]
        + usage["cache_write_1h"] * base * WRITE_1H
        + usage["output"] * prices["output"]
    ) / 1e6


def input_dollars(usage: dict, prices: dict) -> float:
    return anthropic_dollars({**usage, "output": 0}, prices)


def money(x: float) -> str:
    return f"${x:.2f}" if x >= 1 else f"${x:.4f}"


def priced_home(tmp_path: Path, srv, ptype: str, dev: str, model: str) -> Path:
    home = write_config(tmp_path / "home", srv, ptype)
    config = json.loads((home / "config.jsonc").read_text().split("\n", 1)[1])
    config["model"] = model
    config["providers"]["loopback"]["models_dev"] = dev
    (home / "config.jsonc").write_text(json.dumps(config))
    return home


def words(i: int, n: int = 400) -> str:
    return f"topic{i} " + " ".join(f"w{i}x{j}" for j in range(n))


class Cli:
    def __init__(self, home: Path, cwd: Path) -> None:
        self.home, self.cwd = home, cwd

    def __call__(self, *args: str) -> str:
        r = run_cli(*args, home=self.home, cwd=self.cwd)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def json(self, *args: str):
        return json.loads(self(*args, "--json"))


@pytest.fixture
def sonnet(loopback, tmp_path, workspace):
    """A session of three asks to claude-sonnet-4-5 (Anthropic's prices) on the loopback."""
    srv = loopback([{"text": f"reply {i} " + "ok " * 40} for i in range(10)])
    cli = Cli(priced_home(tmp_path, srv, "anthropic", "anthropic", "claude-sonnet-4-5"), workspace)
    cli("new")
    for i in range(3):
        cli("ask", words(i))
    return srv, cli


def test_each_request_turn_and_the_session_show_what_they_cost(sonnet):
    srv, cli = sonnet
    prices = listed("anthropic", "claude-sonnet-4-5")
    costs = [anthropic_dollars(r.usage, prices) for r in srv.model_requests]
    assert len(costs) == 3 and all(c > 0 for c in costs)
    assert any(r.usage["cache_write_1h"] for r in srv.model_requests)  # both write prices used
    assert any(r.usage["cache_read"] for r in srv.model_requests)

    log = [line for line in cli("recall-log").splitlines() if "· request]" in line]
    assert [line.rsplit(" · ", 1)[1] for line in log] == [money(c) for c in costs]

    status = cli.json("status")
    assert status["last_request"]["cost"] == pytest.approx(costs[-1], abs=1e-12)
    assert status["cost"] == {
        "dollars": pytest.approx(sum(costs), abs=1e-12),
        "priced": 3,
        "unpriced": 0,
    }
    assert f"spent: {money(sum(costs))} over 3 requests" in cli("status").splitlines()

    tree = cli.json("tree")
    assert [n["cost"] for n in tree] == [pytest.approx(c, abs=1e-12) for c in costs]
    assert [line.split(" · ")[3].split()[0] for line in cli("tree").splitlines()] == [
        money(c) for c in costs
    ]


def test_recall_sums_the_session_per_turn_and_in_all(sonnet):
    srv, cli = sonnet
    prices = listed("anthropic", "claude-sonnet-4-5")
    costs = [anthropic_dollars(r.usage, prices) for r in srv.model_requests]

    summed = cli.json("recall-cost")

    assert summed["dollars"] == pytest.approx(sum(costs), abs=1e-12)
    assert (summed["priced"], summed["unpriced"]) == (3, 0)
    assert [t["dollars"] for t in summed["turns"].values()] == [
        pytest.approx(c, abs=1e-12) for c in costs
    ]
    lines = cli("recall-cost").splitlines()
    assert lines[:3] == [f"turn {i + 1}: {money(c)} over 1 request" for i, c in enumerate(costs)]
    assert lines[3] == f"session {summed['session']}: {money(sum(costs))} over 3 requests"


def test_a_model_without_a_price_shows_tokens_only(loopback, tmp_path, workspace):
    srv = loopback([{"text": "one"}, {"text": "two"}])
    cli = Cli(write_config(tmp_path / "home", srv), workspace)  # loopback-model: no price
    cli("new")
    cli("ask", "hello")
    cli("ask", "again")
    assert "$" not in cli("recall-log") + cli("tree")
    assert cli("recall-cost").splitlines()[-1].endswith(": no price known: tokens only")
    status = cli.json("status")
    assert status["cost"] == {"dollars": 0, "priced": 0, "unpriced": 2}
    assert status["last_request"]["cost"] is None and status["next"]["dollars"] is None
    text = cli("status")
    assert "spent: no price known: tokens only" in text and "$" not in text


def test_cached_input_of_an_openai_model_is_priced_at_its_cache_read_price(
    loopback, tmp_path, workspace
):
    srv = loopback([{"text": "one"}, {"text": "two"}], cache_min_tokens=256)
    cli = Cli(priced_home(tmp_path, srv, "openai-responses", "openai", "gpt-5.1"), workspace)
    cli("new")
    cli("ask", words(0))
    cli("ask", "and then?")
    usage = srv.model_requests[-1].usage
    assert usage["cache_read"] > 0 and usage["cache_write"] == 0
    p = listed("openai", "gpt-5.1")  # input, output and cache_read: no cache_write listed
    by_hand = (
        (usage["input"] - usage["cache_read"]) * p["input"]
        + usage["cache_read"] * p["cache_read"]
        + usage["output"] * p["output"]
    ) / 1e6
    assert cli.json("status")["last_request"]["cost"] == pytest.approx(by_hand, abs=1e-12)


def own_prices(home: Path, cost: dict) -> None:
    """A models.dev copy (as `nodecode models refresh` keeps it) listing the loopback's
    model under provider `priced` with ``cost``, and the config pointing at it."""
    folder = home / "cache" / "models.dev"
    folder.mkdir(parents=True)
    (folder / "_providers.json").write_text(json.dumps({"priced": {"name": "Priced"}}))
    entry = {"loopback-model": {"cost": cost, "limit": {"context": 200000, "output": 8192}}}
    (folder / "priced.json").write_text(json.dumps(entry))
    config = json.loads((home / "config.jsonc").read_text().split("\n", 1)[1])
    config["providers"]["loopback"]["models_dev"] = "priced"
    (home / "config.jsonc").write_text(json.dumps(config))


def test_anthropic_cache_prices_models_dev_leaves_out_follow_anthropics_rules(
    loopback, tmp_path, workspace
):
    srv = loopback([{"text": "one"}, {"text": "two"}])
    home = write_config(tmp_path / "home", srv)
    own_prices(home, {"input": 2.0, "output": 8.0})  # no cache prices listed
    cli = Cli(home, workspace)
    cli("new")
    cli("ask", words(0))
    cli("ask", words(1))
    used = [r.usage for r in srv.model_requests]
    assert used[0]["cache_write_5m"] and used[1]["cache_read"] and used[1]["cache_write_1h"]
    by_rule = {"input": 2.0, "output": 8.0, "cache_read": 2.0 * READ, "cache_write": 2.0 * WRITE_5M}
    costs = [anthropic_dollars(u, by_rule) for u in used]
    assert cli.json("recall-cost")["dollars"] == pytest.approx(sum(costs), abs=1e-12)


def test_a_request_using_a_part_without_a_price_shows_tokens_only(loopback, tmp_path, workspace):
    srv = loopback([{"text": "one"}, {"text": "two"}], cache_min_tokens=256)
    home = write_config(tmp_path / "home", srv, "openai-responses")
    own_prices(home, {"input": 1.0, "output": 2.0})  # cached input has no price here
    cli = Cli(home, workspace)
    cli("new")
    cli("ask", words(0))
    cli("ask", "and then?")
    first, second = (r.usage for r in srv.model_requests)
    assert first["cache_read"] == 0 and second["cache_read"] > 0
    spent = cli.json("recall-cost")
    assert (spent["priced"], spent["unpriced"]) == (1, 1)
    assert spent["dollars"] == pytest.approx(
        (first["input"] * 1.0 + first["output"] * 2.0) / 1e6, abs=1e-12
    )
    log = [line for line in cli("recall-log").splitlines() if "· request]" in line]
    assert "$" in log[0] and "$" not in log[1]
    assert cli.json("status")["last_request"]["cost"] is None


# What an edit costs, as :w and (context :drop) say it ("Cost: … edit.") and a
# receipt logs it ("cost: … edit").
COST = (
    r"cache kept through message (\d+) \(([\d,]+) tokens\); the next request "
    r"re-writes ([\d,]+) tokens: about \$([\d.]+) more than without the edit"
)
DROP_LINE = re.compile(r"^Cost: " + COST + r"\.$", re.M)


def test_a_drop_says_what_the_next_request_will_cost_and_it_costs_that(sonnet):
    srv, cli = sonnet
    prices = listed("anthropic", "claude-sonnet-4-5")
    without = cli.json("status")["next"]
    assert without["uncached"] == 0 and without["cache_read"] > 0  # all of it cached
    ids = [int(line.split()[1]) for line in cli("recall-log").splitlines() if "· user]" in line]

    said = cli("eval", f"(context :drop {ids[1]})")  # the second ask: past the first turn
    found = DROP_LINE.search(said)
    assert found, said
    through, kept, rewrite, more = found.groups()
    after = cli.json("status")["next"]
    assert int(through) == ids[1] - 1 and int(kept.replace(",", "")) == after["cache_read"]
    written = after["cache_write"] + after["cache_write_1h"]
    assert (
        int(rewrite.replace(",", ""))
        == written - without["cache_write"] - without["cache_write_1h"]
    )
    assert float(more) == pytest.approx(after["dollars"] - without["dollars"], abs=5e-5)

    cli("ask", "short")  # the next request: what was predicted, and this ask
    usage = srv.model_requests[-1].usage
    # The one block the prediction could not know: the ask (with the reply it drew,
    # which the next request did not carry: an upper bound).
    block = cli.json("status")["per_turn"]["4"]
    assert 0 < block < 200
    assert usage["cache_read"] == after["cache_read"]
    assert written <= usage["cache_write"] <= written + block
    actual = input_dollars(usage, prices)
    most = block * prices["input"] * WRITE_1H / 1e6  # the block at the dearest price
    assert abs(actual - after["dollars"]) <= most


RECEIPT_COST = re.compile(r"^cost: " + COST + "$", re.M)


def test_a_saved_edit_taken_by_the_next_request_has_its_cost_in_the_receipt(sonnet):
    srv, cli = sonnet
    prices = listed("anthropic", "claude-sonnet-4-5")
    path = Path(cli("context").strip())
    text = path.read_text()
    assert text.count("topic1 ") == 1
    path.write_text(text.replace("topic1 ", "topic1 rewritten by hand ", 1))  # the second ask

    cli("ask", "short")  # takes the edit, then sends the request the receipt foresaw
    receipt = (path.parent / "context.receipt.txt").read_text()
    found = RECEIPT_COST.search(receipt)
    assert found, receipt
    through, kept, rewrite = (int(g.replace(",", "")) for g in found.groups()[:3])
    more = float(found.group(4))
    ids = [int(line.split()[1]) for line in cli("recall-log").splitlines() if "· user]" in line]
    assert through == ids[1] - 1  # the rewritten ask is the first block the cache loses
    usage = srv.model_requests[-1].usage
    assert usage["cache_read"] == kept  # what the receipt said the cache keeps, it kept
    # Written again: the rewritten ask and all after it, less the one block it could not
    # know (this ask), within that block's tokens.
    block = cli.json("status")["per_turn"]["4"]
    written = usage["cache_write"]
    assert rewrite <= written <= rewrite + block
    # The money: those tokens written again instead of read, each at a 5-minute or a
    # 1-hour write price (the plan chooses per mark), by hand from the listed prices.
    cheapest = (prices["input"] * WRITE_5M - prices["cache_read"]) / 1e6
    dearest = (prices["input"] * WRITE_1H - prices["cache_read"]) / 1e6
    assert (rewrite - block) * cheapest - 5e-5 <= more <= rewrite * dearest + 5e-5
    logged = cli("recall-log", "--match", "%cost: cache kept%").split()[1]  # seq N
    assert found.group(0) in cli("recall-entry", logged)  # the receipt in the log says it too
