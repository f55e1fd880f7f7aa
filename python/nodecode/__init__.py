"""nodecode: an LLM coding agent whose context is an editable file."""

from __future__ import annotations

__version__ = "0.1.0"
