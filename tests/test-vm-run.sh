#!/usr/bin/env bash
# tests/vm/vm-run, the guest runner: a command's exit status and output
# come back from the guest, which runs the guest kernel (not the
# host's) in the same directory with the build tree visible.
source "$(dirname "$0")/functions.sh"
VMRUN="$(cd "$(dirname "$0")" && pwd)/vm/vm-run"
kver=$("$VMRUN" --can-run 2>"$tmpdir/why") ||
    { echo "$test_name: SKIP: $(cat "$tmpdir/why")"; exit 77; }
if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
    echo "$test_name: SKIP: the guest tests run in the plain build only"
    exit 77
fi

# Exit status 3 and the output, from one boot.
status=0
VM_TIMEOUT=300 "$VMRUN" bash -c 'echo "guest: $(uname -r) $PWD VM_GUEST=$VM_GUEST"; test -x "$1" && echo "plugin: visible"; exit 3' \
    vm "$PLUGIN" > "$tmpdir/out" 2>"$tmpdir/err" || status=$?
cat "$tmpdir/out" "$tmpdir/err"
[ $status -eq 3 ] || fail "exit 3 in the guest gave $status"
grep -qx "guest: $kver $PWD VM_GUEST=1" "$tmpdir/out" ||
    fail "the guest's output is not what it printed (kernel $kver, directory $PWD)"
grep -qx "plugin: visible" "$tmpdir/out" || fail "the build tree is not visible in the guest"
[ "$(uname -r)" = "$kver" ] || info "host kernel $(uname -r), guest kernel $kver"

# true: 0.
VM_TIMEOUT=300 "$VMRUN" true || fail "true in the guest gave $?"
info "ok"
