"""Derive python/nodecode/data/models_dev/ from a models.dev api.json.

The package ships this table so that every provider models.dev lists works
offline as a preset (its API URL, key variables and SDK family) and every
model it lists has a window and prices: the last window source, and the
prices of the cost figures. It is the api.json's content slimmed to the fields
nodecode reads (provider: ``name``, ``env``, ``api``, ``npm``; model:
``limit``, ``cost``, ``reasoning``, ``tool_call``), split as
``providers/catalog.py`` reads it: ``_providers.json`` (each provider without
its models) and one ``PROVIDER.json`` of models per provider, so that a
process reads only what it needs (the whole table takes tens of ms to parse).
``nodecode models refresh`` writes its cache in the same layout. Run this by
hand when a new models.dev snapshot is taken; nothing runs it at install or
run time:

    python scripts/derive_models_dev.py PATH/TO/models.dev-api.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "python" / "nodecode" / "data" / "models_dev"
PROVIDER_FIELDS = ("name", "env", "api", "npm")
LIMITS = ("context", "output", "input")
COSTS = ("input", "output", "cache_read", "cache_write")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def derive(api: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pid, provider in sorted(api.items()):
        if not isinstance(provider, dict):
            continue
        slim = {k: provider[k] for k in PROVIDER_FIELDS if provider.get(k)}
        models = {}
        for mid, spec in sorted((provider.get("models") or {}).items()):
            limit = {
                k: v
                for k, v in (spec.get("limit") or {}).items()
                if k in LIMITS and _number(v) and v > 0
            }
            if "context" not in limit:
                continue
            model: dict[str, Any] = {"limit": limit}
            cost = {k: v for k, v in (spec.get("cost") or {}).items() if k in COSTS and _number(v)}
            if cost:
                model["cost"] = cost
            for flag in ("reasoning", "tool_call"):
                if isinstance(spec.get(flag), bool):
                    model[flag] = spec[flag]
            models[mid] = model
        slim["models"] = models
        out[pid] = slim
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a models.dev api.json snapshot")
    args = parser.parse_args(argv)
    table = derive(json.loads(args.source.read_text(encoding="utf-8")))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    from nodecode.providers.catalog import write_split

    write_split(OUT, table, shared=True)
    models = sum(len(p["models"]) for p in table.values())
    print(f"{OUT}: {len(table)} providers, {models} models")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
