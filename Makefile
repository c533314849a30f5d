# Two commands do everything: `make demo` and `make test`. Each installs what it needs.
# `make torture` runs the long reliability suite (docs/reliability.md); `make test-long`
# runs the tests marked `long` (the long forms of the reliability tests).
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: demo test e2e test-long torture bench clean

$(BIN)/.installed: pyproject.toml bin/journal
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# a plain path in a .pth file (pyproject's package-dir): no editable finder on every start
	$(BIN)/pip install -q -e '.[test]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/journal demo

# pytest exits 5 when it collects no tests; that is a failure here. Three workers (pytest-xdist;
# many tests wait on child processes, so a third beats two on 2 cores: 172 s against 181-188),
# each taking whole test files. `test` runs the tests marked long at their short size (or
# skips them); `test-long` at full size.
test: $(BIN)/.installed
	bash tools/test-deps.sh
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 3 --dist loadfile $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests collected: failing"; exit 1; fi; exit $$rc

# The real agent CLIs (Codex, Claude Code, opencode, Gemini CLI, Hermes), installed from
# the npm registry and PyPI into $(E2E_CACHE), each run under `journal supervise` against
# tests/e2e/mockmodel.py on 127.0.0.1 (docs/harnesses.md). The first line per CLI is its
# version, or why it is skipped.
E2E_CACHE ?= $(HOME)/.cache/journal-e2e
e2e: $(BIN)/.installed
	JOURNAL_E2E_CACHE=$(E2E_CACHE) $(BIN)/python -m tests.e2e.clis
	JOURNAL_E2E=1 JOURNAL_E2E_CACHE=$(E2E_CACHE) $(BIN)/python -m pytest -q -p no:cacheprovider -n 2 \
		--dist loadfile tests/e2e $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests collected: failing"; exit 1; fi; exit $$rc

test-long:
	$(MAKE) test PYTEST_ARGS=--long

# The full reliability run whose results docs/reliability.md records: TORTURE_SEED fixes
# the seed (default: the time), TORTURE_DIR where it works and writes its JSON (default: a
# new temp directory). Every part prints one summary line; the run exits 1 on any
# violation, naming the command that replays it.
torture: $(BIN)/.installed
	@seed=$${TORTURE_SEED:-$$(date +%s)}; dir=$${TORTURE_DIR:-$$(mktemp -d -t journal-torture-XXXXXX)}; \
	echo "torture: seed $$seed, in $$dir"; \
	$(BIN)/python tools/torture.py --seed $$seed --workdir $$dir --store local --trials 500 --sweeps 1 \
		--fuzz 100000 --damage --lineage 200 --json $$dir/local.json && \
	$(BIN)/python tools/torture.py --seed $$seed --workdir $$dir --store hfsim --trials 200 --sweeps 1 \
		--json $$dir/hfsim.json && \
	$(BIN)/python -m pytest -q -p no:cacheprovider --long tests/test_model_based.py

bench: $(BIN)/.installed
	$(BIN)/python tools/bench.py

clean:
	rm -rf $(VENV) build *.egg-info
