"""parse_overflow against every error body in tests/fixtures/errors, plus inline variants."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nodecode.errors import ContextOverflow, ProviderError
from nodecode.providers.http import Provider
from nodecode.providers.overflow import parse_overflow

if TYPE_CHECKING:
    from conftest import ReplayServer

# file → (status, maximum, prompt); maximum/prompt None when the body names none.
OVERFLOWS: dict[str, tuple[int | None, int | None, int | None]] = {
    "anthropic_prompt_too_long_400.json": (400, 200000, 200251),
    "anthropic_input_plus_max_tokens_exceeds_400.json": (400, 200000, 199759),
    "openai_context_length_exceeded_400.json": (400, 4097, 4294),
    "openai_context_length_exceeded_functions_400.message.txt": (400, 128000, 202868),
    "openai_responses_stream_error_context_length_exceeded.json": (None, None, None),
    "llamacpp_exceed_context_size_400_current.json": (400, 32768, 36017),
    "llamacpp_exceed_context_size_400_2025-10.json": (400, 8192, 14429),
    "llamacpp_context_size_exceeded_500.json": (500, None, None),
    "vllm_context_400_v0.10ish.json": (400, 3, 8),
    "vllm_max_tokens_too_large_400.json": (400, 4096, 2778),
    "openrouter_context_400.json": (400, 16384, 94307),
    "ollama_embed_input_too_long_400.json": (400, None, None),
    "ollama_wrapped_llamacpp_context_400.json": (400, 4096, 9177),
}
NOT_OVERFLOWS: dict[str, int] = {
    "anthropic_overloaded_529.json": 529,
    "anthropic_tool_use_without_tool_result_400.json": 400,
    "anthropic_unexpected_tool_use_id_400.json": 400,
}


def test_every_error_fixture_is_classified(fixtures_dir: Path) -> None:
    on_disk = {p.name for p in (fixtures_dir / "errors").iterdir()}
    assert on_disk == set(OVERFLOWS) | set(NOT_OVERFLOWS)


@pytest.mark.parametrize("name", sorted(OVERFLOWS))
def test_overflow_body_is_recognised_with_its_numbers(name: str, fixtures_dir: Path) -> None:
    status, maximum, prompt = OVERFLOWS[name]
    body = (fixtures_dir / "errors" / name).read_text()

    overflow = parse_overflow(status, body)

    assert isinstance(overflow, ContextOverflow)
    assert (overflow.maximum, overflow.prompt, overflow.status) == (maximum, prompt, status)
    assert "\n" not in str(overflow)


@pytest.mark.parametrize("name", sorted(NOT_OVERFLOWS))
def test_other_error_bodies_are_not_overflow(name: str, fixtures_dir: Path) -> None:
    body = (fixtures_dir / "errors" / name).read_text()
    assert parse_overflow(NOT_OVERFLOWS[name], body) is None


@pytest.mark.parametrize(
    ("body", "maximum", "prompt"),
    [
        # LM Studio, error as a plain string (providers.md §2.5)
        (
            (
                '{"error":"The number of tokens to keep from the initial prompt is greater than the context'
                " length (n_keep: 13055>= n_ctx: 4096). Try to load the model with a larger context length,"
                ' or provide a shorter input."}'
            ),
            4096,
            13055,
        ),
        ('{"error":"Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"}', 7424, 15028),
        (
            (
                '{"error":"The number of tokens to keep from the initial prompt is greater than the context'
                ' length."}'
            ),
            None,
            None,
        ),
        # vLLM after PR #36197
        (
            (
                '{"error":{"message":"This model\'s maximum context length is 262144 tokens. However, you '
                "requested 128000 output tokens and your prompt contains at least 134145 input tokens, for "
                'a total of at least 262145 tokens.","type":"BadRequestError","code":400}}'
            ),
            262144,
            134145,
        ),
        # OpenAI old completion wording / DeepSeek
        (
            (
                '{"error":{"message":"This model\'s maximum context length is 131072 tokens. However, you '
                "requested 131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the"
                ' length of the messages or completion.","type":"invalid_request_error"}}'
            ),
            131072,
            122942,
        ),
        # llama.cpp non-splittable input
        (
            (
                '{"error":{"code":400,"message":"input (9000 tokens) is larger than the max context size '
                '(8192 tokens). skipping","type":"exceed_context_size_error"}}'
            ),
            8192,
            9000,
        ),
        # OpenRouter with output named too
        (
            (
                '{"error":{"message":"This endpoint\'s maximum context length is 131072 tokens. However, you'
                ' requested about 139956 tokens (7884 of text input, 131072 in the output).","code":400}}'
            ),
            131072,
            7884,
        ),
    ],
)
def test_overflow_wording_variants(body: str, maximum: int | None, prompt: int | None) -> None:
    overflow = parse_overflow(400, body)
    assert overflow is not None
    assert (overflow.maximum, overflow.prompt) == (maximum, prompt)


@pytest.mark.parametrize(
    "body",
    [
        (
            '{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, '
            'Used 29000, Requested 2000.","type":"tokens","code":"rate_limit_exceeded"}}'
        ),
        '{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}',
        "<html>502 Bad Gateway</html>",
        "",
    ],
)
def test_unrelated_errors_are_not_overflow(body: str) -> None:
    assert parse_overflow(429, body) is None


def test_overflow_over_http_raises_at_once_without_retry(
    server: ReplayServer, fixtures_dir: Path, anthropic: Provider
) -> None:
    body = (fixtures_dir / "errors" / "anthropic_prompt_too_long_400.json").read_bytes()
    server.script(status=400, body=body)

    with pytest.raises(ContextOverflow) as caught:
        anthropic.stream({"model": "m", "messages": []})

    assert (caught.value.maximum, caught.value.prompt) == (200000, 200251)
    assert str(caught.value).startswith(
        "anthropic: context overflow (HTTP 400): prompt is too long"
    )
    assert len(server.requests) == 1


def test_llamacpp_overflow_with_status_500_is_not_retried(
    server: ReplayServer, fixtures_dir: Path, openai: Provider
) -> None:
    body = (fixtures_dir / "errors" / "llamacpp_context_size_exceeded_500.json").read_bytes()
    server.script(status=500, body=body)

    with pytest.raises(ContextOverflow):
        openai.stream({"model": "m", "messages": []})

    assert len(server.requests) == 1


def test_overflow_as_a_stream_error_event_raises_context_overflow(
    server: ReplayServer, openai: Provider
) -> None:
    chunk = (
        'data: {"error":{"message":"This model\'s maximum context length is 4097 tokens. '
        'However, your messages resulted in 4294 tokens.","code":"context_length_exceeded"}}'
        "\n\n"
    )
    server.script(body=chunk.encode())

    with pytest.raises(ContextOverflow) as caught:
        openai.stream({"model": "m", "messages": []})

    assert caught.value.maximum == 4097
    assert len(server.requests) == 1


def test_a_plain_400_is_a_provider_error_naming_status_type_and_message(
    server: ReplayServer, fixtures_dir: Path, anthropic: Provider
) -> None:
    body = fixtures_dir / "errors" / "anthropic_tool_use_without_tool_result_400.json"
    server.script(status=400, body=body.read_bytes())

    with pytest.raises(ProviderError) as caught:
        anthropic.stream({"model": "m", "messages": []})

    assert not isinstance(caught.value, ContextOverflow)
    assert str(caught.value).startswith(
        "anthropic: HTTP 400 invalid_request_error: messages.114: `tool_use` ids were found"
    )
    assert caught.value.status == 400
    assert len(server.requests) == 1
