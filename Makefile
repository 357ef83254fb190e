# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install lint bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,sim]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/fg-sysid demo --out demo-output

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --durations=15

lint: $(STAMP)
	$(BIN)/ruff check fg_sysid tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_accuracy.py
	$(BIN)/python benchmarks/bench_scaling.py
	$(BIN)/python benchmarks/bench_tiago.py
	$(BIN)/python benchmarks/bench_excitation.py
	$(BIN)/python benchmarks/bench_payload.py
	$(BIN)/python benchmarks/bench_payload_excitation.py
	$(BIN)/python benchmarks/bench_identifiability.py
	$(BIN)/python benchmarks/bench_floating_speed.py
	$(BIN)/python benchmarks/bench_outofclass.py
	$(BIN)/python benchmarks/bench_external.py

clean:
	rm -rf demo-output .pytest_cache
