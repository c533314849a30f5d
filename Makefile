# Two commands do everything: `make demo` and `make test`. Each installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: demo test test-long bench clean

$(BIN)/.installed: pyproject.toml bin/journal
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# compat: a plain path in a .pth file; the default editable finder adds ~15 ms to every start
	$(BIN)/pip install -q -e '.[test]' --config-settings editable_mode=compat
	touch $@

demo: $(BIN)/.installed
	$(BIN)/journal demo

# pytest exits 5 when it collects no tests; that is a failure here. Two workers (pytest-xdist),
# each taking whole test files. `test` runs the tests marked long at their short size (or
# skips them); `test-long` at full size.
test: $(BIN)/.installed
	bash tools/test-deps.sh
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests collected: failing"; exit 1; fi; exit $$rc

test-long:
	$(MAKE) test PYTEST_ARGS=--long

bench: $(BIN)/.installed
	$(BIN)/python tools/bench.py

clean:
	rm -rf $(VENV) build *.egg-info
