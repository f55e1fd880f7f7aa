"""Every picker backend with real checkouts (NODECODE_TEST_DEPS): telescope,
snacks.picker, fzf-lua and mini.pick each show the recall source's results,
filter them as the person types, preview the entry, and run each action
(open, insert (recall-entry N), restore, the every-session toggle) on the
keys of keymaps.picker, none of which shadows a key the picker has."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import pynvim
import pytest

from .conftest import DEPS_DIR, guard_unmet, open_context, recall_falls_back_from, wait_for
from .test_picker import sessions  # noqa: F401  (the fixture)
from .ui_helpers import screen


@dataclass(frozen=True)
class Backend:
    name: str  # picker.backend
    checkouts: tuple[str, ...]  # folders of NODECODE_TEST_DEPS, named as their repositories
    setup: str  # Lua run once they are on the runtimepath
    rows: str  # Lua returning the rows shown now
    preview: str  # Lua returning the preview's lines
    needs: str | None = None  # a program it runs


BACKENDS = [
    Backend(
        "telescope",
        ("plenary.nvim", "telescope.nvim"),
        "vim.cmd('runtime! plugin/telescope.lua'); require('telescope').setup({})",
        """local p = require('telescope.actions.state').get_current_picker(vim.api.nvim_get_current_buf())
           local out = {}
           if p and p.manager then
             for i = 1, p.manager:num_results() do out[i] = p.manager:get_entry(i).display end
           end
           return out""",
        """local p = require('telescope.actions.state').get_current_picker(vim.api.nvim_get_current_buf())
           local b = p and p.previewer and p.previewer.state and p.previewer.state.bufnr
           return b and vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_lines(b, 0, -1, false) or {}""",
    ),
    Backend(
        "snacks",
        ("snacks.nvim",),
        "require('snacks').setup({ picker = { enabled = true } })",
        """local p = Snacks.picker.get()[1]
           if not p then return {} end
           local out = {}
           for _, it in ipairs(p:items()) do out[#out + 1] = it.text end
           return out""",
        """local p = Snacks.picker.get()[1]
           local b = p and p.preview and p.preview.win and p.preview.win.buf
           return b and vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_lines(b, 0, -1, false) or {}""",
    ),
    Backend(
        "fzf-lua",
        ("fzf-lua",),
        "require('fzf-lua').setup({})",
        """local w = require('fzf-lua.win').__SELF()
           if not (w and w.fzf_bufnr and vim.api.nvim_buf_is_valid(w.fzf_bufnr)) then return {} end
           local out = {}
           for _, l in ipairs(vim.api.nvim_buf_get_lines(w.fzf_bufnr, 0, -1, false)) do
             local row = vim.trim(l):gsub('^[>▌] ?', '')
             if row:find('%[') == 1 then out[#out + 1] = row end
           end
           return out""",
        """local w = require('fzf-lua.win').__SELF()
           local win = w and w.preview_winid
           if not (win and vim.api.nvim_win_is_valid(win)) then return {} end
           return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false)""",
        needs="fzf",
    ),
    Backend(
        "mini.pick",
        ("mini.nvim",),
        "require('mini.pick').setup({})",
        """if not MiniPick.is_picker_active() then return {} end
           local out = {}
           for _, it in ipairs(MiniPick.get_picker_matches().all or {}) do out[#out + 1] = it.text end
           return out""",
        """local st = MiniPick.get_picker_state()
           local b = st and st.buffers.preview
           return b and vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_lines(b, 0, -1, false) or {}""",
    ),
]


def missing(b: Backend) -> str | None:
    """Why backend `b` cannot run here (None: it can)."""
    if DEPS_DIR is None:
        named = "a checkout named" if len(b.checkouts) == 1 else "checkouts named"
        return f"set NODECODE_TEST_DEPS to a directory holding {named} {' and '.join(b.checkouts)}"
    absent = [c for c in b.checkouts if not (DEPS_DIR / c / "lua").is_dir()]
    if absent:
        return f"NODECODE_TEST_DEPS ({DEPS_DIR}) has no checkout named {', '.join(absent)}"
    unmet = next((w for c in b.checkouts if (w := guard_unmet(DEPS_DIR / c))), None)
    if unmet:
        return unmet  # tests/nvim/test_old_neovim.py shows what nodecode does then
    if b.needs and not shutil.which(b.needs):
        return f"{b.name} needs the {b.needs} program on PATH"
    return None


PARAMS = [
    pytest.param(b, id=b.name, marks=pytest.mark.skipif(bool(missing(b)), reason=missing(b) or ""))
    for b in BACKENDS
]


def load(nv: pynvim.Nvim, b: Backend) -> None:
    assert DEPS_DIR is not None
    nv.exec_lua("vim.o.columns, vim.o.lines = 200, 50")  # room for every preview
    for c in b.checkouts:
        nv.exec_lua("vim.opt.rtp:append(...)", str(DEPS_DIR / c))
    nv.exec_lua(b.setup)
    nv.exec_lua("require('nodecode').setup({ picker = { backend = ... } })", b.name)
    assert nv.exec_lua("return require('nodecode.ui.picker').backend()") == b.name


def open_recall(nv: pynvim.Nvim, b: Backend, query: str = "") -> None:
    # mini.pick's loop blocks until it stops: start every picker without waiting.
    nv.command(f"NodecodeRecall {query}".rstrip(), async_=True)


def rows(nv: pynvim.Nvim, b: Backend) -> list[str]:
    return nv.exec_lua(b.rows)


def wait_rows(nv: pynvim.Nvim, b: Backend, pred) -> list[str]:
    def shown():
        r = rows(nv, b)
        return r if r and pred(r) else None

    return wait_for(shown)


def keys(nv: pynvim.Nvim) -> dict:
    return nv.exec_lua("return require('nodecode.config').get().keymaps.picker")


@pytest.mark.parametrize("b", PARAMS)
def test_results_filter_and_preview(nvim, sessions, b):  # noqa: F811
    load(nvim, b)
    open_recall(nvim, b)
    first = wait_rows(nvim, b, lambda r: len(r) >= 4)
    assert not any("parser" in r for r in first)

    nvim.input("pass now")
    shown = wait_rows(nvim, b, lambda r: len(r) == 1)
    assert "· assistant] tests pass now" in shown[0]

    if b.name == "mini.pick":
        nvim.input("<Tab>")  # mini.pick shows the preview on its own key
    assert wait_for(lambda: nvim.exec_lua(b.preview)[1:2] == ["tests pass now"])


@pytest.mark.parametrize("b", PARAMS)
def test_open_action(nvim, sessions, b):  # noqa: F811
    load(nvim, b)
    open_recall(nvim, b, "did they")
    wait_rows(nvim, b, lambda r: len(r) == 1)

    opens_the_entry(nvim, "<CR>")


def opens_the_entry(nv: pynvim.Nvim, key: str) -> None:
    """``key`` typed in the picker opens the one row's entry."""
    nv.input(key)
    wait_for(lambda: nv.current.buffer.name.startswith("nodecode://entry/"))
    assert nv.current.buffer[1:] == ["did they pass"], key


@pytest.mark.parametrize("b", [PARAMS[0]])
def test_telescope_enter_before_its_selection_is_drawn_opens_the_best_row(nvim, sessions, b):  # noqa: F811
    # Typed as the first rows appear, <CR> finds no selection yet (telescope
    # draws it after sorting): it opens the row telescope was about to select.
    load(nvim, b)
    open_recall(nvim, b, "did they")
    wait_rows(nvim, b, lambda r: len(r) == 1)
    nvim.exec_lua(  # as a new picker is before it draws its selection
        "require('telescope.actions.state').get_current_picker(vim.api.nvim_get_current_buf())"
        ":reset_selection() require('telescope.state').set_global_key('selected_entry', nil)"
    )

    opens_the_entry(nvim, "<CR>")


@pytest.mark.parametrize("b", [PARAMS[0]])
def test_telescope_enter_with_no_row_keeps_the_picker_open(nvim, sessions, b):  # noqa: F811
    load(nvim, b)
    open_recall(nvim, b, "did they")
    wait_rows(nvim, b, lambda r: len(r) == 1)
    nvim.input("zzzqqq")
    # no row, and telescope's selection let go (it holds the last row's until
    # its finder has answered the new prompt)
    selection = "return require('telescope.actions.state').get_selected_entry() ~= nil"
    wait_for(lambda: rows(nvim, b) == [] and not nvim.exec_lua(selection))

    nvim.input("<CR>")

    nvim.command("sleep 200m")  # what a select would do is scheduled: let it run
    assert nvim.exec_lua("return vim.bo.filetype") == "TelescopePrompt"
    assert not nvim.current.buffer.name.startswith("nodecode://entry/")


SPLIT_KEYS = {"telescope": ["<C-v>", "<C-x>", "<C-t>"], "mini.pick": ["<C-v>", "<C-s>", "<C-t>"]}


@pytest.mark.parametrize("b", [p for p in PARAMS if p.values[0].name in SPLIT_KEYS])
def test_the_split_and_tab_keys_open_the_entry_and_no_empty_window(nvim, sessions, b):  # noqa: F811
    load(nvim, b)
    windows = nvim.exec_lua("return #vim.api.nvim_list_wins()")
    for key in SPLIT_KEYS[b.name]:
        open_recall(nvim, b, "did they")
        wait_rows(nvim, b, lambda r: len(r) == 1)

        opens_the_entry(nvim, key)
        assert nvim.exec_lua("return #vim.api.nvim_list_wins()") == windows + 1, key
        assert len(nvim.api.list_tabpages()) == 1, key
        nvim.command("close")


FZF = BACKENDS[2]


@pytest.mark.skipif(bool(missing(FZF)), reason=missing(FZF) or "")
def test_fzf_shows_the_query_after_a_short_prompt_and_the_title_follows_the_toggle(
    nvim,
    sessions,  # noqa: F811
):
    load(nvim, FZF)
    open_recall(nvim, FZF, "did they")
    wait_rows(nvim, FZF, lambda r: len(r) == 1)
    fzf = """local w = require('fzf-lua.win').__SELF()
        local title = vim.api.nvim_win_get_config(w.fzf_winid).title
        local text = {}
        for _, chunk in ipairs(type(title) == 'table' and title or {}) do text[#text + 1] = chunk[1] end
        local prompt = ''
        for _, l in ipairs(vim.api.nvim_buf_get_lines(w.fzf_bufnr, 0, -1, false)) do
          if l:find('did they', 1, true) and not l:find('seq', 1, true) then prompt = vim.trim(l) end
        end
        return { title = table.concat(text), prompt = prompt }"""

    shown = wait_for(lambda: (f := nvim.exec_lua(fzf))["prompt"] and f)
    assert shown["prompt"].startswith("> did they"), shown
    assert "recall: this session" in shown["title"], shown

    nvim.input(keys(nvim)["toggle"])

    wait_for(lambda: "recall: every session" in nvim.exec_lua(fzf)["title"])


@pytest.mark.parametrize("b", PARAMS)
def test_insert_action(nvim, sessions, b):  # noqa: F811
    load(nvim, b)
    nvim.current.buffer[:] = ["see: "]
    nvim.command("normal! $")
    open_recall(nvim, b, "run the tests")
    row = wait_rows(nvim, b, lambda r: len(r) == 1)[0]
    seq = int(row.split("seq ")[1].split(" ")[0])

    nvim.input(keys(nvim)["insert"])

    wait_for(lambda: "recall-entry" in nvim.current.buffer[0])
    assert nvim.current.buffer[:] == [f"see: (recall-entry {seq})"]


@pytest.mark.parametrize("b", PARAMS)
def test_toggle_searches_every_session(nvim, sessions, b):  # noqa: F811
    older, _ = sessions
    load(nvim, b)
    open_recall(nvim, b, "parser")
    nvim.exec_lua("vim.wait(50)")

    nvim.input(keys(nvim)["toggle"])

    shown = wait_rows(nvim, b, lambda r: len(r) >= 2)
    assert all(r.startswith(f"[{older} · seq ") for r in shown), shown


@pytest.mark.parametrize("b", PARAMS)
def test_restore_action(nvim, sessions, home, workspace, b):  # noqa: F811
    from .test_picker import drop_first_block

    user_seq = drop_first_block(home, workspace)
    load(nvim, b)
    open_context(nvim)
    nonce = nvim.current.buffer[0].split()[-1].rstrip("]")
    open_recall(nvim, b, "how do I run")
    wait_rows(nvim, b, lambda r: len(r) == 1)

    nvim.input(keys(nvim)["restore"])

    wait_for(lambda: nvim.current.buffer[1] == f"[[m:{nonce} {user_seq} user]]")


# The keys each picker has by default (fzf-lua: its fzf keys and fzf's own).
STANDARD_KEYS = {
    "telescope": """local m = require('telescope.mappings').default_mappings
        local out = {}
        for _, mode in ipairs({ 'i', 'n' }) do for k in pairs(m[mode]) do out[#out + 1] = k end end
        return out""",
    "snacks": """local out = {}
        for _, w in ipairs({ 'input', 'list' }) do
          for k in pairs(Snacks.picker.config.get({}).win[w].keys) do out[#out + 1] = k end
        end
        return out""",
    "mini.pick": """local out = {}
        for _, k in pairs(MiniPick.config.mappings) do out[#out + 1] = type(k) == 'table' and k.char or k end
        return out""",
    "fzf-lua": """local d = require('fzf-lua.defaults').defaults
        local out = {}
        for k in pairs(d.keymap.builtin) do out[#out + 1] = k end
        for k in pairs(d.keymap.fzf) do out[#out + 1] = k end
        return out""",
}
# fzf's own default bindings (man fzf, AVAILABLE ACTIONS).
FZF_OWN = [
    "ctrl-c",
    "ctrl-g",
    "ctrl-q",
    "esc",
    "enter",
    "ctrl-b",
    "left",
    "ctrl-h",
    "bspace",
    "alt-bs",
    "alt-b",
    "shift-left",
    "ctrl-a",
    "home",
    "ctrl-l",
    "del",
    "ctrl-d",
    "ctrl-j",
    "ctrl-n",
    "down",
    "ctrl-e",
    "end",
    "ctrl-f",
    "right",
    "alt-f",
    "shift-right",
    "alt-d",
    "pgdn",
    "pgup",
    "shift-down",
    "shift-up",
    "ctrl-u",
    "ctrl-w",
    "ctrl-k",
    "ctrl-p",
    "up",
    "ctrl-y",
    "tab",
    "btab",
]


@pytest.mark.parametrize("b", PARAMS)
def test_nodecodes_keys_shadow_none_of_the_pickers_own(nvim, b):
    load(nvim, b)
    ours = {
        k: v
        for k, v in keys(nvim).items()
        if k in ("insert", "restore", "toggle", "kinds", "rename", "delete")
    }
    standard = nvim.exec_lua(STANDARD_KEYS[b.name])
    if b.name == "fzf-lua":
        ours = {
            k: nvim.exec_lua("return require('nodecode.ui.fzf_picker').fzf_key(...)", v)
            for k, v in ours.items()
        }
        standard = [*standard, *FZF_OWN]
        clash = [k for k in ours.values() if k in standard]
    else:
        norm = "return vim.fn.keytrans(vim.keycode(...))"
        ours_n = {nvim.exec_lua(norm, v) for v in ours.values()}
        theirs = [nvim.exec_lua(norm, k) for k in standard if k]
        clash = [k for k in ours_n for t in theirs if t.startswith(k) or k.startswith(t)]
    assert not clash, (b.name, clash)


TELESCOPE = BACKENDS[0]
SNACKS = BACKENDS[1]


def current_telescope(nv: pynvim.Nvim) -> dict:
    return nv.exec_lua("""
        local p = require('telescope.actions.state').get_current_picker(vim.api.nvim_get_current_buf())
        return p and { layout = p.layout_strategy, title = p.prompt_title } or vim.NIL""")


@pytest.mark.parametrize("b", [PARAMS[0]])
def test_telescope_honours_its_themes_and_the_extension_config(nvim, sessions, b):  # noqa: F811
    load(nvim, b)
    nvim.command("Telescope nodecode recall theme=dropdown")
    assert wait_for(lambda: current_telescope(nvim))["layout"] == "center"
    nvim.input("<Esc><Esc>")
    wait_for(lambda: current_telescope(nvim) is None)

    nvim.exec_lua(
        "require('telescope').setup({ extensions = { nodecode = { layout_strategy = 'vertical' } } })"
    )
    nvim.command("NodecodeRecall")

    assert wait_for(lambda: current_telescope(nvim))["layout"] == "vertical"


@pytest.mark.skipif(
    bool(missing(TELESCOPE) or missing(SNACKS)),
    reason=missing(TELESCOPE) or missing(SNACKS) or "",
)
def test_auto_takes_the_first_installed_in_the_documented_order(nvim):
    load(nvim, SNACKS)
    nvim.exec_lua("require('nodecode').setup({})")
    assert nvim.exec_lua("return require('nodecode.ui.picker').backend()") == "snacks"

    load(nvim, TELESCOPE)
    nvim.exec_lua("require('nodecode').setup({})")

    assert nvim.exec_lua("return require('nodecode.ui.picker').ORDER") == [
        "telescope",
        "fzf-lua",
        "snacks",
        "mini.pick",
    ]
    assert nvim.exec_lua("return require('nodecode.ui.picker').backend()") == "telescope"


@pytest.mark.skipif(
    DEPS_DIR is None or not all((DEPS_DIR / c / "lua").is_dir() for c in TELESCOPE.checkouts),
    reason=f"set NODECODE_TEST_DEPS to a directory holding {' and '.join(TELESCOPE.checkouts)}",
)
def test_a_backend_that_needs_a_newer_neovim_is_skipped_and_checkhealth_says_why(
    nvim,
    sessions,  # noqa: F811
    tmp_path,
):
    # The real telescope checkout, its plugin/ guard asking for a Neovim newer
    # than this one: as it is on Neovim 0.10, else asking for 0.99 (its modules
    # still load, so require() succeeds, and a picker then fails half-way).
    assert DEPS_DIR is not None
    newer, asked = DEPS_DIR / "telescope.nvim", "0.11"
    if not guard_unmet(newer):
        newer, asked = tmp_path / "telescope.nvim", "0.99"
        shutil.copytree(DEPS_DIR / "telescope.nvim", newer, ignore=shutil.ignore_patterns(".git"))
        guard = newer / "plugin" / "telescope.lua"
        text = guard.read_text()
        assert text.startswith('if 1 ~= vim.fn.has "nvim-0.11" then')
        guard.write_text(text.replace('"nvim-0.11"', '"nvim-0.99"', 1))
    report = recall_falls_back_from(nvim, DEPS_DIR / "plenary.nvim", newer)
    assert nvim.exec_lua("return (pcall(require, 'telescope.pickers'))")  # its modules load
    this = nvim.exec_lua(
        "local v = vim.version() return ('%d.%d.%d'):format(v.major, v.minor, v.patch)"
    )
    assert (
        f"WARNING telescope skipped: telescope.nvim needs Neovim {asked} (this is {this})" in report
    ), report
    assert 'OK pickers use builtin (picker.backend = "auto"; installed: telescope)' in report


TITLES = {  # each recall mode's title, and the query and mode it starts with
    "recall: this session": ("", {}),
    "recall: this session, every kind": ("", {"every_kind": True}),
    "recall: every session": ("parser", {"everywhere": True}),
}
HINTS = "<M-e> this / every session · <M-o> exports and requests"


def drawn_at_80_columns(
    nv: pynvim.Nvim, b: Backend | None, query: str, start: dict, columns: int = 80
) -> list[str]:
    """The screen of an 80×24 Neovim (or `columns` wide) showing the recall picker
    opened in `start`'s mode."""
    nv.ui_attach(columns, 24, rgb=True)
    if b is None:
        nv.exec_lua("require('nodecode').setup({ picker = { backend = 'builtin' } })")
    else:
        load(nv, b)
    nv.exec_lua("vim.o.columns, vim.o.lines = ..., 24", columns)
    recall = "local q, s = ... require('nodecode.ui.picker').recall(q, nil, s)"
    nv.exec_lua(recall, query, start, async_=True)
    wait_for(lambda: any("seq " in line for line in screen(nv, 24)))
    return screen(nv, 24)


@pytest.mark.parametrize("title", list(TITLES))
@pytest.mark.parametrize("b", [pytest.param(None, id="builtin"), *PARAMS])
def test_the_recall_title_is_whole_at_80_columns_and_the_keys_show(nvim, sessions, b, title):  # noqa: F811
    drawn = "\n".join(drawn_at_80_columns(nvim, b, *TITLES[title]))

    assert title in drawn, drawn  # whole, not cut at the window's edge
    if b is None:  # the footers of the built-in picker's results and preview
        assert "<M-e> this / every session" in drawn, drawn
        assert "<M-o> exports and requests" in drawn, drawn
    elif b.name != "mini.pick":
        assert HINTS in drawn, drawn
    else:  # its footer (49 columns here) has no room for them: never half of them
        assert "<M-e>" not in drawn and "<M-o>" not in drawn, drawn


MINI = next(p for p in PARAMS if p.id == "mini.pick")


@pytest.mark.parametrize("title", list(TITLES))
@pytest.mark.parametrize("b", [MINI])
def test_mini_pick_shows_the_keys_after_the_title_when_its_footer_has_room(
    nvim,
    sessions,  # noqa: F811
    b,
    title,
):
    drawn = "\n".join(drawn_at_80_columns(nvim, b, *TITLES[title], columns=200))

    assert f"{title} · {HINTS}" in drawn, drawn
