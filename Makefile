# Targets CI uses too. PYTHON is the interpreter of the environment tiny is installed in.
PYTHON ?= python

.PHONY: test test-slow lint format bench

test:
	$(PYTHON) -m pytest -n auto --dist loadfile

test-slow:
	$(PYTHON) -m pytest -m slow

lint:
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy
	lint-imports

format:
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .

bench:
	$(PYTHON) benchmarks/routing.py
	$(PYTHON) benchmarks/abstain.py
	$(PYTHON) benchmarks/bench_smoke.py
	$(PYTHON) benchmarks/overhead.py
	$(PYTHON) benchmarks/runlog.py
	$(PYTHON) benchmarks/scale.py
	$(PYTHON) benchmarks/context_diet.py
