#!/usr/bin/env bash
# allow-two-primaries with a diskless node: one of the two Primaries
# dies (SIGKILL) while both write the same blocks (tests/twoprim.py, 16
# requests in flight each).  First the storage Primary (node0): the
# diskless Primary (node2), which wrote through it, goes on writing
# straight to node1 without a single failed write; node0 comes back and
# is resynced.  Then the diskless Primary: node0 goes on without a
# failed write.  Each time node0's and node1's disks end byte-identical,
# and every block holds the last answered write of one writer, or one
# never answered (tests/twoprim.py check): no answered write is lost.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires /usr/bin/python3 -c "import nbd"

BLOCKS=64
SECS=8

make_diskless_config 16M
sed -i 's/^protocol: C/&\nallow-two-primaries: true/' "$CONFIG"
start_node node0
start_node node1
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
wait_storage_uptodate node0 node1

# kill_mid_round ROUND VICTIM: both writers run (each auto-promotes its
# node); once both nodes have taken writes, VICTIM dies.  The other
# writer must not fail.
kill_mid_round ()
{
    local r=$1 victim=$2 survivor
    twoprim_start $r $SECS $BLOCKS "$(uri node0)" "$(uri node2)"
    wait_for node0 '.role == "Primary" and .writes > 200' 15
    wait_for node2 '.role == "Primary" and .writes > 200 and .writes_through == "node0"' 15
    kill_node $victim
    twoprim_wait $r $SECS
    if [ $victim = node0 ]; then
        survivor=2
        [ $TP_RC2 = 0 ] || fail "round $r: node2's writer failed when node0 died: $(tail -n 5 "$tmpdir/w2.out")"
    else
        survivor=1
        [ $TP_RC1 = 0 ] || fail "round $r: node0's writer failed when node2 died: $(tail -n 5 "$tmpdir/w1.out")"
    fi
    info "round $r: $victim killed; writer $survivor: $(cat "$tmpdir/w$survivor.out")"
    logs+=("$tmpdir/w1.$r.json" "$tmpdir/w2.$r.json")
}
logs=()

# The storage Primary dies.
kill_mid_round 1 node0
wait_log node2 "no storage node is Primary: writes go straight" 15
start_node node0
wait_storage_uptodate node1 node0 60
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
same_disks node0 node1
$TWOPRIM check "$(disk node0)" $BLOCKS "${logs[@]}" >"$tmpdir/check.out" 2>&1 ||
    fail "after node0's death: $(tail -n 20 "$tmpdir/check.out")"
info "node0 died: $(tail -n 1 "$tmpdir/check.out")"

# The diskless Primary dies.
wait_for node0 '.role == "Secondary"' 15
wait_for node2 '.role == "Secondary"' 15
kill_mid_round 2 node2
wait_storage_uptodate node0 node1 60
wait_storage_uptodate node1 node0 60
same_disks node0 node1
$TWOPRIM check "$(disk node0)" $BLOCKS "${logs[@]}" >"$tmpdir/check.out" 2>&1 ||
    fail "after node2's death: $(tail -n 20 "$tmpdir/check.out")"
info "node2 died: $(tail -n 1 "$tmpdir/check.out")"
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
info "ok: either Primary died mid-write; the survivor went on; disks identical"
