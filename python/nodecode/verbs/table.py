"""The one verb table: every verb a cell can call, assembled here in one visible place.

Each verb module declares its verbs in its ``FAMILY``; nothing registers by
being imported, so this is the whole of what the agent's ``eval`` can reach,
and the order the system prompt lists them in (``verbs.prompt``).
"""

from __future__ import annotations

from nodecode.cells.registry import Table, table
from nodecode.verbs import context as context_verbs
from nodecode.verbs import files, recall, shell

VERBS: Table = table(files.FAMILY, shell.FAMILY, context_verbs.FAMILY, recall.FAMILY)
