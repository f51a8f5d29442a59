#!/usr/bin/env bash
# scripts/failover-demo as a test: two storage nodes and a diskless
# client with ext4 and a verifying fio load; a storage node SIGKILLed
# and brought back, the other's link cut and restored.  The script fails
# on any I/O error, verify error, fsck problem or replica difference.
source "$(dirname "$0")/functions.sh"
requires fio --version
requires nbdfuse --version
requires mkfs.ext4 -V
requires jq --version
requires test -c /dev/fuse
requires test -w /dev/loop-control

NBDREPL_DEMO_PREBUILT=1 timeout 600 "$(dirname "$0")/../scripts/failover-demo" \
    >"$tmpdir/demo.out" 2>&1 ||
    { tail -n 200 "$tmpdir/demo.out"; fail "scripts/failover-demo failed"; }
grep -q "Failover demo finished" "$tmpdir/demo.out" || fail "the demo did not finish"
grep -q "err= 0" "$tmpdir/demo.out" || fail "fio's summary does not show err= 0"
info "$(grep -E '^ +clat \(usec\)' "$tmpdir/demo.out" | tail -n 1 | sed 's/^ *//')"
info "ok"
