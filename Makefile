# ddpctl developer targets. `make test` is the README's test command and what .ci/run runs.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_CPU ?= torch==2.13.0

.PHONY: install test unit render lint image image-cpu clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

install: $(BIN)/python  ## venv with ddpctl (editable), CPU torch and the test tools
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_CPU)
	$(BIN)/pip install -q -e '.[dev]'

unit: install  ## fast tests: no Docker Engine needed
	$(BIN)/pytest -q tests -m "not docker"

test: install  ## everything, on the real Docker Engine (started if needed)
	$(BIN)/pytest -q tests

render: install  ## regenerate the checked-in examples under compose/ k8s/ slurm/
	$(BIN)/python -m ddpctl.examples

lint: install
	$(BIN)/ruff check src tests

clean:
	rm -rf build dist *.egg-info .pytest_cache
