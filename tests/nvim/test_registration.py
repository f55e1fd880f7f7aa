"""The plugin registers itself on its own host: no :UpdateRemotePlugins, no
g:python3_host_prog; its two functions match the Python decorators, and the
Lua calls only endpoints the host's table has."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pynvim
from nodecode.host import ENDPOINTS

from .conftest import ROOT, configure, open_context, shutdown, wait_for
from .ui_helpers import notes, notified

SHIM = ROOT / "rplugin" / "python3" / "nodecode_nvim" / "__init__.py"


def python_specs() -> list[dict]:
    """The specs pynvim's decorators put on the shim's class."""
    spec = importlib.util.spec_from_file_location("nodecode_nvim_under_test", SHIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    members = vars(module.NodecodePlugin).values()
    return sorted(
        (m._nvim_rpc_spec for m in members if hasattr(m, "_nvim_rpc_spec")), key=lambda s: s["name"]
    )


def test_plugin_registers_and_its_host_starts_without_update_remote_plugins(nvim, nvim_env):
    assert nvim.funcs.exists(":Nodecode") == 2 and nvim.funcs.exists(":NodecodeStop") == 2
    assert not Path(nvim_env["NVIM_RPLUGIN_MANIFEST"]).exists()
    plugins = nvim.call("remote#host#PluginsForHost", "nodecode")
    assert [p["path"] for p in plugins] == [str(SHIM.parent)]
    assert nvim.call("remote#host#IsRunning", "nodecode") == 0  # lazily: not yet

    info = nvim.exec_lua("return require('nodecode.rpc').call('info')")

    assert info["id"].startswith("s-") and info["cwd"] == nvim.funcs.getcwd()
    assert nvim.call("remote#host#IsRunning", "nodecode") == 1
    assert nvim.call("remote#host#IsRunning", "python3") == 0
    assert nvim.vars.get("python3_host_prog") is None


def test_the_registered_functions_are_the_python_decorators(nvim):
    registered = nvim.call("remote#host#PluginsForHost", "nodecode")[0]["specs"]

    assert sorted(registered, key=lambda s: s["name"]) == python_specs()
    assert [s["name"] for s in registered] == ["NodecodeCall", "NodecodeNotify"]


# rpc.call('name', ...), pcall(rpc().call, 'name', ...), and in rpc.lua M.notify('name')
LUA_CALL = re.compile(
    r"(?<!function )(\brpc\(\)|\brpc|require\('nodecode\.rpc'\)|\bM)"
    r"\.(call|notify)[(,]\s*([^,)]*)"
)


def lua_calls() -> list[tuple[str, str, str]]:
    """(file:line, call or notify, the endpoint's name as written) of every call
    through lua/nodecode/rpc.lua in the Lua tree."""
    found = []
    for path in sorted([*ROOT.glob("lua/**/*.lua"), *ROOT.glob("plugin/*.lua")]):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for receiver, kind, name in LUA_CALL.findall(line):
                if receiver != "M" or path.name == "rpc.lua":
                    found.append((f"{path.relative_to(ROOT)}:{n}", kind, name))
    return found


def test_lua_calls_only_endpoints_the_host_has_and_of_their_kind():
    calls = lua_calls()
    wrong = [
        (where, kind, name)
        for where, kind, name in calls
        if not re.fullmatch(r"'\w+'", name)
        or name.strip("'") not in ENDPOINTS
        or ENDPOINTS[name.strip("'")].notify != (kind == "notify")
    ]

    assert calls and not wrong, wrong


def test_an_unknown_endpoint_is_one_error_line_naming_the_known_ones(nvim):
    ok, err = nvim.exec_lua("return { pcall(require('nodecode.rpc').call, 'nope', 1) }")
    ok2, err2 = nvim.exec_lua("return { pcall(require('nodecode.rpc').call, 'stop') }")

    assert ok is False and err == (
        f"nodecode: no endpoint 'nope' (known: {', '.join(sorted(ENDPOINTS))})"
    )
    assert ok2 is False and err2 == "nodecode: endpoint 'stop' is a notification (rpc.notify)"


def test_a_notification_that_fails_is_one_message_naming_it(nvim):
    notified(nvim)
    nvim.exec_lua("require('nodecode.rpc').notify('stop', 'x')")
    nvim.exec_lua("require('nodecode.rpc').notify('ask', 'hi')")

    assert wait_for(lambda: len(notes(nvim)) == 2 and notes(nvim)) == [
        "nodecode: stop failed: ValueError: invalid literal for int() with base 10: 'x'",
        "nodecode: ask failed: endpoint 'ask' is a request (rpc.call)",
    ]


def test_update_remote_plugins_leaves_nodecode_out_of_the_python3_manifest(nvim, tmp_path):
    manifest_path = tmp_path / "rplugin.vim"  # not the session's: other tests expect none
    nvim.vars["loaded_remote_plugins"] = str(manifest_path)
    nvim.vars["python3_host_prog"] = sys.executable
    nvim.command("UpdateRemotePlugins")

    manifest = manifest_path.read_text()
    assert "nodecode_nvim" not in manifest and "NodecodeCall" not in manifest
    assert nvim.exec_lua("return require('nodecode.rpc').call('info').id").startswith("s-")


def test_checkhealth_reports_no_error(nvim, home, loopback):
    configure(home, loopback([]))
    nvim.command("checkhealth nodecode")
    report = "\n".join(nvim.current.buffer[:])

    assert "ERROR" not in report, report
    assert "OK remote plugin registered" in report and "OK provider loopback" in report


def test_a_host_that_cannot_start_is_a_one_line_error(nvim):
    nvim.vars["nodecode_python"] = "/nonexistent/python"

    ok, err = nvim.exec_lua("return { pcall(require('nodecode.rpc').call, 'info') }")

    assert ok is False
    assert err == "nodecode: no Python at /nonexistent/python (set by g:nodecode_python)"


def global_maps(nv) -> set[str]:
    """Every global mapping, as MODE LHS."""
    return set(
        nv.exec_lua("""
        local out = {}
        for _, mode in ipairs({ 'n', 'i', 'v', 'x', 's', 'o', 't', 'c' }) do
          for _, m in ipairs(vim.api.nvim_get_keymap(mode)) do out[#out + 1] = mode .. ' ' .. m.lhs end
        end
        return out""")
    )


def test_every_global_mapping_is_a_plug_one_the_rest_are_buffer_local(
    nvim, home, workspace, loopback, tmp_path
):
    from .conftest import NVIM, chat
    from .test_picker import picker

    empty = tmp_path / "init.lua"  # the same Neovim and plugins, without nodecode
    empty.write_text("")
    bare = pynvim.attach("child", argv=[NVIM, "--embed", "--headless", "-n", "-u", str(empty)])
    try:
        without = global_maps(bare)
    finally:
        shutdown(bare)
    configure(home, loopback([{"text": "hello"}]))
    nvim.command("Nodecode hi")
    wait_for(lambda: "hello" in chat(nvim))
    open_context(nvim)
    nvim.command("NodecodeTree")
    nvim.command("NodecodeRecall")
    wait_for(lambda: picker(nvim))

    added = global_maps(nvim) - without

    assert added and all(m.split(" ", 1)[1].startswith("<Plug>(nodecode-") for m in added), added


def test_g_python3_host_prog_is_never_changed_nor_needed(nvim, home, loopback):
    nvim.vars["python3_host_prog"] = "/nonexistent/python3"  # would break anything that used it
    configure(home, loopback([{"text": "hello"}]))

    info = nvim.exec_lua("return require('nodecode.rpc').call('info')")
    nvim.command("checkhealth nodecode")

    assert info["id"].startswith("s-")
    assert "ERROR" not in "\n".join(nvim.current.buffer[:])
    assert nvim.vars["python3_host_prog"] == "/nonexistent/python3"
    sources = [*ROOT.glob("lua/**/*.lua"), *ROOT.glob("plugin/*"), *ROOT.glob("rplugin/**/*.py")]
    readers = [
        f"{p.relative_to(ROOT)}: {line.strip()}"
        for p in sources
        for line in p.read_text().splitlines()
        if "python3_host_prog" in line and not line.strip().startswith(("--", "#"))
    ]
    assert not readers, readers
