#!/usr/bin/env bash
# allow-two-primaries with several diskless nodes: a diskless Secondary
# lends its quorum vote to no storage Primary that missed writes.
#
# Two storage nodes (node0, node1) and three diskless ones (node2,
# node3, node4); quorum is a majority of the five.  node0 (storage) and
# node2 (diskless) are Primary; node2 writes through node0.  node0 is
# frozen (SIGSTOP): node2 gives it up and writes straight to node1, in
# a new generation that node0 is not in.  When node0 thaws it is still
# Primary and connects again.  node1 and node2 refuse it; node3 and
# node4, diskless Secondaries, must refuse it too (node1 holds a
# generation grown out of node0's), or node0 counts itself, node3 and
# node4, three of five, and answers writes on its disk alone while
# node1 and node2 go on without it: acknowledged writes that the
# resync after the split brain would throw away.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_diskless_config 16M 3
sed -i 's/^protocol: C/&\nallow-two-primaries: true\nauto-promote: false\nquorum: majority\non-no-quorum: io-error/' "$CONFIG"
for n in node0 node1 node2 node3 node4; do start_node $n; done
for n in node2 node3 node4; do
    wait_for $n '[.peers[] | select(.name == "node0" or .name == "node1") | .connection == "Connected" and .disk == "UpToDate"] | length == 2 and all' 30
done
wait_storage_uptodate node0 node1

write () { timed 30 nbdsh -u "$(uri "$1")" -c "h.pwrite(b'$2' * 4096, $3); h.flush()"; }
block_is () { cmp -s <(dd if="$(disk "$1")" bs=4096 skip=$(($2 / 4096)) count=1 status=none) \
                      <(head -c 4096 /dev/zero | tr '\0' "$3"); }

"$REPLCTL" -s "$(sock node0)" primary >/dev/null || fail "promoting node0 failed"
"$REPLCTL" -s "$(sock node2)" primary >/dev/null || fail "promoting node2 failed"
write node2 a 0 || fail "a write through node2 failed"
wait_for node2 '.writes_through == "node0"' 15

# node0 freezes; node2 gives it up and writes straight to node1.
pid0=${PID[node0]}
kill -STOP "$pid0"
cleanup_fn "kill -CONT $pid0 2>/dev/null || true"
wait_for node2 '[.peers[] | select(.name == "node0") | .connection != "Connected"] | all' 20
wait_for node1 '[.peers[] | select(.name == "node0") | .connection != "Connected"] | all' 20
write node2 b 4096 || fail "node2's write without node0 failed"
block_is node1 4096 b || fail "node2's write is not on node1"
# node1's new generation reached the diskless Secondaries.
uuid1=$(status_json node1 | jq -r '.current_uuid')
info "node1's generation after node2's write without node0: $uuid1"

# node0 thaws, still Primary, and connects again.
declare -A mark
for n in node0 node1 node2 node3 node4; do mark[$n]=$(wc -l <"$tmpdir/$n.log"); done
kill -CONT "$pid0"
since () { tail -n +$(( ${mark[$1]} + 1 )) "$tmpdir/$1.log"; }
for n in node3 node4; do
    for (( i = 0; i < 300; i++ )); do
        since $n | grep -qE "peer node0: (connected|.*refusing connection)" && break
        sleep 0.1
    done
    since $n | grep -qE "peer node0: (connected|.*refusing connection)" ||
        fail "$n neither connected to node0 nor refused it within 30 s of the thaw"
done
# node0's ticker has run (it dropped its stale connections on waking).
wait_for node0 '.role == "Primary"' 10
for n in node3 node4; do
    since $n | grep -q "peer node0: connected" &&
        fail "$n, a diskless Secondary, took node0 (Primary, missed node2's writes) back: $(since $n | grep 'peer node0' | tail -n 3 | tr '\n' ';')"
done
info "node3 refused node0: $(since node3 | grep -m1 'peer node0: .*refusing' | sed 's/^.*refusing connection: //')"

quorum=$(status_json node0 | jq .quorum)
[ "$quorum" = false ] || fail "node0 has quorum after the thaw: $(status_json node0 | jq -c '[.peers[] | {name, connection}]')"
if write node0 c 8192 2>"$tmpdir/w0.err"; then
    fail "node0 answered a write on its disk alone after the thaw (quorum from diskless nodes only)"
fi
info "node0's write after the thaw failed, as it must: $(tail -n 1 "$tmpdir/w0.err")"

# node0 steps down and is resynced from node1.
"$REPLCTL" -s "$(sock node0)" secondary >/dev/null 2>&1 || fail "demoting node0 failed"
wait_storage_uptodate node1 node0 60
wait_storage_uptodate node0 node1 60
same_disks node0 node1
block_is node0 4096 b || fail "node2's write without node0 is not on node0 after the resync"
info "ok: the diskless Secondaries refused the stale Primary; disks identical"
