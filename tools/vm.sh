#!/usr/bin/env bash
# Boots the test kernel with virtme-ng over the host's filesystem.
#
#   tools/vm.sh run CMD      run CMD (a shell command line) as root in the VM,
#                            in the repository; exits with CMD's status
#   tools/vm.sh shell        an interactive root shell in the VM
#   tools/vm.sh accel        print the accelerator the VM will use (kvm|tcg)
#
# A run is killed after PYCGPU_VM_TIMEOUT seconds (default 2400).
# KVM is probed once per host boot with a short timeout (nested KVM hangs at
# kernel decompression on some hosts) and TCG is used when it fails;
# PYCGPU_VM_ACCEL=kvm|tcg skips the probe. A run fails when the guest's
# kernel log shows an oops, a BUG, a WARN or a lockdep report, even if CMD
# succeeded: the log is kept in the run directory it names. Files the
# command leaves in $PYCGPU_VM_OUT/keep/ (the repository is read-only in the
# guest) are copied to out/vm/ in the repository. PYCGPU_VM_KNOWN_WARN, an
# extended regex, names WARNs of code that is not the project's that do not
# fail the run (they are counted and said). PYCGPU_VM_APPEND adds words to
# the guest's kernel command line (make test-nogpu: cgroup_disable=gpu).
set -euo pipefail
. "$(dirname "$0")/common.sh"

VNG=${VNG:-$VENV/bin/vng}
[ -x "$VNG" ] || VNG=$(command -v vng) || die "virtme-ng is missing: run tools/setup-host.sh"
[ -f "$OUT/arch/x86/boot/bzImage" ] || die "no kernel built: run tools/kernel.sh"
MEMORY=${PYCGPU_VM_MEMORY:-4G}
CPUS=${PYCGPU_VM_CPUS:-2}
PROBE_TIMEOUT=${PYCGPU_KVM_PROBE_TIMEOUT:-30}
TIMEOUT=${PYCGPU_VM_TIMEOUT:-2400}     # seconds for one run, boot included

vng_args() {
	local accel=$1
	printf '%s\n' --run "$OUT" --user root --memory "$MEMORY" --cpus "$CPUS" --cwd "$ROOT"
	[ "$accel" = tcg ] && printf '%s\n' --disable-kvm
	# lockdep and the i915 selftests are slow under TCG: no soft-lockup noise;
	# a log buffer that keeps the whole run, which the host scans for splats.
	# no5lvl: TCG's CPU offers LA57, and 6.12 decides pgtable_l5_enabled()
	# from the CPU feature bits, which identify_cpu() clears and reads back
	# at boot; an interrupt in between makes KASAN take the 5-level direct
	# map for a wild address (a false "wild-memory-access" in
	# handle_edge_irq, seen once in a debug boot). Under 4-level paging the
	# same window only makes LA57 look set for a moment, which narrows what
	# KASAN takes for wild, never widens it.
	local append="panic_on_warn=0 softlockup_panic=0 nmi_watchdog=0 log_buf_len=8M no5lvl"
	# 7.3: drm_sched's fair policy, which the cgroup order extends (the
	# guest loads drm_sched, a module there, before the command runs)
	[ "$BASE" != 7.3 ] || append+=" gpu_sched.sched_policy=2"
	# TCG and a static key flipped under a running vCPU: text_poke_bp()'s
	# int3 can outlive the patch in a translated block, and the guest dies
	# on an "Oops: int3" (once in a clean-clone run, at cpusets_enabled()
	# in get_page_from_freelist). runc and crun leave +cpuset in the root's
	# subtree_control, after which every cgroup the tests make under the
	# root and remove flips cpusets_enabled_key; nothing here uses cpusets.
	[ "$accel" != tcg ] || append+=" cgroup_disable=cpuset"
	[ -z "${PYCGPU_VM_APPEND:-}" ] || append+=" $PYCGPU_VM_APPEND"
	printf '%s\n' --append "$append"
}

accel() {
	local cache=$CACHE/vm-accel boot
	if [ -n "${PYCGPU_VM_ACCEL:-}" ]; then
		echo "$PYCGPU_VM_ACCEL"
		return
	fi
	boot=$(cat /proc/sys/kernel/random/boot_id)
	if [ -f "$cache" ] && [ "$(head -n 1 "$cache")" = "$boot" ]; then
		tail -n 1 "$cache"
		return
	fi
	local result=tcg
	if [ -w /dev/kvm ]; then
		say "probing KVM (${PROBE_TIMEOUT}s at most)"
		local -a args
		mapfile -t args < <(vng_args kvm)
		if timeout --kill-after=5 "$PROBE_TIMEOUT" "$VNG" "${args[@]}" --exec true \
			</dev/null >/dev/null 2>&1; then
			result=kvm
		fi
	fi
	say "VM accelerator: $result"
	printf '%s\n%s\n' "$boot" "$result" >"$cache"
	echo "$result"
}

# Kernel console lines, kept out of the terminal.
KERNEL_LINE='^\[ *[0-9]+\.[0-9]+\] '

# Kernel log lines that fail a run.
SPLAT='(------------\[ cut here \]------------|WARNING: .* at |BUG: |Oops|general protection fault|Kernel panic|possible recursive locking|possible circular locking|inconsistent lock state|suspicious RCU usage|INFO: task .* blocked|UBSAN:|KASAN:|list_add corruption|list_del corruption|unreferenced object)'

cmd_run() {
	[ $# -gt 0 ] || die "usage: tools/vm.sh run CMD"
	local mode run rc=0 status
	mode=$(accel)
	mkdir -p "$CACHE/vm-runs"
	run=$(mktemp -d "$CACHE/vm-runs/run.XXXXXX")
	local -a args
	mapfile -t args < <(vng_args "$mode")
	local start=$SECONDS boot
	mkdir -p "$ROOT/bench/results"
	# A guest that dies before the command starts is booted once more:
	# under TCG a CPU now and then trips over another's patching of kernel
	# text at boot (an int3 Oops in code the series does not touch). One
	# that dies twice, or once the command has run, fails the run.
	for boot in 1 2; do
		say "booting $(cat "$OUT/include/config/kernel.release") ($mode) for: $*"
		# the guest's console (kernel messages included) goes to
		# console.log; the terminal gets the command's output without
		# the kernel's lines
		set +e
		timeout --kill-after=30 "$TIMEOUT" \
			"$VNG" "${args[@]}" --verbose --rwdir "$run" --rwdir "$ROOT/bench/results" \
			--exec "PYCGPU_VM_OUT=$run PYCGPU_EXT=$EXT PYCGPU_BASE=$BASE bash $ROOT/tools/vm-guest.sh $(printf '%q' "$*")" \
			</dev/null 2>&1 | tee "$run/console.log" | grep --line-buffered -v -E "$KERNEL_LINE"
		rc=${PIPESTATUS[0]}
		set -e
		say "VM finished in $((SECONDS - start))s (exit $rc)"
		if [ "$boot" = 1 ] && [ ! -f "$run/started" ]; then
			say "the guest died before the command started; its console (kept as console.boot1.log):"
			grep -E -A12 "$SPLAT" "$run/console.log" | head -n 30 >&2 || tail -n 20 "$run/console.log" >&2
			mv "$run/console.log" "$run/console.boot1.log"
			continue
		fi
		break
	done
	if [ ! -f "$run/status" ]; then
		say "the VM did not finish the command; the end of its console:"
		grep -E -A30 "$SPLAT" "$run/console.log" | head -n 60 >&2 ||
			tail -n 40 "$run/console.log" >&2
		die "the VM did not finish the command (vng exit $rc); console log: $run/console.log"
	fi
	status=$(cat "$run/status")
	if ! grep -q '^\[ *[0-9.]*\] Linux version' "$run/dmesg"; then
		die "the guest's kernel log was not captured; run directory: $run"
	fi
	local log=$run/dmesg
	if [ -n "${PYCGPU_VM_KNOWN_WARN:-}" ]; then
		# a known WARN of code that is not ours (its "cut here" line, the
		# message a drm_WARN_ON() prints before it, and the WARNING line)
		# does not fail the run, but is said
		log=$run/dmesg.checked
		awk -v known="$PYCGPU_VM_KNOWN_WARN" '
			held != "" {
				if ($0 ~ "WARNING: .*(" known ")") { n++; held = ""; next }
				if (nheld < 2 && $0 !~ /WARNING:|cut here/) { held = held "\n" $0; nheld++; next }
				print held; held = ""
			}
			/------------\[ cut here \]------------/ { held = $0; nheld = 1; next }
			$0 ~ "WARNING: .*(" known ")" { n++; next }
			{ print }
			END { if (held != "") print held; if (n) print n > "/dev/stderr" }' \
			"$run/dmesg" >"$log" 2>"$run/known" || true
		[ -s "$run/known" ] && say "tolerated $(cat "$run/known") known WARN(s) matching: $PYCGPU_VM_KNOWN_WARN"
	fi
	if grep -Eq "$SPLAT" "$log"; then
		say "the guest kernel reported a problem (full log: $run/dmesg):"
		grep -E -A20 "$SPLAT" "$log" | head -n 60 >&2
		exit 1
	fi
	if [ -s "$run/kmemleak" ]; then
		say "kmemleak found leaks (full report: $run/kmemleak):"
		head -n 40 "$run/kmemleak" >&2
		exit 1
	fi
	if [ -d "$run/keep" ] && [ -n "$(ls -A "$run/keep")" ]; then
		mkdir -p "$ROOT/out/vm"
		cp -r "$run/keep/." "$ROOT/out/vm/"
		say "kept in out/vm/: $(ls -A "$run/keep" | tr '\n' ' ')"
	fi
	rm -rf "$run"
	exit "$status"
}

cmd_shell() {
	local -a args
	mapfile -t args < <(vng_args "$(accel)")
	exec "$VNG" "${args[@]}"
}

case "${1:-}" in
	run) shift; cmd_run "$@" ;;
	shell) cmd_shell ;;
	accel) accel ;;
	*) sed -n '2,/^set/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2 ;;
esac
