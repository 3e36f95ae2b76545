# The README's two commands: `make serve` and `make test`. Both bootstrap .venv on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test lint bench clean browser postgres prometheus

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

serve: $(STAMP)
	GITMEM_HOME=$${GITMEM_HOME:-./.gitmem} $(BIN)/gitmem serve

# The whole suite, slow tests included. A test module stays on one worker (its module fixtures are
# built once), the longest modules first (tests/conftest.py). One worker more than cores: a worker waits
# a quarter to a third of its time (Git, servers, subprocesses, sleeps), and the extra one fills the gaps.
# `pytest -m "not slow"` skips real servers and SIGKILLs while developing. Bytecode is cached under .venv
# even where PYTHONDONTWRITEBYTECODE is set: a run starts hundreds of Python processes (Git's hooks and
# filters, servers, workers) that would otherwise each compile gitmem again (and pytest rewrite its plugins).
WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
PYCACHE := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache
# The tests' temporary folders go to memory (/dev/shm where it has 2 GiB free; a run needs about
# 400 MB), open to all as /tmp is (PostgreSQL runs as its own user), removed when the run ends or is
# stopped (sh runs an EXIT trap only on a normal exit, hence the signals). The suite makes and deletes
# tens of thousands of files, which on a disk costs CPU the tests do not test: on ext4 without a
# journal (this project's machines) each new file's inode search skips every inode deleted in the last
# 30 s. 147-152 s on disk, 131-139 s in memory, here.
TEST_TMP_ROOT ?= $(shell [ "$$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $$4}')" -gt 2097152 ] 2>/dev/null && echo /dev/shm || echo $${TMPDIR:-/tmp})
test: $(STAMP)
	$(BIN)/ruff format --check gitmem api tests bench tools
	$(BIN)/ruff check gitmem api hooks tests bench tools
	$(BIN)/python -m tools.typecheck  # mypy over the package as it installs (api/ as gitmem.api)
	$(BIN)/python -m tools.importcheck  # the layers and no cycles (pyproject.toml)
	$(BIN)/python -m tools.sizecheck  # 15 modules a folder, 400 lines a module, 60 a function
	$(BIN)/python -m tools.docscheck  # cog --check: README.md and docs/*.md show real output (a page only if it or the code changed)
	tmp=$$(mktemp -d -p $(TEST_TMP_ROOT) gitmem-tests.XXXXXX) && chmod 1777 "$$tmp" && trap 'rm -rf "$$tmp"' EXIT HUP INT TERM && \
	TMPDIR=$$tmp $(PYCACHE) $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder

lint: $(STAMP)
	$(BIN)/ruff format --check gitmem api tests bench tools docs
	$(BIN)/ruff check gitmem api hooks tests bench tools docs
	$(BIN)/python -m tools.importcheck
	$(BIN)/python -m tools.sizecheck
	$(BIN)/python -m tools.typecheck
	$(BIN)/python -m tools.docscheck  # the pages' CLI examples are real output (refresh: python -m tools.docscheck --refresh)

# The browser tests (tests/system/test_ui_browser.py) drive Debian's chromium with Playwright; CI installs it
# here (as root) so `make test` itself stays quick. Without it those tests skip and say why.
browser:
	@if [ -x /usr/bin/chromium ]; then echo "chromium: /usr/bin/chromium"; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	else echo "chromium is missing and we are not root: the browser tests will skip"; fi

# The PostgreSQL tests (tests/postgres.py) start a throwaway server from Debian's initdb and pg_ctl; CI
# installs them here (as root). Without them those tests skip and say why.
postgres:
	@found=$$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | tail -1); \
	if [ -n "$$found" ]; then echo "initdb: $$found"; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; \
	else echo "PostgreSQL is missing and we are not root: the PostgreSQL tests will skip"; fi

# The metrics test (a real Prometheus scraping a real server) runs Debian's prometheus; CI installs it
# here (as root), without starting the packaged service. Without it that test skips and says why.
prometheus:
	@if command -v prometheus >/dev/null; then echo "prometheus: $$(command -v prometheus)"; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; \
	else echo "prometheus is missing and we are not root: the Prometheus test will skip"; fi

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
