#!/usr/bin/env bash
# A diskless client's reads (read-balancing): prefer-node1 reads from
# node1 only, and from node0 once node1 is gone; round-robin spreads
# them over both; least-pending reads correctly.  The storage nodes
# count the reads they serve ("reads" in their status).
source "$(dirname "$0")/functions.sh"
requires jq --version

make_diskless_config 32M
sed -i 's/^protocol: C/&\nread-balancing: prefer-node1/' "$CONFIG"
start_node node0
start_node node1
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
head -c 32M /dev/urandom > "$tmpdir/data"
timed 60 nbdcopy "$tmpdir/data" "$(uri node2)" || fail "writing through node2 failed"
reads () { status_json "$1" | jq .reads; }

timed 60 nbdcopy "$(uri node2)" "$tmpdir/back" || fail "reading through node2 failed"
cmp "$tmpdir/data" "$tmpdir/back" || fail "prefer-node1: the data read differs"
r0=$(reads node0); r1=$(reads node1)
[ "$r0" -eq 0 ] && [ "$r1" -gt 0 ] || fail "prefer-node1: node0 served $r0 reads, node1 $r1"
info "prefer-node1: node1 served $r1 reads, node0 $r0"

kill_node node1
timed 60 nbdcopy "$(uri node2)" "$tmpdir/back" || fail "reading with node1 gone failed"
cmp "$tmpdir/data" "$tmpdir/back" || fail "prefer-node1 with node1 gone: the data read differs"
[ "$(reads node0)" -gt 0 ] || fail "node0 served no reads with node1 gone"
info "prefer-node1, node1 gone: node0 served $(reads node0) reads"
start_node node1
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30

for policy in round-robin least-pending; do
    stop_node node2
    sed -i "s/^read-balancing: .*/read-balancing: $policy/" "$CONFIG"
    start_node node2
    wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
    a0=$(reads node0); a1=$(reads node1)
    timed 60 nbdcopy "$(uri node2)" "$tmpdir/back" || fail "$policy: reading failed"
    cmp "$tmpdir/data" "$tmpdir/back" || fail "$policy: the data read differs"
    d0=$(( $(reads node0) - a0 )); d1=$(( $(reads node1) - a1 ))
    if [ $policy = round-robin ]; then
        [ $d0 -gt 0 ] && [ $d1 -gt 0 ] || fail "round-robin: node0 served $d0 reads, node1 $d1"
    fi
    info "$policy: node0 served $d0 reads, node1 $d1"
done
info "ok"
