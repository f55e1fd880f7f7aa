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

install: $(STAMP) doc/tags

# Redone only when pyproject.toml is newer than the stamp.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	@touch $@

$(VENV)/.installed-%: $(STAMP)
	$(PIP) -e '.[$*]'
	@touch $@

# :help nodecode in any plugin manager, without a Neovim on PATH.
doc/tags: doc/nodecode.txt scripts/helptags.py
	$(PYTHON) scripts/helptags.py doc

# Lint and formatting are part of the suite: CI runs exactly this.
test: install $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest

# The demo keeps .demo/ (its session comes back next time); demo-clean removes it.
demo: install $(VENV)/.installed-demo
	$(PY) -m nodecode.demo

demo-clean:
	@if [ -x $(PY) ]; then $(PY) -m nodecode.demo --clean; else rm -rf .demo; fi

# Every benchmark of SPEC section 11, reduced sizes, one table (BENCH_FULL=1: defaults).
bench: install $(VENV)/.installed-test
	@$(PY) bench/run_all.py
