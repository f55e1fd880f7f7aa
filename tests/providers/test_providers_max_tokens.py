"""Chat completions: the field the reply limit goes in."""

from __future__ import annotations

import pytest
from nodecode.context.message import Message
from nodecode.errors import ConfigError
from nodecode.providers import registry
from nodecode.providers.wire import Request

KW = dict(model="m", system="be brief", tools=[], max_tokens=100)


# -- chat completions: the reply limit's field -----------------------------------------


@pytest.mark.parametrize(
    ("model", "entry", "field"),
    [
        ("gpt-4o-mini", {}, "max_tokens"),
        ("o3-mini", {}, "max_completion_tokens"),
        ("o1", {}, "max_completion_tokens"),
        ("gpt-5.1", {}, "max_completion_tokens"),
        ("openai/o4-mini", {}, "max_completion_tokens"),
        ("llama3", {"max_tokens_field": "max_completion_tokens"}, "max_completion_tokens"),
        ("gpt-5-mini", {"max_tokens_field": "max_tokens"}, "max_tokens"),
    ],
)
def test_chat_completions_send_the_reply_limit_in_the_field_the_model_takes(
    model, entry, field
) -> None:
    request = Request([Message(1, "user", "hi")], entry=entry, **{**KW, "model": model})
    body = registry.wire("openai").build(request).body
    assert body[field] == 100 and len({"max_tokens", "max_completion_tokens"} & set(body)) == 1


def test_an_unknown_max_tokens_field_is_one_config_error_naming_the_model() -> None:
    request = Request(
        [Message(1, "user", "hi")], entry={"max_tokens_field": "limit"}, where="models[x]", **KW
    )
    with pytest.raises(ConfigError, match=r"models\[x\]\.max_tokens_field"):
        registry.wire("openai").build(request)
