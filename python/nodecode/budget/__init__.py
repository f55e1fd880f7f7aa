"""The budget: the window and its sources (``window``), the fill of a request
counted and calibrated (``meter``), warning and eviction (``evict``), the stubs
that stand where evicted history was (``stubs``), and the models a session may
switch to (``models``). The window's and the meter's names are re-exported here.
"""

from __future__ import annotations

from nodecode.budget.meter import PLAUSIBLE, Count, Meter, encoding, fill_of, plausible
from nodecode.budget.window import (
    ENV_WINDOW,
    EVICT_TO,
    SOURCE_CACHE,
    SOURCE_CEILING,
    SOURCE_CONFIG,
    SOURCE_ENV,
    SOURCE_OVERRIDE,
    SOURCE_SNAPSHOT,
    WARN_AT,
    Budget,
    Limits,
    cache_file,
    ceiling_key,
    clear_override,
    dev_models,
    of,
    override_key,
    record_ceiling,
    refresh_models,
    require_model,
    set_override,
)

__all__ = [
    "ENV_WINDOW",
    "EVICT_TO",
    "PLAUSIBLE",
    "SOURCE_CACHE",
    "SOURCE_CEILING",
    "SOURCE_CONFIG",
    "SOURCE_ENV",
    "SOURCE_OVERRIDE",
    "SOURCE_SNAPSHOT",
    "WARN_AT",
    "Budget",
    "Count",
    "Limits",
    "Meter",
    "cache_file",
    "ceiling_key",
    "clear_override",
    "dev_models",
    "encoding",
    "fill_of",
    "of",
    "override_key",
    "plausible",
    "record_ceiling",
    "refresh_models",
    "require_model",
    "set_override",
]
