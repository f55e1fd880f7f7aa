"""``python -m nodecode.loopback``: print the server's URL, serve until SIGTERM/SIGINT."""

from __future__ import annotations

from nodecode.loopback.server import main

raise SystemExit(main())
