"""The session log: the SQLite store (``store``, its ``migrations`` and blob
``delta``), sessions and their heads (``sessions``), the one-turn lease
(``leases``) and the turn tree (``turns``). Everything else reads the log
through these; nothing here knows what a message means.
"""
