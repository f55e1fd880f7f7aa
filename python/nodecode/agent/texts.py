"""What a model's call and a cell's result read as in the context (the agent loop
logs them so; ``context.message`` reads a call's text back)."""

from __future__ import annotations

import json

from nodecode.providers.types import ToolCall


def format_result(output: str, seq: int, limit: int) -> str:
    """A result as the model reads it: cut when long, ending ``[seq N]``."""
    body = output.rstrip("\n")
    if len(body) > limit:
        body = (
            body[:limit] + f"\n[cut: {limit} of {len(body)} characters shown · "
            f"whole output: (recall-entry {seq})]"
        )
    return (body + "\n" if body else "") + f"[seq {seq}]"


def call_text(call: ToolCall) -> str:
    """The call's text in the context: its cell, or the odd call as written."""
    if (
        call.name == "eval"
        and isinstance(call.input, dict)
        and isinstance(call.input.get("code"), str)
    ):
        return call.input["code"]
    return f"({call.name} {json.dumps(call.input, ensure_ascii=False)})"
