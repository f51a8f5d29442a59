#!/usr/bin/env bash
# Three nodes, protocol C: one primary and two secondaries.  An nbdcopy
# of random data through the primary is on all three disks by the time
# nbdcopy returns.
source "$(dirname "$0")/functions.sh"
requires nbdcopy --version
requires jq --version

make_config 3 C 32M
start_node node0 role=primary
start_node node1
start_node node2
wait_uptodate node0

# The primary sees two peers, both UpToDate secondaries.
status_json node0 |
    jq -e '.role == "Primary" and (.peers | length) == 2 and
           ([.peers[] | .role == "Secondary"] | all)' >/dev/null ||
    fail "primary does not see two secondary peers"
# The secondaries are UpToDate once the initial resync is done.
wait_for node1 '.disk == "UpToDate"' 30
wait_for node2 '.disk == "UpToDate"' 30

head -c 32M /dev/urandom > "$tmpdir/data"
nbdcopy "$tmpdir/data" "$(uri node0)"
# No waiting: protocol C means all three disks hold the data already.
cmp "$tmpdir/data" "$(disk node0)" || fail "primary's disk differs from the data"
cmp "$tmpdir/data" "$(disk node1)" || fail "node1's disk differs from the data"
cmp "$tmpdir/data" "$(disk node2)" || fail "node2's disk differs from the data"

status_json node0 |
    jq -e '.writes > 0 and ([.peers[] | .connection == "Connected" and
                                         .in_flight == 0 and
                                         .out_of_sync_bytes == 0] | all)' \
    >/dev/null || fail "primary's status after the copy is not clean"
info "ok"
