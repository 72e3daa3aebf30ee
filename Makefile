# Tidelens: `make run` opens the app on the bundled sample; `make test` runs every test.
# Both create .venv and install the pinned dependencies first, so a fresh clone needs nothing else.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PORT   ?= 8501
NOTEBOOK_ARGS ?=

.PHONY: run test bench clean install notebook

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,notebook]'
	touch $(STAMP)

install: $(STAMP)

# serve.py prints the address to open, with the token that makes you the local operator (an
# admin); Streamlit's own lines would print it without the token, which reads only.
run: $(STAMP)
	$(VENV)/bin/streamlit run serve.py --server.port $(PORT) --logger.hideWelcomeMessage true

# JupyterLab on notebooks/, its python3 kernel this .venv's: each notebook opens on the bundled
# sample (or data/tidelens.duckdb) and takes a store path in its parameters cell (docs/notebook.md).
# As root (a container), JupyterLab wants --allow-root; its token guards it either way.
notebook: $(STAMP)
	TIDELENS_CONFIG=$${TIDELENS_CONFIG:-$(CURDIR)/tidelens.toml} $(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks \
		$$([ "$$(id -u)" = 0 ] && echo --allow-root) $(NOTEBOOK_ARGS)

# loadscope: one module's tests (and its module-scoped fixtures, the heavy simulations) on one
# worker; pytest 9.2 makes xdist's loadgroup ignore xdist_group marks (pytest-xdist#1386).
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadscope --durations=25 --doctest-modules analytics tests

bench: $(STAMP)
	@echo "Run one benchmark at a time, e.g. $(PY) bench/ingest.py (some take many minutes)."

clean:
	rm -rf $(VENV) data/cache .pytest_cache
