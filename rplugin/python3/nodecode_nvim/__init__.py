"""nodecode's remote plugin: a thin shim between Neovim and ``nodecode.host``.

It runs in nodecode's own host process (started by plugin/nodecode.lua from
the plugin's .venv with NODECODE_NVIM_HOST=1), never in the shared python3
host: if ``:UpdateRemotePlugins`` finds this package, the class is left
undecorated, so that host registers nothing and the user's manifest stays clean.

Neovim sees two functions: NodecodeCall (a request) and NodecodeNotify (a
notification), which dispatch by name through ``nodecode.host.ENDPOINTS``; an
endpoint is added there, never here. lua/nodecode/rpc.lua registers the two
(tests/nvim/test_registration.py compares them with the decorators).

The request handler goes through ``never_raise``: a sync handler that raises
leaves Neovim's ``remote#define#request`` busy counter stuck, after which
every async handler of the host is queued forever. Lua raises instead.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvim

_PYTHON_DIR = Path(__file__).resolve().parents[3] / "python"
if str(_PYTHON_DIR) not in sys.path:
    sys.path.append(str(_PYTHON_DIR))  # fallback when the core is not installed

IN_OWN_HOST = os.environ.get("NODECODE_NVIM_HOST") == "1"


def never_raise(fn: Callable[[Any, list], Any]) -> Callable[[Any, list], dict]:
    """Wrap a sync handler: ``{"ok": True, "value": v}`` or ``{"ok": False, "error": line}``."""

    @functools.wraps(fn)
    def wrapper(self: Any, args: list) -> dict:
        try:
            return {"ok": True, "value": fn(self, args)}
        except Exception as e:  # noqa: BLE001 -- the boundary: errors become messages
            from nodecode.host import one_line

            return {"ok": False, "error": one_line(e)}

    return wrapper


def _arg(args: list, i: int, default: Any = None) -> Any:
    """The i-th argument, with Lua's nil/vim.NIL and missing ones as ``default``."""
    return args[i] if len(args) > i and args[i] is not None else default


def _int_or_none(value: Any) -> int | None:
    return None if value is None or value == "" else int(value)


def _decoder(hint: Any) -> Callable[[Any], Any]:
    """How an argument from Lua becomes a parameter hinted ``hint``: str, int and
    bool convert it (nil: "", 0, False), ``int | None`` reads nil and "" as None,
    and any other hint takes it as Lua sent it."""
    if hint in (str, int, bool):
        return lambda value: hint() if value is None else hint(value)
    if hint == int | None:
        return _int_or_none
    return lambda value: value


@functools.cache
def _signature(method: Callable[..., Any]) -> tuple[bool, tuple[Callable[[Any], Any], ...]]:
    """Whether ``method`` takes the place (its first parameter is ``ctx``), and
    a decoder for each of its other parameters."""
    hints = typing.get_type_hints(method)
    names = list(inspect.signature(method).parameters)[1:]  # self is the host
    takes_place = names[:1] == ["ctx"]
    rest = names[1:] if takes_place else names
    return takes_place, tuple(_decoder(hints.get(n)) for n in rest)


def _columns(value: Any) -> Any:
    """A reply's blocks (context, describe) as one JSON string of columns: pynvim
    walks every value of a reply in Python and Neovim decodes each into a table
    (2,000 blocks of 6 fields were a third of :NodecodeContext); rpc.lua makes
    the blocks again."""
    if not isinstance(value, dict) or not isinstance(value.get("blocks"), list):
        return value
    blocks = value["blocks"]
    keys = list(blocks[0]) if blocks else []
    columns = {k: [b.get(k) for b in blocks] for k in keys}
    return {**value, "blocks": json.dumps(columns, separators=(",", ":"))}


class _NvimPort:
    """``nodecode.host.Port`` over pynvim: the only path from threads to Neovim."""

    def __init__(self, nvim: pynvim.Nvim):
        self._nvim = nvim

    def emit(self, event: dict[str, Any]) -> None:
        self._nvim.async_call(self._deliver, event)

    def _deliver(self, event: dict[str, Any]) -> None:
        self._nvim.exec_lua("require('nodecode.rpc')._on_event(...)", event, async_=True)


class NodecodePlugin:
    """Decodes arguments, calls the host, reports errors as values."""

    def __init__(self, nvim: pynvim.Nvim):
        from nodecode.host import Host

        self.nvim = nvim
        self.host = Host(_NvimPort(nvim))

    @pynvim.function("NodecodeCall", sync=True)
    @never_raise
    def call(self, args: list) -> Any:
        """NodecodeCall(name, place, ...): the value of the host's endpoint ``name``."""
        return _columns(self._dispatch(args, notify=False))

    @pynvim.function("NodecodeNotify", sync=False)
    def notify(self, args: list) -> None:
        """NodecodeNotify(name, place, ...): no reply; an error becomes a message."""
        try:
            self._dispatch(args, notify=True)
        except Exception as e:  # noqa: BLE001 -- async: report, never raise into the host
            from nodecode.host import one_line

            self._notify(f"{_arg(args, 0)} failed: {one_line(e)}")

    def _dispatch(self, args: list, notify: bool) -> Any:
        """Call the endpoint named by ``args[0]`` (nodecode.host.ENDPOINTS) with
        the place ``args[1]`` and the decoded arguments after it."""
        from nodecode.host import endpoint

        method = endpoint(_arg(args, 0), notify)
        takes_place, decoders = _signature(method)
        given = args[2:]
        values = [decode(_arg(given, i)) for i, decode in enumerate(decoders)]
        if takes_place:
            values.insert(0, _arg(args, 1, {}))
        return method(self.host, *values)

    def _notify(self, text: str) -> None:
        self.nvim.exec_lua("require('nodecode.message').error(...)", text, async_=True)


if IN_OWN_HOST:
    # The decorator applied late: it tags the class in place ("Tag a class as a
    # plugin", pynvim.plugin sets cls._nvim_plugin) and returns the same class.
    pynvim.plugin(NodecodePlugin)
