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

.PHONY: venv book test chromium test-python test-notebooks test-build test-browser screenshots lab figures execute clean
# the browser tests drive this Chromium (Debian's package); `make CHROMIUM=/path/to/chrome test` for another
CHROMIUM ?= /usr/bin/chromium
export CHROMIUM

# The virtual environment: made once, refreshed only when requirements change.
$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@# byte-compiled once here, on every core (pip compiles on one): where PYTHONDONTWRITEBYTECODE is set (it is
	@# on some CI machines) nothing compiled later is kept, and every process would compile torch afresh; a few
	@# packages ship files for other Pythons that do not compile, as pip's own compile step ignores
	@$(PY) -m compileall -q -j 0 $(VENV)/lib > /dev/null 2>&1 || true
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
## and the built pages and JupyterLab checked in headless Chromium. Chromium is checked first.
test: chromium
	@$(MAKE) --no-print-directory test-python test-notebooks test-build test-browser

# Chromium before ten minutes of other tests: installed here when it can be (root with apt-get),
# otherwise one line says what to install.
chromium:
	@test -x "$(CHROMIUM)" || if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Chromium is missing: apt-get install chromium"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	    && test -x "$(CHROMIUM)" || { echo "make test: could not install Chromium (apt-get install chromium)"; exit 1; }; \
	else \
	  echo "make test needs Chromium at $(CHROMIUM): install it (sudo apt-get install chromium) or set CHROMIUM=/path/to/chromium"; \
	  exit 1; \
	fi

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

# the built book's pages (tests/browser/test_book_pages.py) and JupyterLab with jupyterlab-myst
# (tests/browser/test_lab.py), in headless Chromium
test-browser: $(STAMP) chromium
	$(PY) -m pytest -q -p no:cacheprovider tests/browser

## make screenshots: every built page whole at 1280 px (and its first screen at 390 px) in _build/screenshots/,
## for a human to look at; run after the book is built (`make test` takes only each page's first screen)
screenshots: $(STAMP) chromium
	BOOK_SCREENSHOTS=whole $(PY) -m pytest -q -p no:cacheprovider tests/browser/test_book_pages.py

## make lab: JupyterLab on the course; jupyterlab-myst renders the chapters' MyST as the book does
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
