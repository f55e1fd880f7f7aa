"""The loopback's Responses API and Gemini streams judged by the official SDKs
(``openai``, ``google-genai``, test-only): every event it sends validates as the
SDK's typed model, and the SDK's own client streams a turn from it."""

from __future__ import annotations

import json
from typing import get_args

import httpx
import openai
import pytest
from google import genai
from google.genai import types as gtypes
from nodecode.loopback.replies import stream_error_frame
from openai.types.responses import ResponseStreamEvent

# The SDK's model class of each event type: validating against the one class gives
# a precise error where the union would list every class it tried.
EVENT_MODELS = {
    get_args(model.model_fields["type"].annotation)[0]: model
    for model in get_args(get_args(ResponseStreamEvent)[0])
}

ROUNDS = [
    {"text": "Let me look.", "thinking": ["First, list.", {"redacted": True}],
     "calls": [{"code": "(list-files)"}, {"name": "eval", "input": {"code": "(x)"}}]},
    {"text": "Plain answer."},
    {"text": "Thought it through.", "thinking": ["Short."]},
]  # fmt: skip
TOOLS = [{"type": "function", "name": "eval", "description": "run", "strict": False,
          "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}]  # fmt: skip


def sse_data(raw: bytes) -> list[dict]:
    return [
        json.loads(line[len("data: ") :])
        for line in raw.decode().splitlines()
        if line.startswith("data: ")
    ]


def test_every_responses_event_validates_as_the_openai_sdks_model(loopback):
    srv = loopback(ROUNDS, cache_min_tokens=1)
    body = {"model": "gpt-5", "input": [{"role": "user", "content": "hi"}], "tools": TOOLS,
            "stream": True, "store": False, "include": ["reasoning.encrypted_content"]}  # fmt: skip
    seen = set()
    for _ in ROUNDS:
        answer = httpx.post(srv.url + "/v1/responses", json=body, timeout=10)
        assert answer.status_code == 200
        for event in sse_data(answer.content):
            EVENT_MODELS[event["type"]].model_validate(event)  # raises on what the SDK refuses
            seen.add(event["type"])
    error = sse_data(stream_error_frame("openai-responses"))[0]
    EVENT_MODELS["error"].model_validate(error)
    assert {"response.reasoning_summary_text.delta", "response.function_call_arguments.delta",
            "response.output_text.delta", "response.completed"} <= seen  # fmt: skip


def test_the_openai_sdk_streams_a_turn_from_the_loopback(loopback):
    srv = loopback(ROUNDS)
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="sk-test", max_retries=0)
    with client.responses.stream(model="gpt-5", input="hi", tools=TOOLS) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    kinds = [item.type for item in final.output]
    assert kinds == ["reasoning", "reasoning", "message", "function_call", "function_call"]
    assert final.output[0].summary[0].text == "First, list."
    assert final.usage is not None and final.usage.input_tokens > 0
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="gpt-5",
            input=[
                {
                    "type": "reasoning",
                    "id": "rs_x",
                    "summary": [],
                    "encrypted_content": "gAAAAAforged",
                },
                {"role": "assistant", "content": "x"},
            ],  # fmt: skip
        )
    assert caught.value.code == "invalid_encrypted_content"


def test_every_gemini_event_validates_as_the_genai_sdks_model(loopback):
    srv = loopback(ROUNDS, cache_min_tokens=1)
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    url = srv.url + "/v1beta/models/gemini-3-flash:streamGenerateContent?alt=sse"
    for _ in ROUNDS:
        answer = httpx.post(url, json=body, timeout=10)
        assert answer.status_code == 200
        for event in sse_data(answer.content):
            gtypes.GenerateContentResponse.model_validate(event)


def test_the_genai_sdk_streams_a_turn_from_the_loopback(loopback):
    srv = loopback(ROUNDS)
    client = genai.Client(
        api_key="test-key",
        http_options=gtypes.HttpOptions(base_url=srv.url, api_version="v1beta"),
    )
    chunks = list(client.models.generate_content_stream(model="gemini-3-flash", contents="hi"))
    parts = [p for c in chunks for p in c.candidates[0].content.parts]
    assert "".join(p.text for p in parts if p.thought) == "First, list."
    calls = [p for p in parts if p.function_call]
    assert calls[0].thought_signature and not calls[1].thought_signature
    assert chunks[-1].candidates[0].finish_reason == gtypes.FinishReason.STOP
    assert chunks[-1].usage_metadata.prompt_token_count > 0
    with pytest.raises(genai.errors.ClientError) as caught:
        client.models.generate_content(model="gemini-3-flash", contents="hi")
    assert caught.value.code == 404  # the loopback speaks only the streaming endpoint
