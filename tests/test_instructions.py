"""Project instructions (design.md §The request): AGENTS.md files, read from the
personal home, then from the outermost folder to the cwd, then config.jsonc's
list, go into every request's system prompt, each under a line naming it."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli, write_config

KEY = "sk-ant-instructions-0123456789abcdef"


def system_of(srv) -> str:
    """The system prompt of the newest request the loopback received (Anthropic)."""
    blocks = srv.model_requests[-1].body["system"]
    return "".join(b["text"] for b in blocks)


@pytest.fixture
def place(tmp_path, loopback):
    """A repository with a nested work folder, a user home holding it, and a nodecode home."""
    user = tmp_path / "user"
    repo = user / "src" / "proj"
    work = repo / "pkg" / "mod"
    work.mkdir(parents=True)
    (repo / ".git").mkdir()
    home = tmp_path / "nchome"
    srv = loopback([{"text": "ok"}] * 6)
    write_config(home, srv)
    env = {"HOME": str(user)}
    return home, repo, work, user, srv, env


def ask(home, work, env, text="go"):
    return run_cli("ask", text, home=home, cwd=work, env=env)


def test_files_are_read_personal_first_then_outermost_to_innermost_then_the_configs(place):
    home, repo, work, user, srv, env = place
    (home / "AGENTS.md").write_text("personal: be brief\n")
    (user / "AGENTS.md").write_text("above the repository: never read\n")
    (repo / "AGENTS.md").write_text("repo: run make test\n")
    (repo / "pkg" / "CLAUDE.md").write_text("pkg: claude file, no AGENTS.md here\n")
    (work / "AGENTS.md").write_text("mod: tabs, not spaces\n")
    (work / "CLAUDE.md").write_text("mod: shadowed by AGENTS.md\n")
    extra = repo / "docs" / "style.md"
    extra.parent.mkdir()
    extra.write_text("extra: from the config\n")
    config = json.loads((home / "config.jsonc").read_text().split("\n", 1)[1])
    config["instructions"] = ["../../docs/style.md"]
    (home / "config.jsonc").write_text(json.dumps(config))

    done = ask(home, work, env)
    assert done.returncode == 0, done.stderr
    system = system_of(srv)
    order = [
        "personal: be brief",
        "repo: run make test",
        "pkg: claude file",
        "mod: tabs, not spaces",
        "extra: from the config",
    ]
    at = [system.index(text) for text in order]
    assert at == sorted(at)
    assert "never read" not in system and "shadowed by AGENTS.md" not in system
    # each under a line naming its path: relative to the cwd, else ~/…
    assert f"## {home / 'AGENTS.md'}\npersonal: be brief" in system  # outside cwd and ~: whole
    assert "## ../../AGENTS.md\nrepo: run make test" in system
    assert "## ../CLAUDE.md\npkg: claude file" in system
    assert "## AGENTS.md\nmod: tabs, not spaces" in system
    assert "## ../../docs/style.md\nextra: from the config" in system


def test_without_a_repository_folders_are_read_up_to_the_home_folder(tmp_path, loopback):
    user = tmp_path / "user"
    work = user / "notes" / "today"
    work.mkdir(parents=True)
    (tmp_path / "AGENTS.md").write_text("outside the home folder: never read\n")
    (user / "AGENTS.md").write_text("home folder: plain words\n")
    home = tmp_path / "nchome"
    srv = loopback([{"text": "ok"}])
    write_config(home, srv)
    done = ask(home, work, {"HOME": str(user)})
    assert done.returncode == 0, done.stderr
    system = system_of(srv)
    assert "home folder: plain words" in system and "never read" not in system


def test_a_changed_file_takes_effect_at_the_next_request_and_is_logged(place):
    home, repo, work, user, srv, env = place
    (repo / "AGENTS.md").write_text("first rules\n")
    assert ask(home, work, env).returncode == 0
    first = system_of(srv)
    (repo / "AGENTS.md").write_text("second rules\n")
    assert ask(home, work, env, "again").returncode == 0
    second = system_of(srv)
    assert "first rules" in first and "second rules" in second and "first rules" not in second
    assert first.split("# Project instructions")[0] == second.split("# Project instructions")[0]
    log = run_cli("recall-log", "--match", "project instructions now", home=home, cwd=work, env=env)
    assert log.returncode == 0, log.stderr
    assert log.stdout.count("project instructions now: ../../AGENTS.md") == 2, log.stdout
    # an unchanged file logs nothing more
    assert ask(home, work, env, "third").returncode == 0
    log = run_cli("recall-log", "--match", "project instructions now", home=home, cwd=work, env=env)
    assert log.stdout.count("project instructions now") == 2


def test_status_lists_the_files_with_their_tokens_as_their_own_part(place):
    home, repo, work, user, srv, env = place
    (repo / "AGENTS.md").write_text("Use the project's make targets for everything. " * 20)
    assert ask(home, work, env).returncode == 0
    done = run_cli("status", "--json", home=home, cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    [entry] = r["instructions"]
    assert entry["path"] == "../../AGENTS.md" and 150 < entry["tokens"] < 260
    assert 150 < r["parts"]["instructions"] < 270
    text = run_cli("status", home=home, cwd=work, env=env).stdout
    assert "instructions: ../../AGENTS.md" in text


def test_a_key_in_an_instructions_file_is_redacted(place):
    home, repo, work, user, srv, env = place
    (repo / "AGENTS.md").write_text(f"deploy with {KEY} please\n")
    done = ask(home, work, {**env, "ANTHROPIC_API_KEY": KEY})
    assert done.returncode == 0, done.stderr
    system = system_of(srv)
    assert KEY not in system and "[redacted:ANTHROPIC_API_KEY]" in system


def test_a_listed_file_that_is_missing_is_one_line_and_nothing_is_sent(place):
    home, repo, work, user, srv, env = place
    config = json.loads((home / "config.jsonc").read_text().split("\n", 1)[1])
    config["instructions"] = ["nope.md"]
    (home / "config.jsonc").write_text(json.dumps(config))
    done = ask(home, work, env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"nodecode: config.jsonc: instructions[0] must name a file (found no file at {work / 'nope.md'})"
    ]
    assert srv.model_requests == []


def test_an_instructions_file_that_is_not_utf8_is_one_line(place):
    home, repo, work, user, srv, env = place
    (work / "AGENTS.md").write_bytes(b"caf\xe9\n")
    done = ask(home, work, env)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "AGENTS.md: an instructions file must be UTF-8 (byte 3" in line
    assert srv.model_requests == []


def test_no_instructions_leave_the_prompt_as_it_was(tmp_path, loopback):
    from nodecode.verbs.prompt import SYSTEM_PROMPT

    work = tmp_path / "w"
    work.mkdir()
    home = tmp_path / "nchome"
    srv = loopback([{"text": "ok"}])
    write_config(home, srv)
    assert ask(home, work, {"HOME": str(tmp_path / "nobody")}).returncode == 0
    assert system_of(srv) == SYSTEM_PROMPT
