# socai — two commands: `make run` (the main job) and `make test` (everything CI checks).
# Each creates .venv and installs what it needs on first use; later runs skip the install
# unless pyproject.toml or constraints.txt changed.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
STAMP_RUN  := $(VENV)/.installed-run
STAMP_DEV  := $(VENV)/.installed-dev
PYTEST_ARGS ?=
PYTEST_WORKERS ?= 3

.PHONY: run up test test-heavy test-fast lint docs typecheck contract proto proto-check bench chaos nemesis soak golden golden-record lock install install-dev native core clean clean-var

run: $(STAMP_RUN) core       ## bring up the whole stack, play, settle and audit hands, print a summary
	$(BIN)/socai demo

up: $(STAMP_RUN) core        ## keep the stack serving in the foreground (Ctrl-C stops it)
	$(BIN)/socai up

# The tests in two runs (docs/inside/testing.md). First every test but the serial group on
# three xdist workers (each with its own NATS and PostgreSQL): the CPU-bound unit tests fill
# the cores while the integration and end-to-end tests wait on servers, timers and child
# processes. The worksteal scheduler lets an idle worker take half of a busy one's queue, and
# each worker's first block starts with its share of the tests marked slow
# (tests/support/schedule.py), so the run does not end on one worker with the longest ones.
# Then the serial group (tests marked fault or serial: they kill or pause processes under
# load, or need the CPU on time) alone, one test at a time.
# Bytecode is cached (__pycache__/, git-ignored) even where the environment says not to
# write it (PYTHONDONTWRITEBYTECODE): otherwise every pytest process rewrites the asserts of
# every test module again (about 7 of the 12 s each collection takes) and every service
# process compiles the code it imports. (Not PYTHONPYCACHEPREFIX: under it the bytecode pip
# compiled for the dependencies would be ignored and compiled again.)
TEST_ENV := env -u PYTHONDONTWRITEBYTECODE

# make test runs on the compiled core where make core could build it (docs/inside/native.md).
# The suites marked heavy (half a minute or more each: the RPC fuzz, the 100,000 and 10,000-hand
# rules properties, the short nemesis, back-in-time, the demo, socai up and restore, the
# differential test of the two cores) run in test-heavy, the same two ways, then the core's
# suites (the rules, cards, money, fairness, the codec, the replay, settlement's and the
# auditor's units and the golden corpus) once more on the interpreted core (SOCAI_CORE);
# CI (.ci/run) runs make test, then make test-heavy.
CORE_TESTS := tests/unit/rules tests/unit/test_cards.py tests/unit/test_money.py tests/unit/test_pots.py \
	tests/unit/test_ranking.py tests/unit/test_fairness.py tests/unit/test_rules_contract.py \
	tests/unit/test_rules_purity.py tests/unit/test_accounts.py tests/unit/test_autoplay.py \
	tests/unit/test_hidden_cards.py tests/unit/test_codec.py tests/unit/test_fast_records.py \
	tests/unit/settlement tests/unit/audit tests/golden
test: $(STAMP_DEV) core lint docs ## linters, the docs, then every test suite on real NATS and PostgreSQL but the heavy ones
	$(TEST_ENV) $(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal --serial-group=exclude -m "not heavy" $(PYTEST_ARGS)
	$(TEST_ENV) $(BIN)/pytest --serial-group=only -m "not heavy" $(PYTEST_ARGS)

test-heavy: native           ## the suites marked heavy, then the core's suites on the interpreted core (CI runs it after make test)
	$(TEST_ENV) $(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal --serial-group=exclude -m heavy $(PYTEST_ARGS)
	$(TEST_ENV) $(BIN)/pytest --serial-group=only -m heavy $(PYTEST_ARGS)
	$(TEST_ENV) SOCAI_CORE=interpreted $(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal -m "not heavy" $(CORE_TESTS) $(PYTEST_ARGS)

# The documentation site (mkdocs.yml): --strict, so a broken link or a page left out of the
# nav fails the build, and make test with it.
docs: $(STAMP_DEV)           ## build the docs site from docs/ into var/site (mkdocs, --strict)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The compiled core (libs/build_native.py, docs/inside/native.md): the rules and the modules
# under them compiled by mypyc beside their sources, run while they match the sources
# (socai.native; `socai --version` says which core runs). About 1.5 minutes from nothing on 2
# cores, ~20 s after an edit, nothing when the build matches. make core (run by make install,
# run, up and test) leaves the interpreted core where the machine cannot compile; make native fails.
native: $(STAMP_RUN)         ## compile the pure core with mypyc beside its sources (fails without a C compiler)
	$(BIN)/python libs/build_native.py

core: $(STAMP_RUN)
	$(BIN)/python libs/build_native.py --if-possible

test-fast: $(STAMP_DEV)      ## unit tests only
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

lint: $(STAMP_DEV)           ## ruff, the import layers, mypy on all code, buf lint and buf breaking on proto/
	$(BIN)/ruff check apps libs services tests
	$(BIN)/ruff format --check apps libs services tests
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy
	cd proto && ../$(BIN)/buf lint
	cd proto && ../$(BIN)/buf breaking --against contract.binpb

# The last landed contract (proto/contract.binpb, committed; CI may clone shallow, so not git
# history): `buf breaking` in make lint fails any change that would break a client against it.
# Record it again when a contract change lands: a deliberate break, or new fields and RPCs
# that from then on must not break either.
contract: $(STAMP_DEV)       ## record proto/ as the contract buf breaking checks against
	cd proto && ../$(BIN)/buf build -o contract.binpb

typecheck: $(STAMP_DEV)      ## mypy (strict) on apps/, libs/ and services/
	$(BIN)/mypy

proto: $(STAMP_DEV)          ## regenerate libs/socai/gen from proto/
	$(BIN)/python -m socai.infra.protogen

proto-check: $(STAMP_DEV)    ## fail when libs/socai/gen is stale against proto/
	$(BIN)/python -m socai.infra.protogen --check

install: $(STAMP_RUN) core   ## create .venv, install what `make run` needs, compile the core where it can
install-dev: $(STAMP_DEV)    ## ... and the test, lint and benchmark tools

# The rules' figures are the compiled core's (make core) with the interpreted core's as peers.
bench: $(STAMP_DEV) core     ## benchmarks -> var/bench/report.json and report.md
	$(BIN)/python -m tests.bench

CHAOS_ARGS ?=
SOAK_ARGS  ?=
NEMESIS_ARGS ?=

chaos: $(STAMP_DEV)          ## every fault in turn against real processes under bot load -> var/chaos/report.json
	$(BIN)/python -m tests.chaos $(CHAOS_ARGS)

nemesis: $(STAMP_DEV)        ## a seeded random fault schedule over 2+2 instances under bot load -> var/nemesis/report.json and report.md
	$(BIN)/python -m tests.chaos.nemesis $(NEMESIS_ARGS)

soak: $(STAMP_DEV)           ## 250 bot tables for 10 minutes -> var/soak/report.json and soak.png
	$(BIN)/python -m tests.soak $(SOAK_ARGS)

GAME  ?=
HANDS ?= 300
SEED  ?=

golden: $(STAMP_DEV)         ## replay and audit every recorded hand of tests/golden, print coverage per game
	$(BIN)/python -m tests.golden check

golden-record: $(STAMP_DEV)  ## record a new golden batch: make golden-record GAME=phom [HANDS=300] [SEED=7]
	@test -n "$(GAME)" || { echo "usage: make golden-record GAME=<game> [HANDS=300] [SEED=n]"; exit 2; }
	$(BIN)/python -m tests.golden record $(GAME) --hands $(HANDS) $(if $(SEED),--seed $(SEED))

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade "pip>=24" 

$(STAMP_RUN): $(VENV)/bin/python pyproject.toml constraints.txt
	$(PIP) install -q -c constraints.txt -e '.[native]'
	touch $@

$(STAMP_DEV): $(STAMP_RUN) pyproject.toml constraints.txt
	$(PIP) install -q -c constraints.txt -e '.[dev]'
	touch $@

lock:                        ## re-resolve every dependency into constraints.txt (from a clean venv)
	rm -rf var/lockenv && $(PYTHON) -m venv var/lockenv
	var/lockenv/bin/pip install -q --upgrade pip && var/lockenv/bin/pip install -q -e '.[dev]'
	var/lockenv/bin/pip freeze --exclude-editable | grep -v '^-e' > constraints.txt
	rm -rf var/lockenv

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
	$(PYTHON) libs/build_native.py --remove

clean-var:                   ## delete runtime data (NATS store, PostgreSQL data, reports)
	rm -rf var/*
