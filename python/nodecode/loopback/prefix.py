"""The loopback server's automatic prompt cache, for the formats that mark no
breakpoints (OpenAI's Responses API, Gemini's implicit caching): a request reads
the longest prefix of whole units (instructions and tools, then each input item
or content) that an earlier request to the same model sent, when that prefix
reaches the minimum (1024 tokens, as both providers document, unless the server
is given another). Entries never expire here; OpenAI's 128-token rounding is
left out so that small test prompts show their cached part exactly."""

from __future__ import annotations

import hashlib
import threading

DEFAULT_MIN_TOKENS = 1024


class PrefixCache:
    def __init__(self, min_tokens: int | None = None) -> None:
        self.min_tokens = DEFAULT_MIN_TOKENS if min_tokens is None else min_tokens
        self._seen: set[bytes] = set()
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
        with self._lock:
            for key, upto in hashes:
                if key in self._seen and upto >= self.min_tokens:
                    read = upto
            self._seen.update(key for key, _ in hashes)
        return read
