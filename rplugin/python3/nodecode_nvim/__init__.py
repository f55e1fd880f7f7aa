"""nodecode's remote plugin: a thin shim between Neovim and ``nodecode.host``.

It runs in nodecode's own host process (started by plugin/nodecode.lua from
the plugin's .venv with NODECODE_NVIM_HOST=1), never in the shared python3
host: if ``:UpdateRemotePlugins`` finds this package, the class is left
undecorated, so that host registers nothing and the user's manifest stays clean.

Every sync handler goes through ``never_raise``: a sync handler that raises
leaves Neovim's ``remote#define#request`` busy counter stuck, after which
every async handler of the host is queued forever. Lua raises instead
(lua/nodecode/rpc.lua). The specs here must match lua/nodecode/specs.lua.
"""

from __future__ import annotations

import functools
import json
import os
import sys
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


def _columns(value: dict) -> dict:
    """``value`` with its blocks sent as one JSON string of columns: pynvim walks
    every value of a reply in Python and Neovim decodes each into a table (2,000
    blocks of 6 fields were a third of :NodecodeContext); rpc.lua makes the
    blocks again."""
    blocks = value.get("blocks") or []
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

    @pynvim.function("NodecodeAsk", sync=True)
    @never_raise
    def ask(self, args: list) -> int:
        return self.host.ask(_arg(args, 0, {}), str(_arg(args, 1, "")))

    @pynvim.function("NodecodeStop", sync=False)
    def stop(self, args: list) -> None:
        try:
            job = _arg(args, 0)
            self.host.stop(int(job) if job is not None else None)
        except Exception as e:  # noqa: BLE001 -- async: report, never raise into the host
            from nodecode.host import one_line

            self._notify(f"stop failed: {one_line(e)}")

    @pynvim.function("NodecodeApproval", sync=True)
    @never_raise
    def approval(self, args: list) -> bool:
        job, approval = int(_arg(args, 0, 0)), int(_arg(args, 1, 0))
        return self.host.answer(job, approval, bool(_arg(args, 2)), _arg(args, 3))

    @pynvim.function("NodecodeMessages", sync=True)
    @never_raise
    def messages(self, args: list) -> list:
        return self.host.messages(_arg(args, 0, {}))

    @pynvim.function("NodecodeInfo", sync=True)
    @never_raise
    def info(self, args: list) -> dict:
        return self.host.session(_arg(args, 0, {}))

    # --- the context buffer, recall, sessions (lua/nodecode/ui/*) -----------

    @pynvim.function("NodecodeContext", sync=True)
    @never_raise
    def context(self, args: list) -> dict:
        return _columns(self.host.context(_arg(args, 0, {})))

    @pynvim.function("NodecodeDescribe", sync=True)
    @never_raise
    def describe(self, args: list) -> dict:
        return _columns(self.host.describe(_arg(args, 0, {}), str(_arg(args, 1, ""))))

    @pynvim.function("NodecodeValidate", sync=True)
    @never_raise
    def validate(self, args: list) -> dict:
        return self.host.validate(_arg(args, 0, {}), str(_arg(args, 1, "")))

    @pynvim.function("NodecodeRemoved", sync=True)
    @never_raise
    def removed(self, args: list) -> list:
        return self.host.removed(_arg(args, 0, {}))

    @pynvim.function("NodecodeRecall", sync=True)
    @never_raise
    def recall(self, args: list) -> list:
        return self.host.recall(
            _arg(args, 0, {}), _arg(args, 1), bool(_arg(args, 2, False)), bool(_arg(args, 3, False))
        )

    @pynvim.function("NodecodeRecallEntry", sync=True)
    @never_raise
    def recall_entry(self, args: list) -> str:
        return self.host.recall_entry(_arg(args, 0, {}), int(_arg(args, 1, 0)), _arg(args, 2))

    @pynvim.function("NodecodeTurnMessages", sync=True)
    @never_raise
    def turn_messages(self, args: list) -> list:
        return self.host.turn_messages(_arg(args, 0, {}), int(_arg(args, 1, 0)))

    @pynvim.function("NodecodeSessions", sync=True)
    @never_raise
    def sessions(self, args: list) -> list:
        return self.host.sessions(_arg(args, 0, {}))

    @pynvim.function("NodecodeUseSession", sync=True)
    @never_raise
    def use_session(self, args: list) -> dict:
        return self.host.use_session(_arg(args, 0, {}), _arg(args, 1))

    # --- budget and checkpoints ---------------------------------------------

    @pynvim.function("NodecodeEvict", sync=True)
    @never_raise
    def evict(self, args: list) -> Any:
        return self.host.evict(_arg(args, 0, {}), _arg(args, 1))

    @pynvim.function("NodecodeStatus", sync=True)
    @never_raise
    def status(self, args: list) -> Any:
        return self.host.status(_arg(args, 0, {}))

    @pynvim.function("NodecodeBudget", sync=True)
    @never_raise
    def budget(self, args: list) -> Any:
        return self.host.budget(_arg(args, 0, {}), _arg(args, 1))  # N, "clear" or nil

    @pynvim.function("NodecodeUndo", sync=True)
    @never_raise
    def undo(self, args: list) -> Any:
        return self.host.undo(_arg(args, 0, {}), bool(_arg(args, 1, False)))

    @pynvim.function("NodecodeRedo", sync=True)
    @never_raise
    def redo(self, args: list) -> Any:
        return self.host.redo(_arg(args, 0, {}), bool(_arg(args, 1, False)))

    @pynvim.function("NodecodeTree", sync=True)
    @never_raise
    def tree(self, args: list) -> Any:
        return self.host.tree(_arg(args, 0, {}))

    @pynvim.function("NodecodeContinue", sync=True)
    @never_raise
    def continue_(self, args: list) -> Any:
        return self.host.continue_(_arg(args, 0, {}), int(_arg(args, 1, 0)))

    @pynvim.function("NodecodeRewind", sync=True)
    @never_raise
    def rewind(self, args: list) -> Any:
        return self.host.rewind(
            _arg(args, 0, {}), int(_arg(args, 1, 0)), bool(_arg(args, 2, False))
        )

    @pynvim.function("NodecodeFork", sync=True)
    @never_raise
    def fork(self, args: list) -> Any:
        return self.host.fork(_arg(args, 0, {}), _int_or_none(_arg(args, 1)))

    @pynvim.function("NodecodeBlob", sync=True)
    @never_raise
    def blob(self, args: list) -> str:
        return self.host.blob(_arg(args, 0, {}), str(_arg(args, 1, "")))

    # --- the model ------------------------------------------------------------

    @pynvim.function("NodecodeModels", sync=True)
    @never_raise
    def models(self, args: list) -> Any:
        return self.host.models(_arg(args, 0, {}))

    @pynvim.function("NodecodeUseModel", sync=True)
    @never_raise
    def use_model(self, args: list) -> Any:
        return self.host.use_model(_arg(args, 0, {}), str(_arg(args, 1, "")))

    def _notify(self, text: str) -> None:
        self.nvim.exec_lua("require('nodecode.message').error(...)", text, async_=True)


if IN_OWN_HOST:
    NodecodePlugin = pynvim.plugin(NodecodePlugin)
