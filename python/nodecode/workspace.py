"""Where a session's work lives: the open store, its name, the home and the workspace root.

Domain code takes this small value (or just the store) instead of the App, so
it depends on what it uses and nothing imports the composition root.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodecode.log.store import Store


@dataclass(frozen=True, eq=False)
class Workspace:
    """One store opened in one home, for work in the directory ``cwd``."""

    store: Store
    store_name: str
    home: Path
    cwd: Path
    environ: Mapping[str, str]
    # Text, bytes or a payload without the keys: what a person writes is redacted
    # with it before it is logged, stored or sent (the App passes its redactor).
    redact: Callable[[Any], Any] = lambda obj: obj

    def context_dir(self, sid: str) -> Path:
        """The session's own folder for its context file and receipts."""
        return self.home / "context" / self.store_name / sid

    def context_file(self, sid: str) -> Path:
        return self.context_dir(sid) / "context.txt"

    def receipt_file(self, sid: str) -> Path:
        return self.context_dir(sid) / "context.receipt.txt"
