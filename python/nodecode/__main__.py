from __future__ import annotations

from nodecode.cli import main

raise SystemExit(main())
