"""Every error nodecode raises on purpose, in one tree.

NodecodeError                 base; ``str(e)`` is one line a person can act on
├── UserError                 bad input from the person (CLI exit 1)
│   ├── ConfigError           config.jsonc or environment is wrong
│   ├── SessionError          unknown session, no current session
│   ├── SessionBusy           another process runs a turn in this session
│   └── DoesNotFit            even after eviction the request is over the budget
├── StoreError                the database cannot be opened or migrated, is damaged,
│                             or is another program's
├── CellError                 a cell could not be read or a verb failed;
│   │                         becomes the call's error result, never a crash
│   └── WorkspaceEscape       a path leaves the workspace / context folder
├── ProviderError             the model provider answered with an error
│   ├── ContextOverflow       the request was too large (``maximum`` when named)
│   └── ProviderFailed        still failing after the retries (CLI exit 3)
└── Stopped                   the person stopped the turn (CLI exit 130)

Errors become messages only at a boundary (CLI, host, the cell evaluator).
A message names the thing, what was expected and what was found. No message
ever carries an API key: keys are redacted before anything is formatted.
"""

from __future__ import annotations


class NodecodeError(Exception):
    """Base of every deliberate nodecode error."""


class UserError(NodecodeError):
    """The person asked for something that cannot be done as asked."""


class ConfigError(UserError):
    """config.jsonc or the environment is wrong."""


class SessionError(UserError):
    """A session that does not exist, or no session chosen."""


class SessionBusy(UserError):
    """Another process holds the lease of this session."""


class DoesNotFit(UserError):
    """Even with everything evictable evicted, the request is over the budget:
    it is not sent (a person's problem to solve, not the provider's)."""


class StoreError(NodecodeError):
    """The store cannot be opened, migrated, read or written (damaged, or another
    program's database)."""


class CellError(NodecodeError):
    """A cell could not be read or one of its forms failed."""


class WorkspaceEscape(CellError):
    """A path resolves outside the workspace and the session's context folder."""


class ProviderError(NodecodeError):
    """The provider answered with an error (after reading its body)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


class ContextOverflow(ProviderError):
    """The request was rejected as too large for the model's window.

    ``maximum`` is the window the error names (M in "A + B > M" texts), or None
    when the text names no number; ``prompt`` is the size it reports, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        maximum: int | None = None,
        prompt: int | None = None,
    ):
        super().__init__(message, status=status, retryable=False)
        self.maximum = maximum
        self.prompt = prompt


class ProviderFailed(ProviderError):
    """The provider kept failing after every retry."""


class Stopped(NodecodeError):
    """The person stopped the running turn."""


def one_line(exc: BaseException) -> str:
    """An exception as the one line a person reads (the type only when unexpected)."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(exc, NodecodeError):
        return first or type(exc).__name__
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
