# kernellab: `make tour` and `make test` each set themselves up on a fresh machine.
VENV       ?= .venv
PYTHON     ?= python3
PY         := $(VENV)/bin/python
KL         := $(VENV)/bin/kernellab
STAMP      := $(VENV)/.kernellab-installed
# The tests run in Numba's simulator unless told otherwise (KERNELLAB_DEVICE=auto|gpu), one
# pytest-xdist worker per core there (`-n auto`); on a GPU in one process (kernellab's plugin).
# TEST_DEVICE=auto (CI's route, .ci/run) runs pytest with no KERNELLAB_* variable set, as
# `pytest` in a fresh clone does: the suite must not depend on its launcher.
TEST_DEVICE ?= sim
ifeq ($(TEST_DEVICE),auto)
PYTEST_ENV := env -u KERNELLAB_DEVICE -u KERNELLAB_TARGET -u KERNELLAB_SEED -u KERNELLAB_LABS_DIR -u KERNELLAB_GRADING
else
PYTEST_ENV := KERNELLAB_DEVICE=$(TEST_DEVICE)
endif

.PHONY: install tour test check notebooks mutants mutation browser-test network-test clean

install: $(STAMP)

# The cu13 route and the tested versions (constraints.txt); `make install CUDA=cu12` for older drivers.
CUDA       ?= cu13
$(STAMP): pyproject.toml constraints.txt
	@# bubblewrap lets the grader show student code only its own workspace (README: grading);
	@# installed where the machine allows (Debian's package, as root), else the grader says which
	@# weaker protection it uses
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && { apt-get update -qq && apt-get install -y -qq bubblewrap; } >/dev/null 2>&1; } \
	  || echo "kernellab: bubblewrap is not installed; grades use a weaker protection"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[$(CUDA)]"
	touch $(STAMP)

tour: install
	$(KL) tour

test: install
	# the graded tests run once, in `kernellab check`'s grader; pytest runs the rest
	$(PYTEST_ENV) $(PY) -m pytest --target solutions -q -n auto --ignore=tests/instruments/browser -m "not points"
	KERNELLAB_DEVICE=$(TEST_DEVICE) $(KL) check
	KERNELLAB_DEVICE=$(TEST_DEVICE) $(PY) -m kernellab.course.notebooks --check-clean --execute

check: install
	KERNELLAB_DEVICE=$(TEST_DEVICE) $(KL) check

notebooks: install
	KERNELLAB_DEVICE=$(TEST_DEVICE) $(PY) -m kernellab.course.notebooks --check-clean --execute

# Instructors: every planted bug in tests/mutants/ must be caught (minutes; not part of `make test`).
mutants: install
	KERNELLAB_DEVICE=$(TEST_DEVICE) $(KL) mutants

# Instructors: cosmic-ray mutates the stubs' solutions and every mutant must lose points, or be
# recorded as equivalent (tests/mutants/equivalent.py); a report per lab in docs/mutation/. Hours on
# two cores: LABS="00 08" and JOBS=16 (one per core) narrow and widen it.
mutation: install
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt "cosmic-ray==8.7.0"
	$(PY) -m kernellab.grading.mutation $(LABS) --shards $${SHARDS:-4} --jobs $${JOBS:-2}

# Tests that ask PyPI (the cu12 install route resolves); not part of `make test`.
network-test: install
	KERNELLAB_NETWORK_TESTS=1 $(PY) -m pytest tests/instruments/test_packaging.py -q

# Notebook 06 in a real browser (~90 s, so not in `make test`): JupyterLab headless on 127.0.0.1,
# Debian's Chromium driven by playwright; installs both where missing (apt needs root).
browser-test: install
	$(PY) -m pip install --quiet --disable-pip-version-check "playwright==1.65.*"
	test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium; }
	KERNELLAB_DEVICE=sim $(PY) -m pytest tests/instruments/browser -q -s

clean:
	rm -rf $(VENV) .kernellab figures results.json build
