"""Derive python/nodecode/data/models_windows.json from a models.dev api.json.

The package ships this small table so known models have a window offline
(SPEC §3, the last window source). It keeps, for a few providers, each
model's ``limit.context``, ``limit.output`` and (when present) ``limit.input``
as ``[context, output]`` or ``[context, output, input]``. Run it by hand when
a new models.dev snapshot is taken; nothing runs it at install or run time.
The snapshot's path is a required argument (the script reads nothing else,
and nothing outside the repository by default):

    python scripts/derive_models_windows.py PATH/TO/models.dev-api.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PROVIDERS = (
    "anthropic",
    "openai",
    "deepseek",
    "mistral",
    "groq",
    "xai",
    "google",
    "openrouter",
    "togetherai",
    "fireworks-ai",
    "moonshotai",
    "cerebras",
    "lmstudio",
)
OUT = Path(__file__).resolve().parents[1] / "python" / "nodecode" / "data" / "models_windows.json"


def derive(api: dict) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = {}
    for pid in PROVIDERS:
        models = (api.get(pid) or {}).get("models") or {}
        table = {}
        for mid, spec in sorted(models.items()):
            limit = spec.get("limit") or {}
            context, output, given = limit.get("context"), limit.get("output"), limit.get("input")
            if not isinstance(context, int) or context <= 0:
                continue
            row = [context, output if isinstance(output, int) else 0]
            if isinstance(given, int) and 0 < given < context:
                row.append(given)
            table[mid] = row
        if table:
            out[pid] = table
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a models.dev api.json snapshot")
    source = parser.parse_args(argv[1:]).source
    table = derive(json.loads(source.read_text(encoding="utf-8")))
    rows = [
        f"{json.dumps(pid)}:{json.dumps(models, separators=(',', ':'))}"
        for pid, models in table.items()
    ]  # one provider per line: readable diffs
    text = "{\n" + ",\n".join(rows) + "\n}\n"
    OUT.write_text(text, encoding="utf-8")
    print(
        f"{OUT}: {sum(len(t) for t in table.values())} models of {len(table)} providers, "
        f"{len(text)} bytes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
