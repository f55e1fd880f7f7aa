"""`python -m nodecode.demo` (`make demo`): Neovim with nodecode on a small
workspace, isolated from the person's own config and data.

Everything lives under ``<repo>/.demo/``: a fresh copy of ``workspace/``, a
nodecode home and the XDG directories Neovim uses. With ANTHROPIC_API_KEY or
OPENAI_API_KEY set it talks to that provider; otherwise to the loopback
server replaying ``script.jsonl`` (read, edit, run the tests, answer).
"""
