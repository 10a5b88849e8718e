# ddpctl developer targets. `make test` is the README's test command and what .ci/run runs.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_CPU ?= torch==2.13.0
# the tag make image-cpu builds and the integration tests run on
CPU_IMAGE ?= ddpctl/ddp-train:cpu
# the CUDA image the tests check (marker cuda_image), made with no registry: make image-cuda-local
CUDA_TEST_IMAGE ?= ddpctl/ddp-train:cuda-local
# pytest-xdist workers. `make test`: most integration tests wait on containers, Slurm or a registry rather than
# compute, so 3 workers beat 2 on 2 cores (docs/benchmarks/2026-11-27-test-suite-history.md); tests sharing a service run on one worker
# (xdist_group marks, --dist loadgroup). `make check`: CPU-bound, one worker per core.
TEST_WORKERS ?= 3
CHECK_WORKERS ?= 2
# more pytest arguments for check, unit and test (e.g. PYTEST_ARGS='--durations=0', or -k EXPR)
PYTEST_ARGS ?=

# Python writes its bytecode caches (__pycache__, git-ignored) even where the environment says not to: without
# them every `ddpctl` and ddp-train process the tests start compiles ddpctl's or ddp_train's sources again, and
# every pytest worker rewrites the test modules again (the CLI tests: 30 % more CPU; docs/benchmarks/2026-11-27-test-suite-history.md)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install check test unit render lint image image-cpu image-cuda-local engine base-image wheelhouse clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# installed once, again when pyproject.toml changes (ddpctl itself is editable: source edits need nothing)
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_CPU)
	$(BIN)/pip install -q -e '.[dev]'
	touch '$@'

install: $(VENV)/.installed  ## venv with ddpctl (editable), CPU torch and the test tools

# `make check` leaves out what needs an engine, the Slurm cluster, process groups or a docker-compose process per
# file (marker compose_client), and runs the property tests with fewer examples each (CHECK_EXAMPLES; `make unit`
# and `make test` run the full DDPCTL_HOSTILE_EXAMPLES default of the tests).
CHECK_EXAMPLES ?= 50
check: install lint  ## the inner loop, no Docker Engine needed: lint + unit + CLI tests (about a minute and a half)
	DDPCTL_HOSTILE_EXAMPLES=$(CHECK_EXAMPLES) $(BIN)/pytest -q -n $(CHECK_WORKERS) tests/unit tests/cli \
		-m "not docker and not slurm and not distributed and not compose_client" $(PYTEST_ARGS)

unit: install  ## every test that needs no Docker Engine (also torch.distributed and the Slurm cluster)
	$(BIN)/pytest -q -n $(CHECK_WORKERS) --dist loadgroup tests -m "not docker" $(PYTEST_ARGS)

# lint first: a lint error fails `make test` (and so CI) before anything is built.
# --durations=40: the slowest tests in every run's output (CI's too), where a slow new test shows first.
# PYTEST_EXIT_FILE (environment, set by .ci/run): pytest's exit status is written there, since make reports 2
# for any failed recipe.
test: install lint engine image-cpu image-cuda-local  ## everything, on the real Docker Engine (started if needed)
	DDPCTL_REQUIRE_DOCKER=1 DDPCTL_TEST_IMAGE='$(CPU_IMAGE)' DDPCTL_TEST_CUDA_IMAGE='$(CUDA_TEST_IMAGE)' \
		$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=40 $(PYTEST_ARGS) tests; status=$$?; \
	if [ -n "$$PYTEST_EXIT_FILE" ]; then echo "$$status" > "$$PYTEST_EXIT_FILE"; fi; exit "$$status"

render: install  ## regenerate the checked-in examples under compose/ k8s/ slurm/
	$(BIN)/python -m ddpctl.examples

lint: install  ## ruff check src tests (the version pinned in pyproject.toml's dev extra)
	$(BIN)/ruff check src tests

# ---- images and the Docker Engine (docs/images.md; what make test installs and leaves: docs/testing.md)
CUDA_BASE ?= pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
WHEELHOUSE ?= wheelhouse

engine:  ## a running Docker Engine + docker-compose + debootstrap (installs/starts them when missing)
	bash scripts/ci-setup.sh

# Offline wheels for the CPU image: torch (CPU build), ddpctl's runtime dependencies and tensorboard (every image
# carries it: IMAGE_EXTRAS in src/ddpctl/images/build.py).
IMAGE_EXTRAS = tensorboard
$(WHEELHOUSE)/.stamp: pyproject.toml $(WHEELHOUSE)/.extras-$(IMAGE_EXTRAS) | $(BIN)/python
	mkdir -p $(WHEELHOUSE)
	$(BIN)/pip download -q -d $(WHEELHOUSE) $(TORCH_CPU) numpy $(IMAGE_EXTRAS) .
	rm -f $(WHEELHOUSE)/ddpctl-*
	touch $@

# a wheelhouse made before the extras changed is made again
$(WHEELHOUSE)/.extras-$(IMAGE_EXTRAS): | $(BIN)/python
	mkdir -p $(WHEELHOUSE)
	rm -f $(WHEELHOUSE)/.extras-*
	touch $@

wheelhouse: $(WHEELHOUSE)/.stamp

base-image: install engine  ## ddpctl/base:bookworm via debootstrap (skipped when up to date)
	$(BIN)/ddpctl image base

image-cpu: install engine base-image $(WHEELHOUSE)/.stamp  ## ddpctl/ddp-train:cpu, fully offline (cached)
	$(BIN)/ddpctl image build --cpu --wheelhouse '$(WHEELHOUSE)' --tag '$(CPU_IMAGE)'

# ddpctl pulls the base when the engine lacks it; no registry -> its one-line hint, whose first fix is
# CUDA_BASE=local: the same torch/CUDA on the local Debian base, CUDA wheels downloaded by pip on this host
image: install engine $(if $(filter local,$(CUDA_BASE)),base-image)  ## ddpctl/ddp-train:cuda (CUDA_BASE=local: no registry)
	$(BIN)/ddpctl image build --base $(CUDA_BASE)

# The CUDA image of the tests: built once per machine (wheels cached in ~/.cache/ddpctl, image by content)
image-cuda-local: install engine base-image  ## ddpctl/ddp-train:cuda-local, CUDA_BASE=local under its own tag
	$(BIN)/ddpctl image build --base local --tag '$(CUDA_TEST_IMAGE)'

clean:
	rm -rf build dist *.egg-info .pytest_cache
