# Two commands do everything on a fresh machine: `make book` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
CHAPTERS := $(wildcard chapters/*.ipynb)
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
export PYTHONHASHSEED := 0

.PHONY: venv book test test-python test-notebooks test-build test-browser lab figures execute clean

# The virtual environment: made once, refreshed only when requirements change.
$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@# MathJax 3 from an installed package, where _config.yml's html_static_path expects it
	@mkdir -p $(VENV)/mathjax-static
	ln -sfn "$$($(PY) -c 'import mathjax, os; print(os.path.join(os.path.dirname(mathjax.__file__), "static", "mathjax", "es5"))')" $(VENV)/mathjax-static/mathjax
	@touch $(STAMP)

venv: $(STAMP)

## make book: execute changed chapters (jupyter-cache) and build the HTML into _build/html
book: $(STAMP)
	$(BIN)/jupyter-book build . --keep-going
	@echo "open _build/html/index.html"

## make test: unit tests, strict nbval on every chapter, warnings-as-errors book build,
## and the built pages checked in headless Chromium
test: test-python test-notebooks test-build test-browser

test-python: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests --ignore=tests/browser

test-notebooks: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider $(NBVAL) chapters

test-build: $(STAMP)
	@mkdir -p _build
	@# the same config with execution off (nbval just ran every notebook); paths in it are
	@# relative to its own folder
	sed -e 's/^\(  *execute_notebooks:\).*/\1 "off"/' -e 's/^\(  *offline_book:\) _ext/\1 ..\/_ext/' _config.yml > _build/_config_noexec.yml
	$(BIN)/jupyter-book build . -W -n --keep-going --config _build/_config_noexec.yml

test-browser: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests/browser

## make lab: JupyterLab on the course
lab: $(STAMP)
	$(BIN)/jupyter lab chapters

## make figures: regenerate every file in figures/ from the package
figures: $(STAMP)
	$(PY) -m playground.figures

## make execute: re-run every chapter in place so stored outputs are fresh
execute: $(STAMP)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=600 $(or $(NB),$(CHAPTERS))

clean:
	rm -rf _build .jupyter_cache
