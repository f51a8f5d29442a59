#!/usr/bin/env bash
# A diskless primary (node2) loses a storage node (node0); its next
# write starts a new generation with node1 as its only target.  Before
# that write (and the AWAY that tells node1 of the generation) goes out,
# a STATE of node1's comes in, sent while node1 was still in the
# generation before.  node1 stays our target: a write beside that one
# goes to it, where before it failed with "no UpToDate storage node is
# connected" (seen under nbd-client in the VM test, with the STATE or
# UUIDS of node1 that losing node0 set off).
#
# Made deterministic: node2 waits 3 s after starting the generation
# before sending the write (NBDREPL_TEST_DISKLESS_AWAY_DELAY_MS,
# server/diskless.c), and node1's administrator pauses the resync with
# node2 in that window (replctl pause-sync: a STATE to node2).
source "$(dirname "$0")/functions.sh"
requires jq --version

make_diskless_config 16M
start_node node0
start_node node1
NBDREPL_TEST_DISKLESS_AWAY_DELAY_MS=3000 start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30

block () { head -c 4096 /dev/zero | tr '\0' "$1"; }
block A >"$tmpdir/A"; block B >"$tmpdir/B"; block C >"$tmpdir/C"
timed 30 nbdcopy "$tmpdir/A" "$(uri node2)" || fail "writing A failed"
wait_for node2 '.role == "Secondary"' 20

kill_node node0
wait_for node2 '[.peers[] | select(.name == "node0") | .connection != "Connected"] | all' 20

# B at block 0: the first write with node0 away starts a generation,
# then waits 3 s; node1's STATE comes in meanwhile.
nbdsh -u "$(uri node2)" -c "h.pwrite(open('$tmpdir/B', 'rb').read(), 0)" \
    >"$tmpdir/wb.out" 2>&1 &
w=$!
cleanup_fn "kill $w 2>/dev/null || true"
wait_log node2 "first write with storage nodes away (mask 0x1)" 20
"$REPLCTL" -s "$(sock node1)" pause-sync node2 ||
    fail "replctl pause-sync node2 on node1 failed"
wait_for node2 '[.peers[] | select(.name == "node1") | .sync_paused_by_peer] | all' 10
kill -0 $w 2>/dev/null ||
    fail "the write of B ended before node1's STATE came: the race was not constructed"

# C at block 1, while B still waits: node1 is still our target.
nbdsh -u "$(uri node2)" -c "h.pwrite(open('$tmpdir/C', 'rb').read(), 4096)" \
    >"$tmpdir/wc.out" 2>&1 ||
    fail "writing C after node1's STATE failed: $(cat "$tmpdir/wc.out"; grep -E 'failed|generation' "$tmpdir/node2.log" | tail -n 3)"
kill -0 $w 2>/dev/null ||
    fail "the write of B ended before C was written: the race was not constructed"
wait $w || fail "writing B failed: $(cat "$tmpdir/wb.out")"
info "C written while B waited in the new generation, after node1's STATE"
rm -f "$tmpdir/back"
nbdsh -u "$(uri node2)" -c "open('$tmpdir/back', 'wb').write(h.pread(8192, 0))" ||
    fail "reading blocks 0 and 1 back failed"
cmp -s <(cat "$tmpdir/B" "$tmpdir/C") "$tmpdir/back" ||
    fail "blocks 0 and 1 read back are not B and C"
info "B and C read back through node1"

# node0 returns and is resynced; the storage disks end identical.
"$REPLCTL" -s "$(sock node1)" resume-sync node2 ||
    fail "replctl resume-sync node2 on node1 failed"
start_node node0
wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 60
same_disks node0 node1
cmp -s <(cat "$tmpdir/B" "$tmpdir/C") <(head -c 8192 "$(disk node0)") ||
    fail "node0's disk does not hold B and C after its resync"
info "ok: node1 stayed a target through its STATE; node0 resynced, disks identical"
