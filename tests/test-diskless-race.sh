#!/usr/bin/env bash
# Issue 18's race, set up: two storage nodes (node0, node1) in the same
# generation, a diskless node2.  node1's machine crashes while nobody
# writes (a new boot id: its activity log is marked), so it comes back
# in the same generation and the pair resyncs those chunks between them
# (node1, with the marks, is the source).  Its reads are slowed
# (tests/fault-inject.c: each chunk sleeps 1.5 s after it is read) and
# the diskless primary writes to the same blocks during the resync.  A
# write that went to node0 directly after node1 read its chunk would be
# overwritten there by the old chunk.  The sync fence (forward.c) must
# take node0 out of node2's targets before node1 reads anything, every
# write must then reach node0 through node1, and the disks must end
# identical, holding every acknowledged write (tests/ackcheck.py).
#
# Before the fence node0 left node2's targets only once RESYNC_START
# had made it Inconsistent and node2 had heard so: the window was that
# announcement's latency plus the writes in flight.  node2 runs with
# NBDREPL_TEST_DISKLESS_STATE_DELAY_MS (server/diskless.c): it hears of
# a storage node's disk leaving UpToDate 5 s late, so that window is
# wide open, and only the fence closes it.  DISKLESS_RACE_NO_FENCE=1
# starts node0 with NBDREPL_TEST_NO_SYNC_FENCE (server/forward.c): the
# test must then fail, on the disks' contents.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires test -f "$FAULT_INJECT"

ACKWRITE="$builddir/tests/ackwrite"
ACKCHECK="$(dirname "$0")/ackcheck.py"
[ -x "$ACKWRITE" ] || fail "$ACKWRITE is not built (make tests/ackwrite)"

acks () { local n; n=$(grep -c '^ack ' "$1" 2>/dev/null) || true; echo "${n:-0}"; }

make_diskless_config 16M
if [ "${DISKLESS_RACE_NO_FENCE:-0}" = 1 ]; then
    NBDREPL_TEST_NO_SYNC_FENCE=1 start_node node0
else
    start_node node0
fi
start_node node1
NBDREPL_TEST_DISKLESS_STATE_DELAY_MS=5000 start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30

# Blocks all over the 16M are written, then the client leaves (the
# diskless node demotes: nobody writes while node1 is down).
"$ACKWRITE" -1 -l "$tmpdir/w.log" -f 0 -c 4096 -n 4000 -t 30 "$(uri node2)" \
    >/dev/null || fail "the first run of writes failed"
wait_for node2 '.role == "Secondary"' 20
kill_node node1

# node1 returns in the same generation, after a machine crash (a new
# boot id: its activity log is marked); each chunk its resync reads
# waits 1.5 s before it goes out: under the ping-timeout (3 s), since
# a write of node2's to a chunk being read waits that long in node1's
# receive loop, which must not look dead to node2.
echo 00000000-0000-4000-8000-000000000001 >"$tmpdir/boot_id"
NBDREPL_TEST_BOOT_ID_FILE="$tmpdir/boot_id" FAULT_PREAD_PATH=/node1.img \
    FAULT_PREAD_SLEEP_MS=1500 LD_PRELOAD="$FAULT_INJECT" start_node node1
wait_for node1 '[.peers[] | select(.name == "node0") | .replication == "SyncSource" or .replication == "PausedSyncS" or .replication == "WFBitMapS"] | all' 30
wait_for node2 '[.peers[] | select(.name == "node1") | .connection == "Connected" and .disk == "UpToDate"] | all' 30
info "node1: $(grep -E 'generations|resync started' "$tmpdir/node1.log" | tail -n 2 | cut -c 25- | tr '\n' ' ')"

# Writes to the same blocks while the resync runs.
"$ACKWRITE" -1 -l "$tmpdir/w.log" -f 0 -c 4096 -t 20 "$(uri node2)" \
    >"$tmpdir/w2.out" 2>&1 &
w=$!
cleanup_fn "kill $w 2>/dev/null || true"
before=$(acks "$tmpdir/w.log")
for (( i=0; i<200; i++ )); do
    [ "$(acks "$tmpdir/w.log")" -ge $((before + 20)) ] && break
    kill -0 $w 2>/dev/null || fail "the writer stopped: $(grep '^fail' "$tmpdir/w.log" | head -n 3)"
    sleep 0.1
done
[ "$(acks "$tmpdir/w.log")" -ge $((before + 20)) ] || fail "no writes went through during the resync"
status_json node1 | jq -e '[.peers[] | select(.name == "node0") | .replication == "SyncSource" or .replication == "PausedSyncS"] | all' >/dev/null ||
    fail "the resync ended before the writes overlapped it: the race was not constructed"
info "ok: 20 writes acknowledged while node1 resyncs node0"
wait_for node1 '[.peers[] | select(.name == "node0") | .replication == "Established" and .out_of_sync_bytes == 0] | all' 40
kill -TERM $w 2>/dev/null || true
wait $w || fail "the writer saw an error: $(grep '^fail' "$tmpdir/w.log" | head -n 3)"

wait_for node0 '[.peers[] | select(.name == "node1") | .connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0] | all' 30
wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0] | all' 30
same_disks node0 node1
/usr/bin/python3 "$ACKCHECK" --log "$tmpdir/w.log" "$(disk node0)" "$(disk node1)" \
    >"$tmpdir/check.out" || fail "ackcheck: $(head -n 5 "$tmpdir/check.out")"
info "ok: identical disks holding every acknowledged write after the resync raced the writes"
grep -q "peer node1: sync fence: no diskless node writes to this node directly now" "$tmpdir/node0.log" ||
    fail "node0 was resynced without the sync fence"
grep -q "peer node0: leaves our targets while node1 resyncs it" "$tmpdir/node2.log" ||
    fail "node2 did not take node0 out of its targets for the resync"
info "ok: node0 left node2's targets before node1 resynced it"
