# The two README commands: `make demo` and `make test`. Both set everything up themselves.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: demo test install bench soak groq-conformance clean

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

test: $(STAMP)
	$(BIN)/ruff check kinflow tests bench
	$(BIN)/mypy
	$(BIN)/pytest -q -p no:cacheprovider

bench: $(STAMP)
	for b in bench/[!_]*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

soak: $(STAMP)
	$(BIN)/pytest -q -m slow

groq-conformance: $(STAMP)
	$(BIN)/python -m tests.conformance.run --tiers 1,2,3

clean:
	rm -rf $(VENV) .kinflow .pytest_cache .mypy_cache .ruff_cache
