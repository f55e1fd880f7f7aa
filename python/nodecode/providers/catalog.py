"""models.dev's table of providers and models, as nodecode reads it.

Two copies in the same layout: the cache ``HOME/cache/models.dev/`` that
``nodecode models refresh`` writes, and the snapshot shipped in the package
(``data/models_dev/``, made by ``scripts/derive_models_dev.py``). Each is a
folder: ``_providers.json`` (provider id → ``{name, env, api, npm}``) and one
``PROVIDER.json`` per provider (model id → ``{limit, cost, reasoning,
tool_call}``), so a process parses only the providers it uses (the whole table
takes tens of milliseconds). A lookup tries the cache, then the snapshot.
This module reads; ``providers.presets`` makes providers of it and
``budget.window`` takes windows and limits from it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodecode.bounded import Bounded
from nodecode.paths import ensure_dir, write_private

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "models_dev"
INDEX = "_providers.json"


def cache_dir(home: Path) -> Path:
    return home / "cache" / "models.dev"


@dataclass(frozen=True)
class Limits:
    """What models.dev says of one model's size (any may be unknown)."""

    context: int | None = None
    output: int | None = None
    input: int | None = None


@dataclass(frozen=True)
class Prices:
    """One model's prices in US dollars per million tokens (None: not listed)."""

    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None


# Parsed files by (path, mtime): a process reads each file of a copy once per version.
_FILES = Bounded(64)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    hit = _FILES.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        value = None
    value = value if isinstance(value, dict) else None
    _FILES.keep(path, (stamp, value))
    return value


def folders(home: Path | None) -> list[Path]:
    """The copies to look in, the refreshed one first (when it has an index)."""
    out = []
    if home is not None and (cache_dir(home) / INDEX).is_file():
        out.append(cache_dir(home))
    out.append(SNAPSHOT)
    return out


def providers(home: Path | None) -> dict[str, dict[str, Any]]:
    """Every provider of the first copy that has an index: id → {name, env, api, npm}."""
    for folder in folders(home):
        index = _read(folder / INDEX)
        if index:
            return {k: v for k, v in index.items() if isinstance(v, dict)}
    return {}


def provider(home: Path | None, pid: str) -> dict[str, Any] | None:
    """A provider's entry (its name, env, api, npm), or None."""
    for folder in folders(home):
        entry = (_read(folder / INDEX) or {}).get(pid)
        if isinstance(entry, dict):
            return entry
    return None


def _models_of(folder: Path, pid: str) -> dict[str, Any] | None:
    if not pid or "/" in pid or pid.startswith(".") or pid == INDEX:
        return None
    return _read(folder / f"{pid}.json")


def model_in(folder: Path, pid: str | None, mid: str | None) -> dict[str, Any] | None:
    """One model's entry in one copy (``folder``), or None."""
    if not pid or not mid:
        return None
    spec = (_models_of(folder, pid) or {}).get(mid)
    return spec if isinstance(spec, dict) else None


def model(home: Path | None, pid: str | None, mid: str | None) -> dict[str, Any] | None:
    """One model's entry, from the first copy that lists it."""
    if not pid or not mid:
        return None
    for folder in folders(home):
        spec = (_models_of(folder, pid) or {}).get(mid)
        if isinstance(spec, dict):
            return spec
    return None


def models(home: Path | None, pid: str | None) -> list[str]:
    """The model ids a provider lists (the first copy that lists any), sorted."""
    for folder in folders(home):
        listed = _models_of(folder, pid or "")
        if listed:
            return sorted(str(m) for m in listed)
    return []


def limits(spec: Mapping[str, Any] | None) -> Limits | None:
    if spec is None:
        return None
    limit = spec.get("limit") or {}
    return Limits(*(_count(limit.get(k)) for k in ("context", "output", "input")))


def prices(spec: Mapping[str, Any] | None) -> Prices | None:
    if spec is None or not isinstance(spec.get("cost"), dict):
        return None
    cost = spec["cost"]
    return Prices(*(_price(cost.get(k)) for k in ("input", "output", "cache_read", "cache_write")))


def write_split(folder: Path, table: Mapping[str, Any], *, shared: bool = False) -> None:
    """Write an api.json-shaped ``table`` into ``folder`` in this module's layout
    (each file whole, then renamed into place: a reader never sees half of one).
    ``shared``: readable by all (the package's snapshot), else the owner's only."""
    ensure_dir(folder)
    index = {}
    for pid, entry in table.items():
        if not isinstance(entry, dict) or "/" in pid or pid.startswith("."):
            continue
        index[pid] = {k: v for k, v in entry.items() if k != "models"}
        models_of = entry.get("models") if isinstance(entry.get("models"), dict) else {}
        _write(folder / f"{pid}.json", _dumps(models_of), shared)
    for stale in folder.glob("*.json"):
        if stale.name != INDEX and stale.stem not in index:
            os.unlink(stale)
    _write(folder / INDEX, _dumps(index), shared)  # last: the index names a complete copy


def _write(path: Path, data: bytes, shared: bool) -> None:
    write_private(path, data)
    if shared:
        os.chmod(path, 0o644)


def _dumps(value: Any) -> bytes:
    return (json.dumps(value, separators=(",", ":"), sort_keys=True) + "\n").encode("utf-8")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _price(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    return float(value) if ok else None
