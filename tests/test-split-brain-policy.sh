#!/usr/bin/env bash
# Automatic split-brain recovery: with after-sb-1pri:
# discard-least-changes a split brain in which the secondary changed
# less is resolved: the secondary discards its data and gets a full sync
# from the primary, whose writes survive.  With discard-zero-changes and
# both sides changed, the policy does not apply and the connection is
# refused (disconnect).  A node that was primary alone but wrote nothing
# made no new generation: no split brain at all.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 32M
sed -i 's/^protocol: C/&\nafter-sb-1pri: discard-least-changes/' "$CONFIG"
start_node node0 role=primary
start_node node1
wait_uptodate node0
stop_node node0
stop_node node1

# node1 alone as primary writes 16 chunks; node0 alone as primary 1.
start_node node1 role=primary
timed 30 nbdsh -u "$(uri node1)" -c "h.pwrite(b'1' * 65536, 1 << 20); h.flush()" ||
    fail "writing through node1 failed"
stop_node node1
start_node node0 role=primary
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'0' * 4096, 8 << 20); h.flush()" ||
    fail "writing through node0 failed"
stop_node node0

# node1 primary with more changes, node0 secondary with fewer: resolved.
start_node node1 role=primary
start_node node0
for (( i=0; i<200; i++ )); do
    grep -q "resolved by discard-least-changes: this node discards its data" "$tmpdir/node0.log" && break
    sleep 0.1
done
grep -q "resolved by discard-least-changes: this node discards its data" "$tmpdir/node0.log" ||
    fail "node0 did not resolve the split brain by discarding its data: $(grep -i split "$tmpdir/node0.log" | tail -n2)"
grep -q "resolved by discard-least-changes: the peer discards its data" "$tmpdir/node1.log" ||
    fail "node1 does not log the resolution"
wait_uptodate node1 60
same_disks node0 node1
cmp -s <(dd if="$(disk node0)" bs=64k skip=16 count=1 status=none) <(head -c 65536 /dev/zero | tr '\0' '1') ||
    fail "node1's write did not survive the resolution"
info "1: split brain with a less changed secondary resolved; node1's data kept"

# Both changed, discard-zero-changes: the policy does not decide; refused.
resolved=$(grep -c "discards its data" "$tmpdir/node0.log")
stop_node node0
stop_node node1
sed -i 's/^after-sb-1pri: .*/after-sb-1pri: discard-zero-changes/' "$CONFIG"
start_node node1 role=primary
timed 30 nbdsh -u "$(uri node1)" -c "h.pwrite(b'x' * 4096, 0); h.flush()" || fail "write via node1"
stop_node node1
start_node node0 role=primary
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'y' * 4096, 4096); h.flush()" || fail "write via node0"
stop_node node0
start_node node1 role=primary
start_node node0
wait_for node0 '.peers[0].last_error | contains("split-brain")' 20
[ "$(grep -c "discards its data" "$tmpdir/node0.log")" -eq "$resolved" ] ||
    fail "a split brain with changes on both sides was resolved automatically"
info "2: changes on both sides: refused"

# after-sb-0pri: discard-younger-primary.  Both changed, neither is
# primary when they meet: node0, which became primary last, discards.
stop_node node0
stop_node node1
sed -i 's/^after-sb-1pri: .*/&\nafter-sb-0pri: discard-younger-primary/' "$CONFIG"
start_node node1 role=primary
timed 30 nbdsh -u "$(uri node1)" -c "h.pwrite(b'o' * 4096, 16384); h.flush()" || fail "write via node1"
stop_node node1
sleep 0.01    # the two promotions are at least a millisecond apart
start_node node0 role=primary
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'n' * 4096, 20480); h.flush()" || fail "write via node0"
stop_node node0
start_node node1
start_node node0
wait_log node0 "resolved by discard-younger-primary: this node discards its data" 20
grep -q "resolved by discard-younger-primary: the peer discards its data" "$tmpdir/node1.log" ||
    fail "node1 does not log the resolution"
"$REPLCTL" -s "$(sock node1)" primary || fail "replctl primary on node1 failed"
wait_uptodate node1 60
same_disks node0 node1
cmp -s <(dd if="$(disk node0)" bs=4k skip=4 count=1 status=none) <(head -c 4096 /dev/zero | tr '\0' 'o') ||
    fail "the older primary's write did not survive"
info "3: discard-younger-primary: node0 (the younger primary) discarded its data"
