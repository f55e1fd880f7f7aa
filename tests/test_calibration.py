"""Calibration believes only plausible figures (trust, item 18): a reported usage
more than 4× off our count is ignored, and said so in the log and to the person;
a session's first request rejected as too large calibrates from the size the
provider's error named. Through the real CLI against the loopback server."""

from __future__ import annotations

import json
import re

import pytest
from helpers import WIRES, run_cli, write_config

ASK = "hello " * 1000  # with the system prompt and tools: about 1,750 tokens counted
NOTICE = re.compile(
    r"── notice: the provider reported 8 prompt tokens for a request counted at (\d+), "
    r"more than 4× off: not used to calibrate the fill"
)


def status(home, workspace) -> dict:
    out = run_cli("status", "--json", home=home, cwd=workspace)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("ptype", WIRES)
def test_a_reported_usage_far_off_the_count_is_ignored_and_logged(ptype, loopback, home, workspace):
    srv = loopback([{"text": "ok"}] * 2, usage_scale=1.25)
    write_config(home, srv, ptype)
    run_cli("new", home=home)
    assert run_cli("ask", ASK, home=home, cwd=workspace).returncode == 0
    believed = status(home, workspace)
    assert abs(believed["calibration"] - 1.25) < 0.03  # a tokenizer's difference: believed

    srv.reported_input = 8  # now a gateway that reports 8 tokens, whatever it was sent
    out = run_cli("ask", "and again", home=home, cwd=workspace)

    assert out.returncode == 0, out.stderr
    assert srv.model_requests[-1].usage["input"] == 8
    after = status(home, workspace)
    assert after["calibration"] == believed["calibration"]  # the last figure believed stands
    assert after["fill"] > 1.2 * after["counted"] > 1000  # not 8 tokens
    [notice] = [line for line in out.stderr.splitlines() if "not used to calibrate" in line]
    said = NOTICE.fullmatch(notice)
    assert said and int(said[1]) > 1000, notice
    log = run_cli("recall-log", home=home, cwd=workspace).stdout.splitlines()
    requests = [line for line in log if "· request]" in line]
    assert len(requests) == 2 and "usage in=8 " in requests[1]  # logged as reported
    assert requests[1].endswith("(not used to calibrate: implausible)")
    assert "not used to calibrate" not in requests[0]


# The Responses API's context-overflow error names no size: nothing to calibrate from.
NAMING_THE_SIZE = [w for w in WIRES if w != "openai-responses"]


@pytest.mark.parametrize("ptype", NAMING_THE_SIZE)
def test_a_first_request_rejected_as_too_large_calibrates_from_the_errors_count(
    ptype, loopback, home, workspace
):
    # The provider counts 1.5× what we do and its window is 2,000 of its tokens:
    # the first ask (about 1,750 of ours, 2,600 of its) is rejected, and it alone
    # does not fit the window learned, so no request ever reports a usage.
    srv = loopback([{"text": "never sent"}], usage_scale=1.5, window=2000)
    write_config(home, srv, ptype)
    run_cli("new", home=home)

    out = run_cli("ask", ASK, home=home, cwd=workspace)

    assert out.returncode == 1 and "the context does not fit" in out.stderr, out.stderr
    assert [r.status for r in srv.model_requests] == [400]
    now = status(home, workspace)
    assert abs(now["calibration"] - 1.5) < 0.03, now  # the error's count ÷ ours
    assert now["fill"] > 2000  # over the window, as the provider counts: not sent again blind


def test_a_prefix_the_provider_cached_is_cached_in_status_though_we_count_it_under_the_minimum(
    loopback, home, workspace
):
    # The provider counts 1.1× what we do: the prompt (about 980 of ours, 1,075 of
    # its) is over the model's 1,024-token minimum as it counts, and it caches it.
    srv = loopback([{"text": "ok"}], usage_scale=1.1, cache_min_tokens=1024)
    write_config(home, srv)
    run_cli("new", home=home)

    assert run_cli("ask", "word " * 200, home=home, cwd=workspace).returncode == 0

    wrote = srv.model_requests[-1].usage["cache_write"]
    now = status(home, workspace)
    assert now["counted"] < 1024 <= wrote, (now["counted"], wrote)  # the case itself
    assert now["last_request"]["cache_write"] == wrote
    assert now["cache"]["through"] is not None and now["cache"]["tokens"] >= 1024, now["cache"]
    text = run_cli("status", home=home, cwd=workspace).stdout
    assert "next request: cached through message " in text and "nothing cached" not in text
