"""The loopback server's automatic prompt cache, for the formats that mark no
breakpoints (OpenAI's chat completions and Responses API, Gemini's implicit
caching): a request reads the longest prefix of whole units (instructions and
tools, then each message, input item or content) that an earlier request to the
same model sent, when that prefix reaches the minimum (1024 tokens, as both
providers document, unless the server is given another). An entry unused for
``lifetime`` seconds on the server's clock is gone (OpenAI documents 5–10
minutes; the shorter is taken); reading it refreshes it. OpenAI's 128-token
rounding is left out so that small test prompts show their cached part exactly."""

from __future__ import annotations

import hashlib
import threading

from nodecode.loopback.cache import Clock

DEFAULT_MIN_TOKENS = 1024
LIFETIME = 300.0


class PrefixCache:
    def __init__(
        self, min_tokens: int | None = None, clock: Clock | None = None, lifetime: float = LIFETIME
    ) -> None:
        self.min_tokens = DEFAULT_MIN_TOKENS if min_tokens is None else min_tokens
        self.clock = clock or Clock()
        self.lifetime = lifetime
        self._used: dict[bytes, float] = {}  # prefix key → when last written or read
        self._lock = threading.Lock()

    def apply(self, model: str, units: list[tuple[str, int]]) -> int:
        """The tokens read from cache for a prompt of ``units``; remembers its prefixes."""
        digest = hashlib.sha256(model.encode())
        total = read = 0
        hashes = []
        for text, tokens in units:
            digest.update(text.encode())
            total += tokens
            hashes.append((digest.copy().digest(), total))
        now = self.clock.now()
        with self._lock:
            for key, upto in hashes:
                used = self._used.get(key)
                if used is not None and now - used < self.lifetime and upto >= self.min_tokens:
                    read = upto
            for key, _ in hashes:
                self._used[key] = now
        return read
