# pycgpu: see README.md. Every target installs what it needs first.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PY := .venv/bin/python
VM := tools/vm.sh run
PYTEST_VM := $(PY) -m pytest -p no:cacheprovider -ra --durations=12

.PHONY: help demo test test-host test-vm test-i915 test-debug lint checkpatch bench bench-% kernel vm-shell vm-run \
	patches setup venv clean bench-exporter mutation

help: ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

setup: ## install Debian packages (root) and the Python venv
	tools/setup-host.sh

venv: ## only the Python venv (no root needed)
	tools/setup-host.sh venv

kernel: setup ## build the patched kernel and the out-of-tree modules (incremental)
	tools/kernel.sh all

demo: kernel ## build, boot the VM and show the controller at work
	$(VM) "$(PY) tools/demo.py"

test: lint test-host test-vm test-i915 ## every test tier

test-host: venv ## host tier: pytest, no root, no VM
	$(PY) -m pytest tests/host

TESTS ?= tests/vm
test-vm: kernel ## VM tier: pytest as root inside the VM (TESTS='tests/vm/test_memory.py' for a part)
	$(VM) "$(PYTEST_VM) -m 'not debug and not i915' $(TESTS)"

test-i915: kernel ## i915's mock selftests in the VM: the gpucg group, and the stock suite against its baseline
	$(VM) "$(PYTEST_VM) tests/vm/test_i915.py"

test-debug: setup ## VM tier plus fuzz, stress and fault injection on the debug kernel (KASAN, kmemleak, ...)
	PYCGPU_FLAVOUR=debug tools/kernel.sh all
	PYCGPU_FLAVOUR=debug PYCGPU_VM_TIMEOUT=5400 $(VM) "$(PYTEST_VM) -m 'not i915' $(TESTS)"

lint: venv ## ruff and mypy --strict on the Python code
	.venv/bin/ruff check pycgpu tests tools bench setup.py
	.venv/bin/mypy --strict pycgpu

mutation: venv ## mutation score of the monitoring layer's tests (mutmut, host only, about 30 minutes)
	.venv/bin/pip install -q -e '.[test,k8s,mutation]'
	$(PY) tools/mutation.py

checkpatch: setup ## scripts/checkpatch.pl --strict on the series
	tools/kernel.sh checkpatch

bench: kernel ## every benchmark, in the VM; results in bench/results/
	$(VM) "$(PY) bench/run.py"

bench-exporter: venv ## the exporter's scrape cost on a generated 2,000-container tree, on the host
	$(PY) bench/exporter.py

bench-%: kernel ## one benchmark: make bench-memory, bench-cli
	$(VM) "$(PY) bench/run.py $*"

vm-shell: kernel ## an interactive root shell in the VM
	tools/vm.sh shell

vm-run: kernel ## one command as root in the VM: make vm-run CMD='cat /proc/cgroups'
	@test -n "$(CMD)" || { echo "usage: make vm-run CMD='...'" >&2; exit 2; }
	$(VM) "$(CMD)"

patches: setup ## export the series as git format-patch files into out/patches/
	tools/kernel.sh export out/patches

clean: ## remove the venv, out/ and mutants/ (the kernel cache stays: tools/kernel.sh)
	rm -rf .venv out mutants
