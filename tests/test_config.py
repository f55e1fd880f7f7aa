"""config.jsonc and the environment against the one schema: what a person sees of a
typo (one warning naming the nearest key), of a wrong value (one error line naming
the key, what it takes and what it has; exit 1) and of the settings reference
(`nodecode config`, `:help nodecode-config`)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, run_cli, write_config
from nodecode.config import load_config, reference, schema
from nodecode.config.kinds import Refused
from nodecode.errors import ConfigError

WARNING = 'nodecode: warning: config.jsonc: "auto_aprove" is not a setting; did you mean "auto_approve"?\n'


def edited(home: Path, change) -> Path:
    """HOME/config.jsonc (as helpers.write_config wrote it) with ``change`` applied."""
    path = home / "config.jsonc"
    text = path.read_text()
    config = json.loads(text.split("\n", 1)[1] if text.startswith("//") else text)
    change(config)
    path.write_text(json.dumps(config, indent=2))  # inf and nan as JSON5's Infinity, NaN
    return home


def top(**values):
    return lambda config: config.update(values)


def provider(**values):
    return lambda config: config["providers"]["loopback"].update(values)


def model(**values):
    def change(config):
        config["providers"]["loopback"]["models"] = [{"id": "loopback-model", **values}]

    return change


# -- the acceptance cases: the exact line a person reads ------------------------------


def test_a_misspelt_key_is_one_warning_naming_the_setting_meant(loopback, tmp_path):
    home = edited(write_config(tmp_path / "home", loopback([])), top(auto_aprove=True))

    out = run_cli("budget", home=home)

    assert out.returncode == 0, out.stderr
    assert out.stderr == WARNING
    assert "window" in out.stdout


def test_the_warning_is_said_once_in_a_command_that_reads_the_config_often(
    loopback, tmp_path, workspace
):
    srv = loopback([{"text": "hello"}])
    home = edited(write_config(tmp_path / "home", srv), top(auto_aprove=True))
    run_cli("new", home=home)

    out = run_cli("ask", "hi", home=home, cwd=workspace)

    assert out.returncode == 0, out.stderr
    assert out.stderr.count("auto_aprove") == 1 and WARNING in out.stderr
    assert out.stdout.strip() == "hello"


def test_infinity_in_max_rounds_is_one_error_line(loopback, tmp_path, workspace):
    srv = loopback([{"text": "never"}])
    home = edited(write_config(tmp_path / "home", srv), top(max_rounds=float("inf")))
    assert '"max_rounds": Infinity' in (home / "config.jsonc").read_text()

    out = run_cli("ask", "hi", home=home, cwd=workspace)

    assert (out.returncode, out.stderr) == (
        1,
        'nodecode: config.jsonc: "max_rounds" must be a whole number ≥ 1 (found Infinity)\n',
    )
    assert srv.model_requests == []


def test_a_number_for_the_model_is_one_error_line(loopback, tmp_path, workspace):
    home = edited(write_config(tmp_path / "home", loopback([])), top(model=5))

    out = run_cli("ask", "hi", home=home, cwd=workspace)

    assert (out.returncode, out.stderr) == (
        1,
        'nodecode: config.jsonc: "model" must be a non-empty string or null (found 5)\n',
    )


@pytest.mark.parametrize("tokens", ["²", "١٢٣٤٥"])
def test_context_tokens_in_other_than_ascii_digits_is_one_error_line(loopback, tmp_path, tokens):
    home = write_config(tmp_path / "home", loopback([]))

    out = run_cli("budget", home=home, env={"NODECODE_CONTEXT_TOKENS": tokens})

    assert (out.returncode, out.stderr) == (
        1,
        "nodecode: $NODECODE_CONTEXT_TOKENS must be a whole number of tokens ≥ 1, at most "
        f"9223372036854775807, in ASCII digits (found {tokens!r})\n",
    )


def test_context_tokens_in_ascii_digits_is_the_window(loopback, tmp_path):
    home = write_config(tmp_path / "home", loopback([]))

    out = run_cli("budget", home=home, env={"NODECODE_CONTEXT_TOKENS": " 12345 "})

    assert out.returncode == 0, out.stderr
    assert "12345" in out.stdout and "NODECODE_CONTEXT_TOKENS" in out.stdout


# -- every case of the issue ---------------------------------------------------------------

ERRORS = [
    (top(max_retries=float("nan")), '"max_retries" must be a whole number ≥ 0 (found NaN)'),
    (
        top(shell_timeout=float("inf")),
        '"shell_timeout" must be a number of seconds > 0 (found Infinity)',
    ),
    (
        top(result_max_chars=float("nan")),
        '"result_max_chars" must be a whole number ≥ 1 (found NaN)',
    ),
    (top(timeout=float("-inf")), '"timeout" must be a number of seconds > 0 (found -Infinity)'),
    (top(max_rounds=0.5), '"max_rounds" must be a whole number ≥ 1 (found 0.5)'),
    (top(max_rounds=True), '"max_rounds" must be a whole number ≥ 1 (found true)'),
    (top(max_retries=-1), '"max_retries" must be a whole number ≥ 0 (found -1)'),
    (top(model=[]), '"model" must be a non-empty string or null (found [])'),
    (top(mcp_project_servers=1), '"mcp_project_servers" must be true or false (found 1)'),
    (top(mcp_timeout=float("nan")), '"mcp_timeout" must be a number of seconds > 0 (found NaN)'),
    (
        top(instructions="AGENTS.md"),
        '"instructions" must be a list of file paths (found "AGENTS.md")',
    ),
    (
        top(mcp_servers={"x": {"command": "x", "comand": "y"}}),
        "mcp_servers.x.comand is not an MCP server setting: expected args, command, cwd, env, "
        "headers, type, url",
    ),
    (top(provider=[]), '"provider" must be a non-empty string or null (found [])'),
    (top(cache="2h"), '"cache" must be one of auto, 1h, 5m (found "2h")'),
    (top(shadow_max_mb="big"), '"shadow_max_mb" must be a number of MB ≥ 0 (found "big")'),
    (
        top(auto_approve=["writes"]),
        '"auto_approve" must be true or a list of write / shell / mcp / mcp:SERVER / '
        'mcp:SERVER/TOOL (found ["writes"])',
    ),
    (
        provider(base_url=5),
        "providers.loopback.base_url must be an http:// or https:// URL or null (found 5)",
    ),
    (
        provider(base_url=""),
        'providers.loopback.base_url must be an http:// or https:// URL or null (found "")',
    ),
    (
        provider(type="gemini"),
        "providers.loopback.type must be one of anthropic, openai, openai-responses, google "
        '(found "gemini")',
    ),
    (
        model(context_window=0.5),
        "providers.loopback.models[loopback-model].context_window must be a whole number "
        "of tokens ≥ 1, at most 9223372036854775807 (found 0.5)",
    ),
    (
        model(max_tokens="4096"),
        "providers.loopback.models[loopback-model].max_tokens must be a whole number "
        'of tokens ≥ 1, at most 9223372036854775807 (found "4096")',
    ),
    (
        model(max_tokens_field="max_output_tokens"),
        "providers.loopback.models[loopback-model].max_tokens_field must be one of "
        'max_tokens, max_completion_tokens (found "max_output_tokens")',
    ),
    (
        model(cache_min_tokens=float("inf")),
        "providers.loopback.models[loopback-model].cache_min_tokens must be a whole number "
        "of tokens ≥ 1, at most 9223372036854775807 (found Infinity)",
    ),
    (
        model(thinking={"type": "sometimes"}),
        'providers.loopback.models[loopback-model].thinking.type must be "adaptive" or '
        "\"enabled\" (found 'sometimes')",
    ),
]


@pytest.mark.parametrize(("change", "line"), ERRORS)
def test_a_wrong_value_is_one_error_line_naming_the_key(loopback, tmp_path, change, line):
    home = edited(write_config(tmp_path / "home", loopback([])), change)

    out = run_cli("budget", home=home)

    assert (out.returncode, out.stderr, out.stdout) == (1, f"nodecode: config.jsonc: {line}\n", "")


WARNINGS = [
    (top(max_round=3), '"max_round" is not a setting; did you mean "max_rounds"?'),
    (top(maxRounds=3), '"maxRounds" is not a setting; did you mean "max_rounds"?'),
    (
        top(mcpServers={}),
        '"mcpServers" is not a setting; did you mean "mcp_servers"?',
    ),
    (
        top(colorscheme="dark"),
        '"colorscheme" is not a setting (ignored; `nodecode config` lists them)',
    ),
    (
        provider(api_key_evn="KEY"),
        "providers.loopback.api_key_evn is not a setting; did you mean "
        "providers.loopback.api_key_env?",
    ),
    (
        provider(base_ur="http://x"),
        "providers.loopback.base_ur is not a setting; did you mean providers.loopback.base_url?",
    ),
    (
        model(context_windw=8000),
        "providers.loopback.models[loopback-model].context_windw is not a setting; did you "
        "mean providers.loopback.models[loopback-model].context_window?",
    ),
]


@pytest.mark.parametrize(("change", "line"), WARNINGS)
def test_an_unknown_key_is_one_warning_and_the_rest_still_works(loopback, tmp_path, change, line):
    home = edited(write_config(tmp_path / "home", loopback([])), change)

    out = run_cli("budget", home=home)

    assert out.returncode == 0
    assert out.stderr == f"nodecode: warning: config.jsonc: {line}\n"
    assert "window" in out.stdout


# -- what the config keeps ---------------------------------------------------------------


def config_of(tmp_path: Path, text: str, environ: dict | None = None):
    (tmp_path / "config.jsonc").write_text(text)
    return load_config(tmp_path, environ or {})


def test_a_whole_number_written_with_a_point_is_that_number_and_a_fraction_of_a_second_stays(
    tmp_path,
):
    config = config_of(tmp_path, '{"max_rounds": 50.0, "shell_timeout": 0.5, "max_retries": 0}')

    assert config.max_rounds == 50 and isinstance(config.max_rounds, int)
    assert config.shell_timeout == 0.5 and config.max_retries == 0


def test_every_setting_has_its_default_and_is_read_by_name(tmp_path):
    config = config_of(tmp_path, "{}")

    for s in schema.SETTINGS.settings:
        if s.name not in ("provider", "model"):
            assert config.setting(s.name) == s.default, s.name
    assert config.shadow_max_mb == 200 and config.auto_approve == frozenset()
    anthropic = config.providers["anthropic"]
    assert anthropic.setting("base_url") == "https://api.anthropic.com"
    assert anthropic.setting("models") == [] and anthropic.setting("api_key_cmd") is None


def test_a_model_setting_a_wire_format_reads_reaches_the_request(loopback, tmp_path, workspace):
    srv = loopback([{"text": "hi"}])
    entry = {"id": "loopback-model", "max_tokens": 100, "max_tokens_field": "max_completion_tokens"}
    home = write_config(tmp_path / "home", srv, "openai", models=[entry])
    run_cli("new", home=home)

    out = run_cli("ask", "hello", home=home, cwd=workspace)

    assert (out.returncode, out.stderr) == (0, "")
    body = srv.model_requests[0].body
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body


def test_an_unknown_key_is_left_out_of_what_the_config_keeps(tmp_path):
    config = config_of(
        tmp_path,
        '{"providers": {"p": {"type": "openai", "models": [{"id": "m", "context_windw": 9}]}}}',
    )

    assert config.providers["p"].model_entry("m") == {"id": "m"}
    assert config.warnings == (
        "config.jsonc: providers.p.models[m].context_windw is not a setting; did you mean "
        "providers.p.models[m].context_window?",
    )


def test_keys_are_still_refused_in_the_config(tmp_path):
    with pytest.raises(ConfigError) as caught:
        config_of(tmp_path, '{"providers": {"anthropic": {"api_key": "sk-secret"}}}')

    assert str(caught.value).startswith("config.jsonc: providers.anthropic.api_key is not read")
    assert "sk-secret" not in str(caught.value)


def test_a_provider_of_no_known_type_says_it_needs_one(tmp_path):
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "providers.mine.type must be one of anthropic, openai, openai-responses, google "
            "(found nothing)"
        ),
    ):
        config_of(tmp_path, '{"providers": {"mine": {"base_url": "http://localhost:1/v1"}}}')


def test_a_model_entry_names_its_model(tmp_path):
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "providers.anthropic.models[0].id must be a non-empty string (found nothing)"
        ),
    ):
        config_of(tmp_path, '{"providers": {"anthropic": {"models": [{"max_tokens": 5}]}}}')


@pytest.mark.parametrize(
    ("name", "value", "found"),
    [
        ("NODECODE_LEASE_SECONDS", "soon", "'soon'"),
        ("NODECODE_LEASE_SECONDS", "inf", "'inf'"),
        ("NODECODE_LEASE_SECONDS", "٣", "'٣'"),
        ("NODECODE_MODELS_URL", "models.dev/api.json", "'models.dev/api.json'"),
        ("NODECODE_CONTEXT_TOKENS", "0", "'0'"),
        ("NODECODE_CONTEXT_TOKENS", "9" * 40, repr("9" * 40)),
    ],
)
def test_a_bad_variable_is_one_error_line_naming_it(tmp_path, name, value, found):
    with pytest.raises(ConfigError) as caught:
        config_of(tmp_path, "{}", {name: value})

    line = str(caught.value)
    assert line.startswith(f"${name} must be ") and line.endswith(f"(found {found})")


def test_an_empty_variable_is_unset(tmp_path):
    config = config_of(tmp_path, "{}", {"NODECODE_CONTEXT_TOKENS": "", "NODECODE_PROVIDER": ""})

    assert config.provider is None


def test_every_nodecode_variable_the_code_reads_is_declared():
    """A variable read in the core, the shim or the Lua side is in schema.ENVIRONMENT."""
    read = set()
    for folder in ("python", "rplugin", "lua", "plugin"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".lua"):
                read.update(re.findall(r"NODECODE_[A-Z_]*[A-Z]", path.read_text(encoding="utf-8")))
    assert read - set(schema.VARIABLES) == set()


# -- nodecode config, and the reference made from the schema -------------------------------


def test_config_check_says_what_is_wrong_or_that_all_is_well(loopback, tmp_path):
    home = write_config(tmp_path / "home", loopback([]), max_rounds=50.0, shell_timeout=0.5)
    ok = run_cli("config", "check", home=home)
    edited(home, top(max_round=3))
    warned = run_cli("config", "check", home=home)
    edited(home, top(timeout=0))
    wrong = run_cli("config", "check", home=home)

    path = home / "config.jsonc"
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, f"{path}: ok\n", "")
    assert (warned.returncode, warned.stdout) == (0, f"{path}: 1 warning (above)\n")
    assert warned.stderr == (
        'nodecode: warning: config.jsonc: "max_round" is not a setting; did you mean '
        '"max_rounds"?\n'
    )
    assert (wrong.returncode, wrong.stdout) == (1, "")
    assert wrong.stderr == (
        'nodecode: config.jsonc: "timeout" must be a number of seconds > 0 (found 0)\n'
    )


def test_the_help_file_lists_every_setting_as_the_schema_says():
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "config_help.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr


def names(table) -> list[str]:
    return [s.name for s in table.settings]


def test_nodecode_config_lists_every_setting_and_variable(tmp_path):
    out = run_cli("config", home=tmp_path)
    helped = run_cli("config", "--help", home=tmp_path)

    assert out.returncode == helped.returncode == 0
    assert out.stdout == reference.text() and "list every setting" in helped.stdout
    listed = re.findall(r"^(\S+)", out.stdout, re.MULTILINE)
    every = names(schema.SETTINGS) + names(schema.PROVIDER) + names(schema.MODEL)
    public = [v.name for v in schema.ENVIRONMENT if not v.internal]
    assert [n for n in listed if n in every + public] == every + public


def test_every_setting_has_a_meaning_and_a_refused_key_says_why():
    for table in (schema.SETTINGS, schema.PROVIDER, schema.MODEL):
        for s in table.settings:
            assert s.meaning and "\n" not in s.meaning, s.name
            if isinstance(s.kind, Refused):
                assert s.kind.why, s.name
