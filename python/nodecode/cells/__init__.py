"""Cells: the agent's one tool, ``eval``, runs a cell of Lisp forms.

``reader`` reads a cell into ``forms``; ``evaluate`` runs it form by form
against a ``CellEnv`` (``env``), looking verbs up in the table the env
carries; ``registry`` declares verbs, checks their calls and assembles
tables; ``approval`` and ``paths`` are what verbs ask and where they may reach.
The verbs themselves live above, in ``nodecode.verbs``: nothing here imports
any of nodecode but ``errors``, ``paths``, ``words`` and ``cells`` itself
(``tests/test_architecture.py`` holds it to that). This ``__init__`` imports
nothing, so its modules can be used alone.
"""
