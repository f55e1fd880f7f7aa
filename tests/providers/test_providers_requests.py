"""What the server receives (path, headers, streaming flags), and keys kept out of messages."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers import openai_provider
from nodecode.errors import ConfigError, ProviderError, ProviderFailed
from nodecode.providers import make_provider
from nodecode.providers.http import Provider

if TYPE_CHECKING:
    from conftest import ReplayServer

BODY = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


def test_anthropic_request_path_headers_and_stream_flag(
    server: ReplayServer, fixtures_dir: Path, anthropic: Provider, api_key: str
) -> None:
    server.script(body=(fixtures_dir / "anthropic_basic_stream_sdk.sse").read_bytes())

    anthropic.stream(BODY)

    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == api_key
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"
    assert "authorization" not in request.headers
    assert request.body == {**BODY, "stream": True}


def test_openai_request_path_bearer_and_stream_options(
    server: ReplayServer, fixtures_dir: Path, openai: Provider, api_key: str
) -> None:
    server.script(body=(fixtures_dir / "openai_text_stream.sse").read_bytes())

    openai.stream({"model": "gpt", "messages": [], "stream_options": {"other": 1}})

    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {api_key}"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "model": "gpt",
        "messages": [],
        "stream": True,
        "stream_options": {"other": 1, "include_usage": True},
    }


def test_openai_without_a_key_sends_no_authorization(
    server: ReplayServer, fixtures_dir: Path
) -> None:
    server.script(body=(fixtures_dir / "llamacpp_text_stream.jsonl").read_bytes())

    with openai_provider(f"{server.url}/v1/", None) as provider:  # trailing slash tolerated
        provider.stream({"model": "m", "messages": []})

    assert server.requests[0].path == "/v1/chat/completions"
    assert "authorization" not in server.requests[0].headers


def test_the_callers_body_is_not_modified(
    server: ReplayServer, fixtures_dir: Path, openai: Provider
) -> None:
    server.script(body=(fixtures_dir / "openai_text_stream.sse").read_bytes())
    body = {"model": "m", "messages": []}

    openai.stream(body)

    assert body == {"model": "m", "messages": []}


def test_401_message_names_status_type_and_message_without_the_key(
    server: ReplayServer, openai: Provider, api_key: str
) -> None:
    body = (
        '{"error":{"message":"Incorrect API key provided: ' + api_key + '.",'
        '"type":"invalid_request_error","code":"invalid_api_key"}}'
    )
    server.script(status=401, body=body.encode())

    with pytest.raises(ProviderError) as caught:
        openai.stream(BODY)

    assert str(caught.value) == (
        "openai: HTTP 401 invalid_request_error: Incorrect API key provided: ***."
    )
    assert len(server.requests) == 1


def test_the_key_never_appears_in_retry_notes_or_failure(
    server: ReplayServer, anthropic: Provider, api_key: str
) -> None:
    body = '{"type":"error","error":{"type":"api_error","message":"boom with ' + api_key + '"}}'
    for _ in range(4):
        server.script(status=500, body=body.encode())
    notes: list[str] = []

    with pytest.raises(ProviderFailed) as caught:
        anthropic.stream(BODY, on_retry=notes.append)

    assert api_key not in str(caught.value) and "***" in str(caught.value)
    assert notes and all(api_key not in note for note in notes)
    assert "\n" not in str(caught.value)


def test_anthropic_error_without_json_body_is_one_bounded_line(
    server: ReplayServer, anthropic: Provider
) -> None:
    server.script(status=403, body=b"<html>\n<body>Forbidden</body>\n</html>" + b" x" * 500)

    with pytest.raises(ProviderError) as caught:
        anthropic.stream(BODY)

    message = str(caught.value)
    assert message.startswith("anthropic: HTTP 403: <html> <body>Forbidden</body> </html>")
    assert "\n" not in message and len(message) <= 400


def test_make_provider_builds_each_type(server: ReplayServer) -> None:
    anthropic = make_provider("anthropic", base_url=None, api_key="k")
    openai = make_provider("openai", base_url=f"{server.url}/v1", api_key=None, max_retries=1)

    assert anthropic.wire.type == "anthropic"
    assert anthropic.url() == "https://api.anthropic.com/v1/messages"
    assert openai.wire.type == "openai"
    assert openai.url() == f"{server.url}/v1/chat/completions"
    assert openai.max_retries == 1
    anthropic.close()
    openai.close()


def test_make_provider_rejects_an_unknown_type_naming_the_expected_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        make_provider("gemini", base_url=None, api_key=None)

    assert str(caught.value) == (
        "provider type must be one of 'anthropic', 'openai', 'openai-responses', 'google' "
        "(got 'gemini')"
    )
