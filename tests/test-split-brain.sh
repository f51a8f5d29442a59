#!/usr/bin/env bash
# A split brain, made on purpose with static roles: node0 (primary) and
# node1 (secondary) are in sync; node0 stops; node1 is started as
# primary on its own and written to; node1 stops; node0 is started as
# primary on its own and written to.  Both changed the data while apart.
# When they meet again the connection must be refused, on both sides,
# with a message that says split brain and names both nodes' UUIDs, and
# neither disk may change: nothing is resolved silently.
#
# First both come back as primary (one gives way: only one node may be
# primary; then refused as a split brain), then node0 as primary and
# node1 as secondary (refused as a split brain).
source "$(dirname "$0")/functions.sh"
requires jq --version
requires /usr/bin/python3 -c 'import nbd'

make_config 2 C 64M
# The split-brain handler records each run.
cat >>"$CONFIG" <<EOT
handlers:
  split-brain: 'echo "\$NBDREPL_NODE \$NBDREPL_PEER" >>$tmpdir/split-brain-events'
EOT
start_node node0 role=primary
start_node node1
wait_uptodate node0
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'0' * (4 << 20), 0); h.flush()" ||
    fail "writing through node0 failed"
same_disks node0 node1
stop_node node0
stop_node node1

# node1 on its own, as primary: its writes.
start_node node1 role=primary
timed 30 nbdsh -u "$(uri node1)" -c "
h.pwrite(b'1' * 65536, 1 << 20)
h.pwrite(b'A' * 65536, 8 << 20)
h.flush()" || fail "writing through node1 failed"
stop_node node1

# node0 on its own, as primary: other writes, partly to the same place.
start_node node0 role=primary
timed 30 nbdsh -u "$(uri node0)" -c "
h.pwrite(b'2' * 65536, (1 << 20) + 32768)
h.pwrite(b'B' * 65536, 16 << 20)
h.flush()" || fail "writing through node0 failed"
stop_node node0

cmp -s "$(disk node0)" "$(disk node1)" && fail "the disks did not diverge"
sum0=$(md5sum < "$(disk node0)")
sum1=$(md5sum < "$(disk node1)")
uuid_of ()
{
    "$REPLCTL" -c "$CONFIG" -n "$1" dump-md |
        sed -n 's/^current-uuid: 0x\([0-9a-f]\{16\}\)$/\1/p'
}

# disks_unchanged: neither disk changed since the divergence.
disks_unchanged ()
{
    [ "$(md5sum < "$(disk node0)")" = "$sum0" ] ||
        fail "node0's disk changed: $1"
    [ "$(md5sum < "$(disk node1)")" = "$sum1" ] ||
        fail "node1's disk changed: $1"
}

# refusal PEER: a regex for the start of a log line refusing PEER (the
# node that dials says "peer PEER: ", the one that accepts "connection
# from ADDRESS (node PEER): ").
refusal () { echo "(peer $1|\\(node $1\\)): refusing connection: "; }

# wait_refused MSG-REGEX SECS: both nodes log a refusal matching the
# regex; fail at once if they connect instead.
wait_refused ()
{
    local re=$1 secs=$2 i c0 c1
    c0=$(grep -c "peer node1: connected (" "$tmpdir/node0.log" || true)
    c1=$(grep -c "peer node0: connected (" "$tmpdir/node1.log" || true)
    for (( i=0; i<secs*10; i++ )); do
        if grep -qE "$(refusal node1).*$re" "$tmpdir/node0.log" &&
           grep -qE "$(refusal node0).*$re" "$tmpdir/node1.log"; then
            return 0
        fi
        [ "$(grep -c "peer node1: connected (" "$tmpdir/node0.log" || true)" -eq "$c0" ] &&
        [ "$(grep -c "peer node0: connected (" "$tmpdir/node1.log" || true)" -eq "$c1" ] ||
            fail "the nodes connected: node0: $(grep "generations:" "$tmpdir/node0.log" | tail -n 1); node1: $(grep "generations:" "$tmpdir/node1.log" | tail -n 1)"
        sleep 0.1
    done
    fail "no refusal matching '$re' on both sides within $secs s"
}

# ---- 1. both started as primary ------------------------------------------------
# Only one may be Primary: node1 (the higher id) gives way and stays
# Secondary; then the generations are compared and the connection is
# refused as a split brain.
start_node node0 role=primary
start_node node1 role=primary
wait_log node1 "this node stays Secondary" 15
wait_refused "split-brain" 15
wait_for node0 '.role == "Primary" and .peers[0].connection != "Connected"' 10
wait_for node1 '.role == "Secondary" and .peers[0].connection != "Connected"' 10
disks_unchanged "while both were started as primary"
stop_node node0
stop_node node1
disks_unchanged "after both were started as primary"
: >"$tmpdir/split-brain-events"     # part 2 counts its own handler runs
info "1: both started as primary: node1 gave way, split brain refused, disks unchanged"

# ---- 2. node0 primary, node1 secondary: split brain ---------------------------
uuid0=$(uuid_of node0)
uuid1=$(uuid_of node1)
[ -n "$uuid0" ] && [ -n "$uuid1" ] || fail "cannot read the current UUIDs with dump-md"
info "current UUIDs: node0 $uuid0, node1 $uuid1"
start_node node0 role=primary
start_node node1
wait_refused "split-brain" 15
for n in node0 node1; do
    wait_for $n '.peers[0].connection != "Connected" and
                 (.peers[0].last_error | test("split-brain")) and
                 (.peers[0].last_error | test("resolve by hand"))' 10
done
# The message names both nodes' UUIDs, each side's own first.
grep -qE "$(refusal node1)split-brain .*ours: current $uuid0 .*peer's: current $uuid1" \
    "$tmpdir/node0.log" || fail "node0's refusal does not name both UUIDs"
grep -qE "$(refusal node0)split-brain .*ours: current $uuid1 .*peer's: current $uuid0" \
    "$tmpdir/node1.log" || fail "node1's refusal does not name both UUIDs"
info "node0: $(grep -m1 -o "refusing connection: split-brain.*" "$tmpdir/node0.log")"
# node1 is still no one's copy: it says so, and so does the primary.
st=$(status_json node0)
jq -e '.peers[0].disk != "UpToDate" or .peers[0].connection != "Connected"' <<<"$st" >/dev/null ||
    fail "node0 shows node1 as an UpToDate peer: $st"
disks_unchanged "at the split-brain connection attempt"
stop_node node0
stop_node node1
disks_unchanged "after the split-brain connection attempt"
# Neither node recorded a resync of the other.
[ "$(grep -c "resync started" "$tmpdir/node1.log")" -eq 1 ] ||
    fail "node1 was resynced after the split brain"
# The split-brain handler ran on both nodes, once each however often they
# tried to connect.
for pair in "node0 node1" "node1 node0"; do
    for (( i=0; i<100; i++ )); do
        grep -qxF "$pair" "$tmpdir/split-brain-events" 2>/dev/null && break
        sleep 0.1
    done
    [ "$(grep -cxF "$pair" "$tmpdir/split-brain-events" 2>/dev/null)" -eq 1 ] ||
        fail "split-brain handler for '$pair' ran $(grep -cxF "$pair" "$tmpdir/split-brain-events" 2>/dev/null || echo 0) times, expected once"
done
# ---- 3. ended by hand ---------------------------------------------------------
# DRBD's spelling, on the node whose changes are to go: node1's changes
# are discarded and the primary node0 resyncs it in full.
start_node node0 role=primary
start_node node1
wait_refused "split-brain" 15
"$REPLCTL" -s "$(sock node1)" connect --discard-my-data >/dev/null ||
    fail "connect --discard-my-data failed"
wait_uptodate node0 60
same_disks node0 node1
info "3: connect --discard-my-data on node1 ended the split brain"
info "ok"
