"""Checkpoints: moves along the turn tree that undo and redo a turn with its
file changes (``moves``), and the shadow store that records what shell
commands changed (``shadow``)."""
