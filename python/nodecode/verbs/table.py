"""The one verb table: every verb a cell can call, assembled here in one visible place.

Each verb module lists its verbs in ``VERBS``; nothing registers by being
imported, so this is the whole of what the agent's ``eval`` can reach.
"""

from __future__ import annotations

from nodecode.cells.registry import Verb, table
from nodecode.verbs import context as context_verbs
from nodecode.verbs import files, recall, shell

VERBS: dict[str, Verb] = table(files.VERBS, shell.VERBS, context_verbs.VERBS, recall.VERBS)
