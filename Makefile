# All or Nothing — every target does its own set-up through `setup`.
# `make book` builds and opens the course; `make test` runs every test.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HOST   ?= 127.0.0.1
PORT   ?= 8000
JB_FLAGS := -W -n --keep-going

.PHONY: setup setup-k8s setup-slurm book book-student site-test student-template test test-fast test-topic test-real lab serve labs bench clean help

help:
	@echo "make book    build the executed website into _build/html (the main job)"
	@echo "make test    run every test (unit, property, notebooks, book, real system where permitted)"
	@echo "make test-fast   the two-minute loop (no chapter executed, no lab graded, no real system)"
	@echo "make test-topic T=oom   one chapter's module tests, page, lab and solution"
	@echo "make test-real S=kube   the tests on one real system (kube, slurm, kernel, container, mpi, hub)"
	@echo "make lab     open JupyterLab on the course"
	@echo "make serve   serve _build/html on http://$(HOST):$(PORT)/"
	@echo "make site-test  open every page of both editions in headless Chromium (screenshots: _build/screenshots)"
	@echo "make labs    regenerate labs/ from solutions/"
	@echo "make setup-k8s  build the pinned Kubernetes, etcd and Kueue once (Go; courselib kube up runs them)"
	@echo "make setup-slurm  build the pinned Slurm once: Debian's packages in their own root (root, mmdebstrap)"
	@echo "make bench   run the benchmarks: a table of ratios, also in _build/bench/results.json"
	@echo "make clean   remove builds and caches (keeps .venv)"

# Create .venv and install courselib with its pinned-range dependencies; quick when done. The packages
# are installed by uv (a PyPI package, into .venv): about half pip's time (paired on 2 cores, 2026-12-05,
# no cache: 54 s median wall against pip's 101 s, 61 against 88 CPU s), compiled to bytecode as pip does.
# pip's index settings in the environment are passed on (uv reads its own UV_* names); pip installs
# everything if uv fails.
UV := uv>=0.13.8,<0.14
UV_ENV := $(if $(PIP_INDEX_URL),UV_INDEX_URL='$(PIP_INDEX_URL)') \
          $(if $(PIP_EXTRA_INDEX_URL),UV_EXTRA_INDEX_URL='$(PIP_EXTRA_INDEX_URL)') \
          $(if $(PIP_FIND_LINKS),UV_FIND_LINKS='$(PIP_FIND_LINKS)')
setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found %s); set PYTHON=python3.X" % sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "make: could not create .venv with '$(PYTHON) -m venv'; on Debian/Ubuntu install it with: apt-get install python3-venv"; exit 1; }
	$(BIN)/python -m pip install --quiet '$(UV)'
	$(UV_ENV) $(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode -e '.[dev]' || { \
	  echo "make: uv could not install the packages; trying pip"; \
	  $(BIN)/python -m pip install --quiet --upgrade pip && $(BIN)/python -m pip install --quiet -e '.[dev]'; }
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (courselib)" >/dev/null
	@touch $(STAMP)

# The real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager)
# from the Go modules pinned in k8s/, built once per version into ~/.cache/allornothing (needs Go
# 1.26 and the Go module proxy; about 10 minutes on 2 cores the first time, instant after).
setup-k8s:
	k8s/build.sh

# The real Slurm (courselib slurm up): Debian's packages of the release pinned in
# src/courselib/data/versions.toml, in a root of their own made by Debian's mmdebstrap, once per
# version into ~/.cache/allornothing/slurm-<version>/root (root; about 175 MB, 20 s; instant after).
setup-slurm:
	.ci/build.d/20-slurm.sh

book: setup
	$(BIN)/jupyter-book build . --path-output . $(JB_FLAGS)
	@echo
	@echo "The course is built. Open: file://$(CURDIR)/_build/html/index.html   (or: make serve)"

# The student edition: solutions to exercises hidden.
book-student: setup
	sed 's/hide_solutions: false/hide_solutions: true/' _config.yml > .config_student.yml
	$(BIN)/jupyter-book build . --path-output _build/student --config .config_student.yml $(JB_FLAGS)
	@rm -f .config_student.yml
	@echo "The student edition (no solutions) is built. Open: file://$(CURDIR)/_build/student/_build/html/index.html"

# The repository students receive: the committed course without solutions/ (book/instructors.md).
student-template:
	rm -rf _build/student-template && mkdir -p _build/student-template
	git archive --format=tar HEAD -- . ':(exclude)solutions' | tar -x -C _build/student-template
	@echo "The student template (no solutions/) is in _build/student-template: make it a new repository."

# The website as a reader meets it: every page of the built editions in headless Chromium (Debian's
# chromium), desktop and phone width; screenshots and timings in _build/screenshots/.
site-test: book book-student
	COURSE_SITE_HTML=_build/html COURSE_STUDENT_HTML=_build/student/_build/html \
	  $(BIN)/python -m pytest tests/test_site.py -q

# Unit, property, CLI, book-execution, site and real-system tests, then every solution notebook under
# nbval (lax: cells must run; outputs marked NBVAL_CHECK_OUTPUT must match). Each page is executed once
# per run (tests/book_exec.py: the page test and the site's builds share one execution cache); the
# playgrounds are pages, so nbval does not run them again (none marks an output for it to check).
# Six pytest processes at once (tests/lanes.py): two control planes' tests (without and with Kueue)
# and the Slurm and hub tests (mostly waiting on their daemons), the fast tier, the labs and the rest
# (mostly computing); LANES=1 runs the one process of old. Compiled modules are kept (__pycache__, git-
# ignored) even where PYTHONDONTWRITEBYTECODE is set, as in test-fast: each lane's pytest collects every
# test module, and without the cache each compiled the course and rewrote every test's asserts again
# (collecting tests/: 10.3-11.3 CPU s without it, 5.5-5.7 with it); the kernel lane, run first, writes it.
LANES ?= 6
test: setup
	@if command -v go >/dev/null 2>&1; then k8s/build.sh; \
	  else echo "make: Go not found: the tests on a real Kubernetes control plane will be skipped (make setup-k8s builds it)"; fi
	PYTHONDONTWRITEBYTECODE= $(BIN)/python tests/lanes.py $(if $(filter 1,$(LANES)),--serial)

# The two-minute loop: no chapter executed, no lab graded, no site, no real system, a tenth of each
# property test's examples (tests/tiers.py says which test is in which tier; tests/budget.py the budgets).
# Two pytest-xdist workers (FAST_WORKERS): with 2,202 tests the loop is past what one process does in two
# minutes. Paired on 2 cores (2 pairs, 2026-12-04 20:02-20:12 UTC, other tests alongside): 112 s median wall
# on two workers against 161 s in one process (0.69; 1.17x the CPU, each worker collects the suite). At 67 s
# (an earlier, smaller loop) one process was faster than two workers' 75 s. FAST_WORKERS=0: one process.
# The workers steal queued tests from each other (--dist worksteal): the loop's longest tests (3-5 s) no longer
# wait behind a fixed share at the end. Paired from a fresh clone (14:22-14:25 UTC, 2026-12-05, under the lock):
# 97.3 s wall with xdist's default (load) against 90.7 s; another pair an hour earlier, 130.8 s against 124.1 s.
# No nbval (it collects no notebook here, and its import would build jsonschema's iri parsers: conftest.py).
# The loop keeps its compiled modules (__pycache__, git-ignored) even where PYTHONDONTWRITEBYTECODE is set:
# otherwise every run compiles courselib and rewrites every test module's asserts again (~5 s of CPU).
FAST := not (book or site or lab or real or scale or slow)
FAST_WORKERS ?= 2
test-fast: setup
	PYTHONDONTWRITEBYTECODE= COURSE_TEST_BUDGET=dev $(BIN)/python -m pytest tests -q -p no:nbval -m "$(FAST)" -n $(FAST_WORKERS) --dist worksteal --durations=10

# One topic: a chapter's module tests, its page, its lab and its solution (T=oom, T=gang, T=03, ...).
test-topic: setup
	@test -n "$(T)" || { echo "make: name a topic, e.g. make test-topic T=oom (tests/tiers.py lists them)"; exit 2; }
	$(BIN)/python -m pytest tests $(wildcard solutions) --nbval-lax --nbval-current-env -q \
	  --topic "$(T)" -m "not (site or real)" --durations=10

# One real system: S=kube, slurm, kernel, container or mpi (skipped with the reason where it cannot run).
test-real: setup
	@test -n "$(S)" || { echo "make: name a system, e.g. make test-real S=kube (kube, slurm, kernel, container, mpi, hub)"; exit 2; }
	$(BIN)/python -m pytest tests -q -m "real_$(S)" --durations=20

# As root (a container, CI) Jupyter refuses to start unless told it may. .venv/bin goes first on the PATH of
# JupyterLab's terminals (and kernels), so a student types `courselib grade ...` there as on Binder
# (courselib.course.GRADE_OWN).
lab: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/jupyter lab --notebook-dir=$(CURDIR) $(if $(filter 0,$(shell id -u)),--allow-root)

serve:
	@test -f _build/html/index.html || $(MAKE) book
	@echo "Serving http://$(HOST):$(PORT)/  (Ctrl-C to stop)"
	$(PYTHON) -m http.server --bind $(HOST) --directory _build/html $(PORT)

labs: setup
	$(BIN)/courselib labs build

# Benchmarks print ratios measured side by side in one run (never timed tests).
bench: setup
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf _build .pytest_cache .hypothesis
	find . -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true
