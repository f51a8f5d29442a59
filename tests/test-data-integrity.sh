#!/usr/bin/env bash
# data-integrity: crc32c.  The primary's sendmsg is made to flip one
# byte of a data payload on its way (fault-inject: a bit error that
# TCP's checksum missed).  The secondary finds the digest wrong, drops
# the message and the connection; the primary marks the range out of
# sync and resyncs it; the disks end identical.  Without data-integrity
# the same fault silently leaves the replicas different, which is what
# the option is for.
source "$(dirname "$0")/functions.sh"
requires jq --version

run ()          # run on|off: returns 0 if the disks ended identical
{
    local mode=$1
    make_config 2 C 32M
    [ "$mode" = on ] && sed -i 's/^protocol: C/&\ndata-integrity: crc32c/' "$CONFIG"
    rm -f "$tmpdir"/node*.log
    LD_PRELOAD="$FAULT_INJECT" FAULT_SENDMSG_CORRUPT=3 start_node node0 role=primary
    start_node node1
    wait_uptodate node0 30
    head -c 32M /dev/urandom > "$tmpdir/data"
    timed 60 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "$mode: nbdcopy failed"
    wait_uptodate node0 30
    cmp -s "$(disk node0)" "$tmpdir/data" || fail "$mode: the primary's disk differs from the data"
    local rc=0
    cmp -s "$(disk node0)" "$(disk node1)" || rc=1
    stop_node node1
    stop_node node0
    return $rc
}

run on || fail "with data-integrity the disks differ"
grep -q "data-integrity: crc32c mismatch in WRITE" "$tmpdir/node1.log" ||
    fail "node1 did not report the corrupted message: $(grep -i crc "$tmpdir/node1.log")"
info "on: $(grep -o 'data-integrity: crc32c mismatch.*' "$tmpdir/node1.log" | head -n 1)"
grep -q "resync finished" "$tmpdir/node0.log" || fail "no resync after the corrupted message"
info "on: the range was resynced; disks identical"

# nbdcopy writes every chunk once, so nothing overwrites the damaged one.
if run off; then
    fail "off: the replicas are identical: the fault did not fire, so the 'on' half proves nothing"
fi
if grep -q "crc32c mismatch" "$tmpdir/node1.log"; then
    fail "off: node1 checked digests without data-integrity"
fi
info "ok: off: the same fault left the replicas different, undetected"
