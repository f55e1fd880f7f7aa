"""Model providers: one module per wire format (``anthropic``, ``openai``), each
owning its request bodies, stream parsing, usage and overflow rules and URL;
``registry`` maps a config ``type`` to its format; ``http`` streams, retries and
cancels for all of them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodecode.providers.http import Provider


def make_provider(type: str, *, base_url: str | None, api_key: str | None, **kw: Any) -> Provider:
    """A provider speaking config ``type``; ``kw`` goes to the constructor (timeout,
    max_retries, name…)."""
    from nodecode.providers import registry
    from nodecode.providers.http import Provider

    return Provider(registry.wire(type), base_url, api_key, **kw)
