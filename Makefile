# Entry points. `make run` and `make test` work on a fresh machine: they create
# the virtual environment, install the pinned dependencies and build the stubs.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= test,ko,ja
STAMP  := $(VENV)/.installed
PROTOS := $(wildcard protos/champollion/eval/v1/*.proto)
STUBS  := champollion/eval/v1/gateway_pb2.py

EXAMPLE ?= examples/eng-spa

.PHONY: install proto run test bench clean

install: $(STAMP) $(STUBS)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	$(BIN)/pip install --quiet -e ".[$(EXTRAS)]"
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
	$(BIN)/champollion evaluate $(EXAMPLE)/corpus.json $(EXAMPLE)/predictions.jsonl \
		--meta $(EXAMPLE)/meta.json --glossary $(EXAMPLE)/glossary.json

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python bench/surface_overhead.py
	$(BIN)/python bench/bootstrap.py

clean:
	rm -rf $(VENV) champollion/eval build *.egg-info
