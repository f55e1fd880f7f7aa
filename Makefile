# nodecode. `make install` is also the plugin manager's build step (lazy.nvim:
# build = 'make install'): it creates the .venv whose Python runs the remote
# plugin's host, with the runtime dependencies only, and writes doc/tags.
# `make test` and `make demo` add what they need on top (pyproject.toml's
# extras: the test tools, and the Neovim the tests and the demo run).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
STAMP := $(VENV)/.installed

.PHONY: install test demo demo-clean bench

# The extras `make test` / `make demo` added to this .venv (their stamps).
EXTRAS = $(patsubst $(VENV)/.installed-%,%,$(wildcard $(VENV)/.installed-*))

install: $(STAMP) doc/tags
	@$(PY) scripts/prune_venv.py $(EXTRAS)

# Redone only when pyproject.toml is newer than the stamp.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	@touch $@

$(VENV)/.installed-%: $(STAMP)
	$(PIP) -e '.[$*]'
	@touch $@

# The Lua checks. PyPI ships neither StyLua nor a Lua linter. StyLua comes from
# the npm registry, under .venv (never global): its binary is in the platform
# package stylua-bin depends on, so nothing is downloaded at run time. No
# registry here has selene or lua-language-server; luacheck is Debian's
# lua-check, which .ci/run installs (elsewhere: apt-get install lua-check).
STYLUA_VERSION := 2.5.2
NODE_PREFIX := $(VENV)/node
STYLUA := $(NODE_PREFIX)/node_modules/.bin/stylua
LUACHECK ?= luacheck

$(NODE_PREFIX)/.installed-stylua-$(STYLUA_VERSION):
	@command -v npm >/dev/null || { echo 'make: StyLua installs with npm (Node.js): none on PATH' >&2; exit 1; }
	npm install --prefix $(NODE_PREFIX) --no-save --no-audit --no-fund --loglevel=error \
		@johnnymorganz/stylua-bin@$(STYLUA_VERSION)
	@touch $@

# :help nodecode in any plugin manager, without a Neovim on PATH.
doc/tags: doc/nodecode.txt scripts/helptags.py
	$(PYTHON) scripts/helptags.py doc

# Lint and formatting are part of the suite: CI runs exactly this.
test: install $(VENV)/.installed-test $(NODE_PREFIX)/.installed-stylua-$(STYLUA_VERSION)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(STYLUA) --check . .luacheckrc
	@scripts/luacheck.sh $(LUACHECK)
	$(VENV)/bin/pytest -n 2

# The demo keeps .demo/ (its session comes back next time); demo-clean removes it.
demo: install $(VENV)/.installed-demo
	$(PY) -m nodecode.demo

demo-clean:
	@if [ -x $(PY) ]; then $(PY) -m nodecode.demo --clean; else rm -rf .demo; fi

# Every benchmark of bench/README.md, reduced sizes, one table (BENCH_FULL=1: defaults).
bench: install $(VENV)/.installed-test
	@$(PY) bench/run_all.py
