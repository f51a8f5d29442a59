#!/usr/bin/env bash
# Which peer resyncs a node does not depend on the order the peers
# connect in.  Three storage nodes, no Primary (auto-promote off):
# node0 and node1 UpToDate, node2 back with fresh metadata
# (Inconsistent).  Either UpToDate peer can resync node2; the one that
# does is a Primary, else the lowest node id (DESIGN.md, "Resync between
# any two nodes ... the sync source is chosen deterministically").
#
#   1. node0 frozen (SIGSTOP) while node2 starts: node1 is the only one
#      there and starts the resync (resync-rate keeps it going for some
#      seconds).  node0 resumes and connects: it ranks before node1 and
#      takes over — node2 logs it, node1's connection is dropped and,
#      back, waits for node0's resync to end.  node2 ends UpToDate with
#      the disk of the others.
#   2. The same with node1 frozen: node0 starts, node1 resumes and
#      waits (it ranks after node0); node0 finishes.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 3 C 64M
sed -i 's|^net:|auto-promote: false\nquorum: off\nresync:\n  resync-rate: 8M\nnet:|' "$CONFIG"
for n in node0 node1 node2; do
    "$REPLCTL" -c "$CONFIG" -n $n create-md --in-sync >/dev/null ||
        fail "create-md --in-sync on $n"
done

# A pattern written through node0 as Primary (node2 down), then node0
# steps down: node0 and node1 UpToDate secondaries in one generation.
start_node node0 role=primary
start_node node1
wait_for node0 '[.peers[] | select(.name == "node1") | .connection == "Connected" and .disk == "UpToDate"] | all' 60
timed 60 nbdsh -u "$(uri node0)" -c '
for i in range(32):
    h.pwrite((b"rank-%02d-" % i).ljust(512, b".") * 2048, (16 + i) << 20)
h.flush()' || fail "writing the pattern through node0 failed"
# (The client's disconnect may reach nbdkit a moment after nbdsh ends.)
for (( i=0; i<50; i++ )); do
    "$REPLCTL" -s "$(sock node0)" secondary >/dev/null 2>&1 && break
    sleep 0.1
done
[ "$(status_json node0 | jq -r .role)" = Secondary ] || fail "demoting node0 failed"
wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected" and .role == "Secondary" and .out_of_sync_bytes == 0] | all'

# round FROZEN LATE LOSER: node2 returns Inconsistent while FROZEN is
# stopped; FROZEN resumes once node2 is SyncTarget of the other.
round ()
{
    local frozen=$1 other=$2 winner=$3 loser=$4
    : > "$tmpdir/node2.log"
    truncate -s 0 "$(disk node2)"; truncate -s 64M "$(disk node2)"
    "$REPLCTL" -c "$CONFIG" -n node2 create-md --force >/dev/null ||
        fail "create-md --force on node2"
    cmp -s "$(disk node0)" "$(disk node2)" &&
        fail "node2's disk already holds the data: the test would prove nothing"
    kill -STOP "${PID[$frozen]}"
    start_node node2
    wait_for node2 "[.peers[] | select(.name == \"$other\") | .replication == \"SyncTarget\"] | any" 30
    info "round $frozen frozen: node2 is SyncTarget of $other; resuming $frozen"
    kill -CONT "${PID[$frozen]}"
    # At the end node2 is UpToDate and every connection is quiet.
    wait_for node2 '.disk == "UpToDate" and ([.peers[] | .connection == "Connected" and .replication == "Established" and .out_of_sync_bytes == 0] | all)' 60
    grep -q "peer $loser: its resync of this node waits" "$tmpdir/node2.log" ||
        fail "round $frozen frozen: $loser never waited for $winner's resync: $(grep -E 'resync|takes over' "$tmpdir/node2.log" | tail -n 5 | tr '\n' '|')"
    grep -q "peer $loser: resync started" "$tmpdir/node2.log" &&
        ! grep -q "peer $winner: resync started" "$tmpdir/node2.log" &&
        fail "round $frozen frozen: $loser resynced node2, not $winner"
    grep -q "peer $winner: resync started" "$tmpdir/node2.log" ||
        fail "round $frozen frozen: $winner never resynced node2: $(grep -E 'resync|takes over' "$tmpdir/node2.log" | tail -n 5 | tr '\n' '|')"
    same_disks node0 node1 node2
    stop_node node2
}

# 1: node1 starts, node0 (lower id) takes over.
round node0 node1 node0 node1
grep -q "peer node0: takes over the resync of this node" "$tmpdir/node2.log" ||
    fail "node0 did not take over the resync from node1: $(grep -E 'resync|takes over' "$tmpdir/node2.log" | tail -n 5 | tr '\n' '|')"
grep -q "peer node1: .*the peer node0 resyncs this node instead" "$tmpdir/node2.log" ||
    fail "node1's connection was not dropped for node0"
info "node1 started the resync, node0 took it over, node2 identical"

# 2: node0 starts, node1 (higher id) waits.
round node1 node0 node0 node1
grep -q "takes over the resync" "$tmpdir/node2.log" &&
    fail "node1 took over from node0, which ranks before it"
info "node0 started the resync, node1 waited, node2 identical"
