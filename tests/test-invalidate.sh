#!/usr/bin/env bash
# `replctl invalidate` on a secondary whose disk was damaged behind its
# back: it reconnects as a new node and the primary sends it the whole
# volume; afterwards the disks are identical.  Refused on the primary.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 32M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
head -c 32M /dev/urandom >"$tmpdir/data"
timed 60 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "nbdcopy failed"
wait_uptodate node0 30

# Damage node1's disk where no bitmap knows about it.
head -c 1M /dev/urandom |
    dd of="$(disk node1)" bs=1M seek=5 conv=notrunc status=none
cmp -s "$(disk node0)" "$(disk node1)" && fail "the damage did not take"

"$REPLCTL" -s "$(sock node0)" invalidate 2>/dev/null &&
    fail "invalidate on the primary was accepted"
out=$("$REPLCTL" -s "$(sock node1)" invalidate) || fail "invalidate failed: $out"
info "$out"
# The first connect was a full sync of a new node already; the reconnect
# after invalidate must be a second one.
full='generations: sync-source-full (rule 30'
for (( i=0; i<200; i++ )); do
    [ "$(grep -c "$full" "$tmpdir/node0.log")" -ge 2 ] && break
    sleep 0.1
done
[ "$(grep -c "$full" "$tmpdir/node0.log")" -ge 2 ] ||
    fail "no new full sync decided after invalidate: $(grep generations "$tmpdir/node0.log" | tail -n1)"
wait_uptodate node0 60
total=$(status_json node0 | jq '.peers[0].resync_total_bytes')
[ "$total" -eq $((32 << 20)) ] || fail "resync after invalidate: $total bytes, expected the whole 32M"
same_disks node0 node1
info "ok: invalidated secondary fully resynced ($total bytes)"
