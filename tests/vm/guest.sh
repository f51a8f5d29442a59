# nbdrepl: sourced first (before functions.sh) by a test that runs in
# the guest of tests/vm/vm-run.  On the host it checks that a guest can
# be started (exit 77 with the reason if not) and runs the test again
# in one, as root, ending with its exit status; VM_TIMEOUT bounds it
# (default: the test's vm_timeout, or 600 s).  In the guest (VM_GUEST=1)
# it returns and the test goes on.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
if [ -z "${VM_GUEST:-}" ]; then
    _vm_test=$(basename "$0" .sh)
    _vm_run="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/vm-run"
    if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
        echo "$_vm_test: SKIP: the guest tests run in the plain build only (scripts/check runs them there)"
        exit 77
    fi
    if ! _vm_why=$("$_vm_run" --can-run 2>&1 >/dev/null); then
        echo "$_vm_test: SKIP: $_vm_why"
        exit 77
    fi
    export VM_TIMEOUT="${VM_TIMEOUT:-${vm_timeout:-600}}"
    echo "$_vm_test: running in the guest (tests/vm/vm-run, VM_TIMEOUT=$VM_TIMEOUT)"
    exec "$_vm_run" bash "$0" "$@"
fi
