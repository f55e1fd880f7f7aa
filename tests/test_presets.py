"""Providers from models.dev (design.md §Providers): "provider": "ID" works for any
provider the shipped models.dev table lists whose API nodecode speaks, with no
providers block; a block overrides any field; one whose SDK nodecode does not
speak is one line."""

from __future__ import annotations

import json

from helpers import run_cli, write_config

DEEPSEEK_KEY = "sk-deepseek-0123456789abcdefghijkl"


def configure(home, **config) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.jsonc").write_text(json.dumps(config))


def status(home, workspace, env):
    run_cli("new", home=home, cwd=workspace, env=env)
    done = run_cli("status", "--json", home=home, cwd=workspace, env=env)
    return done, (json.loads(done.stdout) if done.returncode == 0 else None)


def test_a_models_dev_provider_resolves_with_no_providers_block(tmp_path, workspace):
    home = tmp_path / "home"
    configure(home, provider="deepseek", model="deepseek-chat")
    done, r = status(home, workspace, {"DEEPSEEK_API_KEY": DEEPSEEK_KEY})
    assert done.returncode == 0, done.stderr
    assert r["resolved"] == {
        "id": "deepseek",
        "type": "openai",
        "base_url": "https://api.deepseek.com",
        "from": "models.dev",
        "key": {"env": "DEEPSEEK_API_KEY"},
    }
    assert DEEPSEEK_KEY not in done.stdout + done.stderr
    assert (r["window"], r["source"]) == (1000000, "models.dev snapshot")


def test_the_wire_format_follows_the_sdk_and_the_first_key_variable_set(tmp_path, workspace):
    home = tmp_path / "home"
    configure(home, provider="google", model="gemini-2.5-pro")
    done, r = status(home, workspace, {"GEMINI_API_KEY": "g-key-0123456789abcdef"})
    assert done.returncode == 0, done.stderr
    assert r["resolved"]["type"] == "google"
    assert r["resolved"]["base_url"] == "https://generativelanguage.googleapis.com/v1beta"
    assert r["resolved"]["key"] == {"env": "GEMINI_API_KEY"}  # the first of its env set
    configure(home, provider="groq", model="llama-3.3-70b-versatile")
    done, r = status(home, workspace, {"GROQ_API_KEY": "gsk-0123456789abcdef"})
    assert (r["resolved"]["type"], r["resolved"]["base_url"]) == (
        "openai",
        "https://api.groq.com/openai/v1",
    )


def test_an_anthropic_sdk_provider_gets_the_host_as_its_base(tmp_path, workspace):
    home = tmp_path / "home"
    configure(home, provider="minimax", model="MiniMax-M2")
    done, r = status(home, workspace, {"MINIMAX_API_KEY": "mm-0123456789abcdef"})
    assert done.returncode == 0, done.stderr
    assert r["resolved"]["type"] == "anthropic"
    assert r["resolved"]["base_url"] == "https://api.minimax.io/anthropic"  # /v1/messages follows


def test_a_providers_block_overrides_a_presets_field(tmp_path, workspace, loopback):
    home = tmp_path / "home"
    srv = loopback([{"text": "from the override"}])
    configure(
        home,
        provider="deepseek",
        model="deepseek-chat",
        providers={"deepseek": {"base_url": srv.url + "/v1"}},
    )
    env = {"DEEPSEEK_API_KEY": DEEPSEEK_KEY}
    done, r = status(home, workspace, env)
    assert r["resolved"]["base_url"] == srv.url + "/v1"
    assert r["resolved"]["from"] == "models.dev, with config.jsonc's settings"
    asked = run_cli("ask", "hi", home=home, cwd=workspace, env=env)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip() == "from the override"
    assert srv.model_requests[0].path == "/v1/chat/completions"
    assert srv.model_requests[0].headers["authorization"] == f"Bearer {DEEPSEEK_KEY}"


def test_a_provider_whose_sdk_nodecode_does_not_speak_is_one_line(tmp_path, workspace):
    home = tmp_path / "home"
    configure(home, provider="amazon-bedrock", model="anthropic.claude-sonnet-4")
    run_cli("new", home=home, cwd=workspace)
    done = run_cli("status", home=home, cwd=workspace)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "nodecode: provider 'amazon-bedrock' (Amazon Bedrock) speaks through "
        "@ai-sdk/amazon-bedrock, which nodecode does not: give providers.amazon-bedrock a "
        '"type" (anthropic, openai, openai-responses, google) and a "base_url" in config.jsonc'
    ]


def test_a_provider_no_source_knows_is_one_line(tmp_path, workspace):
    home = tmp_path / "home"
    configure(home, provider="nowhere", model="m")
    run_cli("new", home=home, cwd=workspace)
    done = run_cli("status", home=home, cwd=workspace)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("nodecode: config.jsonc: provider 'nowhere' is not defined and ")
    assert "models.dev lists no such provider" in line


def test_a_keyed_preset_is_offered_by_the_model_picker_and_its_key_redacted(
    tmp_path, workspace, loopback
):
    srv = loopback([{"text": f"the key is {DEEPSEEK_KEY}"}])
    home = tmp_path / "home"
    write_config(home, srv)
    env = {"DEEPSEEK_API_KEY": DEEPSEEK_KEY}
    asked = run_cli("ask", "hi", home=home, cwd=workspace, env=env)
    assert asked.returncode == 0, asked.stderr
    assert DEEPSEEK_KEY not in asked.stdout and "[redacted:DEEPSEEK_API_KEY]" in asked.stdout
