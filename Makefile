# The README's two commands: `make run` (the main job) and `make test` (what CI runs).
# Each builds its own virtual environment from scratch when it is missing or stale:
# `make run` a small one (.venv-run: the solver, the 'service' and 'sweep' extras, no
# torch and no test tools), `make test` the full one (.venv: every extra, torch's CPU build, the test
# tools), and installs Debian's Chromium for the browser tests when it is missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_VENV := .venv-run
RUN_STAMP := $(RUN_VENV)/.installed
CHROMIUM := /usr/bin/chromium

.PHONY: run example test lint bench clean chromium postgres docs check-docs gpu-check

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch==2.13.0 is the local CPU build (any other spec pulls the CUDA wheels); first,
	# so that the `torch` extra's range is already met by it.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[service,test,sweep,torch,docs]'
	touch $(STAMP)

# What serving and every `ppsched` command need (the 'sweep' extra: `sweep`, `advise`'s
# YAML, `pack`'s Parquet; about 15 s more to install): no torch, no test tools.
$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(RUN_VENV)/bin/python -m pip install --quiet -e '.[service,sweep]'
	touch $(RUN_STAMP)

# Start the HTTP service (web page, API, docs at /docs) on HOST:PORT; Ctrl-C stops it.
HOST ?= 127.0.0.1
PORT ?= 8000
run: $(RUN_STAMP)
	$(RUN_VENV)/bin/ppsched serve --host $(HOST) --port $(PORT)

# Solve the paper's 1.5B configuration (p=8, m=24) at 1p and 2p memory and draw both.
example: $(RUN_STAMP)
	$(RUN_VENV)/bin/ppsched solve profiles/gpt1.5b-p8-m24.json --mkdir \
		--svg out/gpt1.5b-p8-m24-1p.svg -o out/gpt1.5b-p8-m24-1p.json
	$(RUN_VENV)/bin/ppsched solve profiles/gpt1.5b-p8-m24.json --mkdir --memory-limit 16 \
		--svg out/gpt1.5b-p8-m24-2p.svg -o out/gpt1.5b-p8-m24-2p.json

# mypy reads the folders under their installed names through links (see pyproject.toml).
.mypy-src/ppsched:
	mkdir -p $@
	for pkg in solver api runtime_adapter; do ln -sfn ../../$$pkg $@/$$pkg; done

# The documentation site (docs/, mkdocs.yml) at http://$(HOST):8001; `check-docs` exits
# non-zero on any figure not tied to its source, any result block or result file that is
# stale, and any broken link of the site.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr $(HOST):8001

check-docs: $(STAMP)
	$(BIN)/python -m benchmarks.readme --check
	$(BIN)/python -m benchmarks.freshness
	$(BIN)/python -m benchmarks.figures --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $$(mktemp -d)

lint: $(STAMP) .mypy-src/ppsched
	$(BIN)/ruff check solver api runtime_adapter benchmarks tests
	$(BIN)/mypy

# The browser tests drive Debian's Chromium (never a downloaded browser): install the
# package when it is missing (root, or sudo when there is one).
chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
		echo "installing Debian's chromium (the browser tests need $(CHROMIUM))"; \
		$$sudo apt-get update -qq && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	fi

# The service's replica tests start a real PostgreSQL server from Debian's binaries.
postgres:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && \
	    ! { command -v pg_config >/dev/null && [ -x "$$(pg_config --bindir)/initdb" ]; }; then \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
		echo "installing Debian's postgresql (the service's replica tests start a server)"; \
		$$sudo apt-get update -qq && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
	fi

test: lint chromium postgres
	$(BIN)/pytest -q

# GPU readiness in one unattended run of at most ten minutes (NCCL, the offload copy
# streams, CUDA-event profiling, fidelity): results in benchmarks/results/gpu_*.md on a
# CUDA machine; elsewhere the same checks run on the CPU (the tests run them too).
gpu-check: $(STAMP)
	$(BIN)/python -m benchmarks.gpu_check

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bubble_table

clean:
	rm -rf $(VENV) $(RUN_VENV) .mypy-src out ppsched.sqlite3 ppsched.sqlite3-*
