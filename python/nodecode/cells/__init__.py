"""Cells: the agent's one tool, ``eval``, runs a cell of Lisp forms.

``reader`` reads a cell, ``evaluate`` runs it form by form against a
``CellEnv`` (``env``), looking verbs up in the one table ``table.VERBS``,
which is assembled from each verb module's ``VERBS`` (``files``, ``shell``,
``context.verbs``, ``recall``); ``registry`` declares and checks verbs.
This package imports nothing itself, so its modules can be used alone.
"""
