"""The loopback model provider (tests and the demo): a local HTTP server speaking
the Anthropic and OpenAI wire formats, replying from a script. See ``server``."""

from __future__ import annotations

from nodecode.loopback.script import EXHAUSTED_TEXT, Round
from nodecode.loopback.server import LoopbackServer, Recorded, Reply, main

__all__ = ["EXHAUSTED_TEXT", "LoopbackServer", "Recorded", "Reply", "Round", "main"]
