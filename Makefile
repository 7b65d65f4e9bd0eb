# The README commands: `make demo` and `make test` (plus `make unit`, the fast tier). Each sets itself up.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: demo test unit install bench soak groq-conformance clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[embedded,dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/kinflow demo

# The suite runs on TEST_WORKERS processes (pytest-xdist), one test file at a time each, handed
# out in the order tests/conftest.py sorts them (the long folders first); every worker starts its
# own embedded lake in a temporary directory of its own. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/ruff check kinflow tests bench
	$(BIN)/mypy
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile \
	  --no-loadscope-reorder

# The fast tier: pure core and unit tests, no lake daemon (the launcher refuses under
# KINFLOW_NO_EMBEDDED_LAKE, and every test that needs the lake is marked `lake`).
unit: $(STAMP)
	KINFLOW_NO_EMBEDDED_LAKE=1 $(BIN)/pytest -q -p no:cacheprovider -m "not lake and not slow" \
	  tests/core tests/unit

# Every benchmark but the soak, which runs with `make soak` (SOAK_MINUTES, default 10).
bench: $(STAMP)
	for b in $(filter-out bench/soak.py,$(wildcard bench/[!_]*.py)); do \
	  echo "== $$b"; $(BIN)/python $$b || exit 1; done

SOAK_MINUTES ?= 10
soak: $(STAMP)
	$(BIN)/pytest -q -m slow -p no:cacheprovider
	$(BIN)/python bench/soak.py --minutes $(SOAK_MINUTES)

groq-conformance: $(STAMP)
	$(BIN)/python -m tests.conformance.run --tiers 1,2,3

clean:
	rm -rf $(VENV) .kinflow .pytest_cache .mypy_cache .ruff_cache
