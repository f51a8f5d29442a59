#!/usr/bin/env bash
# A diskless primary (node2) takes its targets for a write, one storage
# node (node1) is away, and before it decides on the new generation
# that write starts, node1's hello comes in, in the generation before.
# node1 must not be a target of the writes that follow: it never heard
# of the new generation (AWAY goes to the targets of the write that
# starts it) and lacks that first write.  Read from it, it would serve
# stale data.
#
# Made deterministic: node2 waits 3 s between taking the targets of a
# write with a node away and the generation decision
# (NBDREPL_TEST_DISKLESS_TARGETS_DELAY_MS, server/diskless.c), and node1
# returns in that window.  node0 and node1 never reach each other
# (tests/fault-inject.c: FAULT_CONNECT_REFUSE_PORT), so that node0
# neither forwards the write to node1 nor resyncs it: the only copy of
# the new block is node0's.  Reads prefer node1 (read-balancing).
source "$(dirname "$0")/functions.sh"
requires jq --version
requires test -f "$FAULT_INJECT"

make_diskless_config 16M
sed -i 's/^protocol: C/&\nread-balancing: prefer-node1/' "$CONFIG"
port_of () { awk -v n="$1" '$2 == "name:" && $3 == n { f = 1 } f && $1 == "address:" { split ($2, a, ":"); print a[2]; exit }' "$CONFIG"; }
p0=$(port_of node0); p1=$(port_of node1)
[ -n "$p0" ] && [ -n "$p1" ] || fail "no replication ports in $CONFIG"

FAULT_CONNECT_REFUSE_PORT=$p1 LD_PRELOAD="$FAULT_INJECT" start_node node0
FAULT_CONNECT_REFUSE_PORT=$p0 LD_PRELOAD="$FAULT_INJECT" start_node node1
NBDREPL_TEST_DISKLESS_TARGETS_DELAY_MS=3000 start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
status_json node0 | jq -e '[.peers[] | select(.name == "node1") | .connection != "Connected"] | all' >/dev/null ||
    fail "node0 reached node1: the partition between them did not hold"

# Block 0 holds A on both (nobody is away: no delay).
block () { head -c 4096 /dev/zero | tr '\0' "$1"; }
block A >"$tmpdir/A"; block B >"$tmpdir/B"
timed 30 nbdcopy "$tmpdir/A" "$(uri node2)" || fail "writing A failed"
wait_for node2 '.role == "Secondary"' 20

# node1 goes; nobody writes, so no new generation yet.
kill_node node1
wait_for node2 '[.peers[] | select(.name == "node1") | .connection != "Connected"] | all' 20

# B is written with node1 away: its targets are taken (node0 only),
# then node2 waits 3 s, and node1 comes back meanwhile.
nbdsh -u "$(uri node2)" -c "h.pwrite(open('$tmpdir/B', 'rb').read(), 0)" \
    >"$tmpdir/w.out" 2>&1 &
w=$!
cleanup_fn "kill $w 2>/dev/null || true"
for (( i = 0; i < 200; i++ )); do
    [ "$(grep -c 'auto-promoted by a client' "$tmpdir/node2.log")" -ge 2 ] && break
    sleep 0.1
done
[ "$(grep -c 'auto-promoted by a client' "$tmpdir/node2.log")" -ge 2 ] ||
    fail "node2 was not promoted for the write of B within 20 s"
FAULT_CONNECT_REFUSE_PORT=$p0 LD_PRELOAD="$FAULT_INJECT" start_node node1
wait_for node2 '[.peers[] | select(.name == "node1") | .connection == "Connected" and .disk == "UpToDate"] | all' 20
kill -0 $w 2>/dev/null ||
    fail "the write ended before node1 was back: the race was not constructed"
wait $w || fail "writing B failed: $(cat "$tmpdir/w.out")"
grep -q "first write with storage nodes away (mask 0x2)" "$tmpdir/node2.log" ||
    fail "the write of B started no generation with node1 away"
info "B written with node1 away; node1's hello came in between its targets and the new generation"

# Read block 0 back through node2, which prefers node1: every read
# must be B (node1 still holds A and is no target).
for (( i = 0; i < 5; i++ )); do
    rm -f "$tmpdir/back"
    nbdsh -u "$(uri node2)" -c "open('$tmpdir/back', 'wb').write(h.pread(4096, 0))" ||
        fail "reading block 0 failed"
    cmp -s "$tmpdir/B" "$tmpdir/back" ||
        fail "read $i of block 0 returned stale data (from node1, which missed the write of B)"
done
cmp -s "$tmpdir/A" <(head -c 4096 "$(disk node1)") ||
    fail "node1's disk holds no longer A: the test did not keep the write from it"
info "ok: five reads returned B; node1 (still holding A) served none"
