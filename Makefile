# Entry points. `make run` and `make test` work on a fresh machine: they create
# the virtual environment, install the pinned dependencies and build the stubs.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= test,ko,ja,fst,behavioral,comet
STAMP  := $(VENV)/.installed
PROTOS := $(wildcard protos/champollion/eval/v1/*.proto)
STUBS  := champollion/eval/v1/gateway_pb2.py

EXAMPLE ?= examples/eng-spa
# Debian packages: the HFST and lttoolbox tools and the Apertium data the
# language cards' analyzers are built from (listed from the cards, so only once
# the venv exists: `=` expands when used), plus EXTRA_APT_PACKAGES.
FST_APT_PACKAGES = $(shell $(BIN)/python -m services.structural.analyzer_builds apt-packages)
EXTRA_APT_PACKAGES ?=
STORE_APT_PACKAGES = postgresql  # the run store's tests start a throw-away server (tests/postgres.py)
REPORT_APT_PACKAGES = chromium   # the HTML report's tests open it in headless Chromium (tests/test_report.py)
# The web front's browser tests render syllabics and Arabic (fonts-noto-core) and Han and kana (Droid Sans
# Fallback, 1.8 MB against fonts-noto-cjk's 57 MB): tests/test_web_browser.py, tests/test_review_esa_browser.py.
WEB_APT_PACKAGES = fonts-noto-core fonts-droid-fallback
NATIVE_APT_PACKAGES = g++        # builds the compiled sacreBLEU statistics and encoder products (setup.py)
ICU_APT_PACKAGES = libicu-dev pkg-config  # PyICU (the [icu] extra) builds against them
APT_PACKAGES = $(FST_APT_PACKAGES) $(STORE_APT_PACKAGES) $(REPORT_APT_PACKAGES) $(WEB_APT_PACKAGES) $(NATIVE_APT_PACKAGES) \
	$(ICU_APT_PACKAGES) $(EXTRA_APT_PACKAGES)
FST_DIR ?= build/fst
NATIVE_STAMP := build/.native
ICU_STAMP := $(VENV)/.icu
FST_STAMP := $(FST_DIR)/.built
FST_SOURCES := services/structural/build_analyzers.sh services/structural/analyzer_builds.py \
	$(wildcard language_cards/*.yaml) $(wildcard eval_standards/*/analyzer/*)

.PHONY: install proto run test bench clean system-packages fst

install: $(STAMP) $(STUBS) $(FST_STAMP) $(NATIVE_STAMP) $(ICU_STAMP)

# Installs the Debian packages that are missing (as root), or says which to install.
system-packages: $(STAMP)
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	  else \
	    echo "Missing Debian packages: $$missing"; \
	    echo "Install them as root: apt-get install -y $$missing"; exit 1; \
	  fi; \
	fi

fst: $(FST_STAMP)

# Order-only on the venv: the card listing needs it, a reinstall need not rebuild.
$(FST_STAMP): $(FST_SOURCES) | $(STAMP)
	$(MAKE) system-packages
	PYTHON=$(abspath $(BIN)/python) services/structural/build_analyzers.sh $(FST_DIR)
	touch $@

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	$(BIN)/pip install --quiet -e ".[$(EXTRAS)]"
	@# built with the package (g++ present): nothing for $(NATIVE_STAMP) to redo
	@if $(BIN)/python -c "import champollion.core.native._stats, champollion.core.native._matmul, champollion.core.native._rows" 2>/dev/null; then mkdir -p build && touch $(NATIVE_STAMP); fi
	touch $@

# The compiled modules: built with the package, rebuilt when their sources
# change or once g++ is there (pip's editable install puts the modules in place).
$(NATIVE_STAMP): setup.py champollion/core/native/stats.cpp champollion/core/native/matmul.cpp \
		champollion/core/native/rows.cpp | $(STAMP)
	$(MAKE) system-packages
	$(BIN)/pip install --quiet --no-deps -e .
	mkdir -p $(dir $@) && touch $@

# PyICU (CLDR's quotation marks for generic language cards) builds against
# Debian's libicu-dev, so it is installed once the Debian packages are.
$(ICU_STAMP): pyproject.toml | $(STAMP)
	$(MAKE) system-packages
	$(BIN)/pip install --quiet -e ".[icu]"
	touch $@

# Stubs are generated into champollion/eval/v1 (git-ignored), importable as
# champollion.eval.v1.<name>_pb2.
$(STUBS): $(PROTOS) $(STAMP)
	mkdir -p champollion/eval/v1
	touch champollion/eval/__init__.py champollion/eval/v1/__init__.py
	$(BIN)/python -m grpc_tools.protoc -I protos \
		--python_out=. --grpc_python_out=. --pyi_out=. $(PROTOS)

proto: $(STAMP)
	rm -f $(STUBS)
	$(MAKE) $(STUBS)

run: install
	@$(BIN)/champollion evaluate $(EXAMPLE)/corpus.json $(EXAMPLE)/predictions.jsonl \
		--meta $(EXAMPLE)/meta.json --glossary $(EXAMPLE)/glossary.json

test: install system-packages
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python bench/surface_overhead.py
	$(BIN)/python bench/bootstrap.py
	$(BIN)/python bench/fst_lookup.py
	$(BIN)/python bench/leaderboard.py
	$(BIN)/python bench/board_ranks.py
	$(BIN)/python bench/load.py
	$(BIN)/python bench/comet_service.py
	$(BIN)/python bench/end_to_end.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/embeddings.py
	$(BIN)/python bench/native_equality.py
	$(BIN)/python bench/paired_ar.py
	$(BIN)/python bench/all_pairs.py
	$(BIN)/python bench/multi_reference.py
	$(BIN)/python bench/cli_speed.py
	$(BIN)/python bench/mqm_ted.py

clean:
	rm -rf $(VENV) champollion/eval build *.egg-info champollion/core/native/*.so
