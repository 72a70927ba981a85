# The README's two commands: `make run` (the main job) and `make test` (what CI runs).
# Both build a virtual environment in .venv from scratch when it is missing or stale.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run example test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch==2.13.0 is the local CPU build (any other spec pulls the CUDA wheels); first,
	# so that the `torch` extra's range is already met by it.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[service,test,sweep,torch]'
	touch $(STAMP)

# Start the HTTP service (web page, API, docs at /docs) on HOST:PORT; Ctrl-C stops it.
HOST ?= 127.0.0.1
PORT ?= 8000
run: $(STAMP)
	$(BIN)/ppsched serve --host $(HOST) --port $(PORT)

# Solve the paper's 1.5B configuration (p=8, m=24) at 1p and 2p memory and draw both.
example: $(STAMP)
	$(BIN)/ppsched solve profiles/gpt1.5b-p8-m24.json --svg out/gpt1.5b-p8-m24-1p.svg \
		-o out/gpt1.5b-p8-m24-1p.json
	$(BIN)/ppsched solve profiles/gpt1.5b-p8-m24.json --memory-limit 16 \
		--svg out/gpt1.5b-p8-m24-2p.svg -o out/gpt1.5b-p8-m24-2p.json

lint: $(STAMP)
	$(BIN)/ruff check solver api runtime_adapter benchmarks tests
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bubble_table

clean:
	rm -rf $(VENV) out ppsched.sqlite3 ppsched.sqlite3-*
