"""The cell evaluator: the agent's one tool, ``eval``, runs a cell of Lisp forms.

Importing this package registers the file and shell verbs; other modules
(context, recall) register theirs with ``@verb`` when they are imported.
"""

from __future__ import annotations

from . import files, shell  # noqa: F401  (imported to register their verbs)
from .env import CellEnv, FileChange
from .evaluate import CellResult, evaluate, evaluate_call
from .forms import Form, Keyword, Pair, Sym, show_form
from .reader import first_comment, read_cell
from .registry import VERBS, Verb, verb

__all__ = [
    "VERBS",
    "CellEnv",
    "CellResult",
    "FileChange",
    "Form",
    "Keyword",
    "Pair",
    "Sym",
    "Verb",
    "evaluate",
    "evaluate_call",
    "first_comment",
    "read_cell",
    "show_form",
    "verb",
]
