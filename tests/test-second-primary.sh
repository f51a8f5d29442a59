#!/usr/bin/env bash
# At most one Primary: with node0 Primary and connected, node1 started
# with role=primary stays Secondary (it gives way once it sees a Primary
# peer), accepts no client write, and node0 keeps serving.  A node
# started with role=primary while its peer is down waits for the peer
# (bounded by ping-timeout) and then becomes Primary; replctl primary
# --force ends that wait at once.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'a' * 65536, 0)" || fail "write through node0 failed"
role () { status_json "$1" | jq -r .role; }

# node1 restarted as a second primary.
stop_node node1
start_node node1 role=primary
wait_log node1 "stays Secondary" 20
wait_for node1 '.role == "Secondary" and .peers[0].connection == "Connected" and .peers[0].role == "Primary"' 30
[ "$(role node0)" = Primary ] || fail "node0 is $(role node0), not Primary"
wait_for node0 '.peers[0].connection == "Connected" and .peers[0].role == "Secondary"' 30
if timed 30 nbdsh -u "$(uri node1)" -c "h.pwrite(b'X' * 4096, 0)" 2>"$tmpdir/err"; then
    fail "node1, started as a second primary, accepted a write"
fi
info "the second role=primary gave way: $(grep -m1 'stays Secondary' "$tmpdir/node1.log")"
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'b' * 4096, 4096)" || fail "node0 stopped serving"
wait_uptodate node0 30
same_disks node0 node1
cmp -s <(head -c 4096 "$(disk node1)") <(head -c 4096 /dev/zero | tr '\0' a) ||
    fail "node1's refused write reached the disks"

# role=primary with the peer down: confirmed after ping-timeout (3 s),
# then serves.
stop_node node1
stop_node node0
start_node node0 role=primary
wait_log node0 "role=primary confirmed" 20
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'c' * 4096, 8192)" || fail "node0 alone does not serve"
start_node node1
wait_uptodate node0 30
same_disks node0 node1

# replctl primary --force ends the wait at once.
stop_node node1
stop_node node0
start_node node0 role=primary
"$REPLCTL" -s "$(sock node0)" primary --force >/dev/null || fail "primary --force failed"
grep -q "role=primary confirmed (replctl primary --force)" "$tmpdir/node0.log" ||
    fail "primary --force did not end role=primary's wait: $(grep confirmed "$tmpdir/node0.log" | tail -n 1)"
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'd' * 4096, 12288)" || fail "node0 does not serve after --force"
info "ok: one Primary at a time"
