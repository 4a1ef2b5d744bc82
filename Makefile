# pycgpu: see README.md. Every target installs what it needs first.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The kernel base: 6.12 (the LTS, default) or 7.3 (mainline); every kernel,
# VM, bench and export target follows it. `make test` runs both.
PYCGPU_BASE ?= 6.12
export PYCGPU_BASE

PY := .venv/bin/python
VM := tools/vm.sh run
PYTEST_VM := $(PY) -m pytest -p no:cacheprovider -ra --durations=12

.PHONY: help demo test test-base test-sim test-7.3-rest test-host test-vm test-i915 test-kunit test-nogpu test-debug lint checkpatch bench \
	bench-% bench-sim bench-ablation kernel check-drivers vm-shell vm-run patches setup venv clean bench-exporter mutation mutation-core

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

test: ## every test tier: lint, host, then 6.12's and 7.3's kernel tiers (7.3's kernel builds meanwhile)
	+MAKE="$(MAKE)" tools/test-kernels.sh

# The kernel tiers of one base: the drivers' compile test, then one VM boot
# that runs the VM tests, then i915's mock selftests and on 7.3 upstream's
# drm_sched KUnit suites (tests/vm/conftest.py runs those two last: they
# leave the kernel tainted). On 7.3, within CI's time, the VM tests are the
# controller, scheduling, memory (dmem), fuzz table and delegation ones; the
# rest of its VM tier is `make test-7.3-rest` (the README gives both times).
VM_CORE_TESTS := tests/vm/test_controller.py tests/vm/test_sched.py tests/vm/test_sched_clients.py \
	tests/vm/test_sched_shapes.py tests/vm/test_sched_inherit.py tests/vm/test_memory.py \
	tests/vm/test_kernel_table.py tests/vm/test_delegation.py tests/vm/test_max.py
# upstream's scenario clients WARN under TCG (test-kunit, below); xe's
# xe_rtp suite feeds rule tables without a rule on purpose, which WARNs
KUNIT_KNOWN_WARN := tests_scheduler.c:[0-9]+ at drm_sched_client_work|xe_rtp.c:[0-9]+ at rule_match_and
ifeq ($(PYCGPU_BASE),7.3)
BASE_VM_TESTS := $(VM_CORE_TESTS) tests/vm/test_i915.py tests/vm/test_kunit.py
BASE_VM_MARKS := not debug and not nogpu
BASE_VM_ENV := PYCGPU_VM_KNOWN_WARN='$(KUNIT_KNOWN_WARN)'
else
BASE_VM_TESTS := tests/vm
BASE_VM_MARKS := not debug and not nogpu and not kunit
BASE_VM_ENV :=
endif
test-base: check-drivers
	$(BASE_VM_ENV) PYCGPU_VM_TIMEOUT=$${PYCGPU_VM_TIMEOUT:-3600} \
		$(VM) "$(PYTEST_VM) -m '$(BASE_VM_MARKS)' $(BASE_VM_TESTS)"

test-sim: setup ## the virtual-time tier: the scheduling core's KUnit suite, upstream's drm_sched suites and TTM's device and pool suites on UML (7.3's tree, time-travel), no root, no emulator
	tools/sim.sh

test-7.3-rest: ## the 7.3 VM tests that make test leaves out (VRAM, runtimes, podman, Kubernetes, monitoring, CLI, no gpu controller, ...)
	$(MAKE) --no-print-directory PYCGPU_BASE=7.3 test-vm \
		TESTS="$(filter-out $(VM_CORE_TESTS),$(wildcard tests/vm/test_*.py))"
	$(MAKE) --no-print-directory PYCGPU_BASE=7.3 test-nogpu

test-host: venv ## host tier: pytest, no root, no VM
	$(PY) -m pytest tests/host

TESTS ?= tests/vm
test-vm: kernel ## VM tier: pytest as root inside the VM (TESTS='tests/vm/test_memory.py' for a part)
	$(VM) "$(PYTEST_VM) -m 'not debug and not i915 and not kunit and not nogpu' $(TESTS)"

test-i915: kernel ## i915's mock selftests in the VM: the gpucg group, and the stock suite against its baseline
	$(VM) "$(PYTEST_VM) tests/vm/test_i915.py"

# Upstream's scenario clients WARN when a synchronous cycle takes less than
# its jobs, which the mock hardware's catching up after a late timer makes
# happen under TCG (tests_scheduler.c, not the series): tolerated, and said.
test-kunit: kernel ## upstream's drm_sched KUnit suites under RR, FIFO and FAIR, and xe's, in the VM (7.3)
	@test "$(PYCGPU_BASE)" = 7.3 || { echo "test-kunit: 6.12 has no drm_sched KUnit suite (PYCGPU_BASE=7.3)" >&2; exit 2; }
	PYCGPU_VM_KNOWN_WARN='$(KUNIT_KNOWN_WARN)' $(VM) "$(PYTEST_VM) tests/vm/test_kunit.py"

test-nogpu: kernel ## 7.3 booted with cgroup_disable=gpu: GPU memory through dmem alone, pycgpu without the gpu controller
	@test "$(PYCGPU_BASE)" = 7.3 || { echo "test-nogpu: 6.12 has no dmem (PYCGPU_BASE=7.3)" >&2; exit 2; }
	PYCGPU_VM_APPEND=cgroup_disable=gpu $(VM) "PYCGPU_NOGPU=1 $(PYTEST_VM) -m nogpu tests/vm/test_nogpu.py"

# Two boots of the debug kernel, each checked for splats and leaks on its own:
# the robustness tests (fuzz, stress, fault injection), then the VM tier. On
# 7.3 under TCG every cgroup file costs about 8 ms an open, and the two in one
# boot outran a 90-minute timeout. The second boot runs whatever the first
# gave; a boot whose marks select none of TESTS (pytest's 5) fails nothing,
# but at least one must run a test.
DEBUG_VM := PYCGPU_FLAVOUR=debug PYCGPU_VM_TIMEOUT=5400 $(VM)
DEBUG_MARKS := 'debug and not i915 and not kunit' 'not debug and not i915 and not kunit'
test-debug: setup ## VM tier plus fuzz, stress and fault injection on the debug kernel (KASAN, kmemleak, ...)
	PYCGPU_FLAVOUR=debug tools/kernel.sh all
	rc=0; ran=0; for marks in $(DEBUG_MARKS); do \
		$(DEBUG_VM) "$(PYTEST_VM) -m '$$marks' $(TESTS)"; r=$$?; \
		if [ $$r = 5 ]; then continue; fi; ran=1; [ $$r = 0 ] || rc=$$r; \
	done; [ $$ran = 1 ] || { echo "test-debug: no test of $(TESTS) selected" >&2; rc=5; }; exit $$rc

lint: venv ## ruff and mypy --strict on the Python code
	.venv/bin/ruff check pycgpu tests tools bench setup.py
	.venv/bin/mypy --strict pycgpu

mutation: venv ## mutation score of the monitoring layer's tests (mutmut, host only, about 30 minutes)
	.venv/bin/pip install -q -e '.[test,k8s,mutation]'
	$(PY) tools/mutation.py

mutation-core: venv ## mutation score of the tests of knobs, cgroup, oci, hook and kubepods (mutmut, host only)
	.venv/bin/pip install -q -e '.[test,k8s,mutation]'
	nice -n 19 $(PY) tools/mutation.py --set core

check-drivers: kernel ## the converted drivers compiled at W=1: x86 ones, and arm64 ones with Debian's cross compiler
	tools/check-drivers.sh

checkpatch: setup ## scripts/checkpatch.pl --strict on both series
	PYCGPU_BASE=6.12 tools/kernel.sh checkpatch
	PYCGPU_BASE=7.3 tools/kernel.sh checkpatch

bench: kernel ## every benchmark, in the VM; results in bench/results/
	$(VM) "$(PY) bench/run.py"

bench-exporter: venv ## the exporter's scrape cost on a generated 2,000-container tree, on the host
	$(PY) bench/exporter.py

bench-sim: setup ## the scheduling figures on virtual time (UML, time-travel), no VM, no root: bench/results/sim-7.3.json
	tools/sim.sh build
	$(PY) bench/sim.py

bench-ablation: setup ## what each mechanism of the scheduling core buys, on virtual time: bench/results/ablation-7.3.json
	tools/sim.sh build 7.3
	$(PY) bench/ablation.py

bench-%: kernel ## one benchmark: make bench-memory, bench-cli
	$(VM) "$(PY) bench/run.py $*"

vm-shell: kernel ## an interactive root shell in the VM
	tools/vm.sh shell

vm-run: kernel ## one command as root in the VM: make vm-run CMD='cat /proc/cgroups'
	@test -n "$(CMD)" || { echo "usage: make vm-run CMD='...'" >&2; exit 2; }
	$(VM) "$(CMD)"

patches: setup ## export both series as git format-patch files into out/patches/BASE/
	PYCGPU_BASE=6.12 tools/kernel.sh export out/patches/6.12
	PYCGPU_BASE=7.3 tools/kernel.sh export out/patches/7.3

clean: ## remove the venv, out/ and mutants/ (the kernel cache stays: tools/kernel.sh)
	rm -rf .venv out mutants
