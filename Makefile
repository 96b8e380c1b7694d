# `make verify` and `make test` set up .venv on first use (torch==2.13.0 first, so that no CUDA
# build is ever pulled), then run. Nothing but Python 3.11 is needed beforehand.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: verify test docs bench clean coverage mutation

$(STAMP): pyproject.toml setup.py runtime/ledger/_move.c runtime/ledger/_lane.c runtime/ledger/_ledger_lane.c runtime/ledger/_move.h runtime/_step.c verification/checker/_key.c verification/checker/_decode.c verification/checker/_search.c verification/abstract/_successors.c verification/_records.h requirements/sglang.txt requirements/torch.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	# also builds the ledger's compiled move (runtime/ledger/_move.c, _lane.c, _ledger_lane.c), the checker's key,
	# decoding and bookkeeping (verification/checker/_key.c, _decode.c, _search.c) and the abstract scheduler's
	# successors (verification/abstract/_successors.c) with the machine's C compiler
	$(BIN)/pip install --quiet -e '.[render,plot,dev]'
	# SGLang's real objects, for the tests and benchmarks that run beside it: --no-deps (the benches
	# load only its allocator's module file; tests/adapters/sglang imports its pools, cache and session)
	$(BIN)/pip install --quiet --no-deps sglang==0.5.23
	# what SGLang's radix cache, session, Req and scheduler import (pinned, small wheels), held to the
	# torch above; triton and torchvision are stubbed in slotwarden/adapters/sglang/drill/stubs.py instead
	$(BIN)/pip install --quiet -r requirements/sglang.txt -c requirements/torch.txt
	touch $(STAMP)

verify: $(STAMP)
	$(BIN)/slotwarden verify

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

# opt-in judges of verify (not in `make test`): the default run under coverage.py, and the mutation
# campaign, one shard per call (make mutation SHARD=2/4); both write to verification/reports/
SHARD ?= 1/1
$(VENV)/.mutation: $(STAMP)
	$(BIN)/pip install --quiet -e '.[mutation]'
	touch $@

# both coverage reports (per job: what the campaign selects by), then the allowlist re-anchored on the
# default one (an entry whose line moved goes to the nearest missed line of its text; an entry of a line
# verify now reaches is named, and `.venv/bin/python -m slotwarden.verification.judges.allowlist
# --drop-stale` drops it)
coverage: $(VENV)/.mutation
	$(BIN)/slotwarden verify --quick --coverage
	$(BIN)/slotwarden verify --coverage
	$(BIN)/python -m slotwarden.verification.judges.allowlist

mutation: $(VENV)/.mutation
	$(BIN)/slotwarden mutation --shard $(SHARD)

docs: $(STAMP)
	$(BIN)/slotwarden docs

# SGLang's real allocator (installed with the venv) gives the side-by-side column
bench: $(STAMP)
	$(BIN)/slotwarden bench pool --device cpu --json benchmarks/pool-cpu.json

clean:
	rm -rf $(VENV) build *.egg-info .hypothesis
	find runtime verification -name '*.so' -delete  # the C extensions built in place
