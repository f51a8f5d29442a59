#!/usr/bin/env bash
# A diskless client (disk: none) with two storage nodes: it auto-
# promotes on its first client, writes go straight to both storage
# nodes and reads come from them; a storage node killed during a write
# load costs the client no error, the survivor tracks what it misses,
# and on its return it is resynced from the survivor (a storage
# secondary) while the client keeps writing through the diskless node.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires fio --version

make_diskless_config 64M
start_node node0
start_node node1
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
st=$(status_json node2)
[ "$(jq -r .disk <<<"$st")" = Diskless ] || fail "node2 is not Diskless: $(jq -c . <<<"$st")"

# The first client promotes the diskless node; data lands on both disks.
head -c 64M /dev/urandom >"$tmpdir/data"
timed 60 nbdcopy "$tmpdir/data" "$(uri node2)" || fail "nbdcopy to the diskless node failed"
grep -q "auto-promoted by a client" "$tmpdir/node2.log" || fail "node2 was not auto-promoted"
cmp "$tmpdir/data" "$(disk node0)" || fail "node0's disk does not hold the data"
cmp "$tmpdir/data" "$(disk node1)" || fail "node1's disk does not hold the data"
# Reads through the diskless node come from the storage nodes.
timed 60 nbdcopy "$(uri node2)" "$tmpdir/back" || fail "nbdcopy from the diskless node failed"
cmp "$tmpdir/data" "$tmpdir/back" || fail "data read through the diskless node differs"
info "ok: writes reach both storage nodes, reads come back"

# A write load through the diskless node, on the first 8M only; node0
# dies in the middle.
timeout 120 fio --name=load --ioengine=nbd --uri="$(uri node2)" \
    --rw=randwrite --bs=4k --iodepth=8 --size=8M \
    --time_based=1 --runtime=8 --output="$tmpdir/fio.out" &
fio_pid=$!
cleanup_fn "kill $fio_pid 2>/dev/null || true"
sleep 2
kill_node node0
wait "$fio_pid" || fail "the client's writes failed when a storage node died: $(grep -i "err" "$tmpdir/fio.out" | head -n 5)"
info "ok: fio saw no error while node0 died"
oos=$(status_json node1 | jq '[.peers[] | select(.name == "node0") | .out_of_sync_bytes] | .[0]')
[ "$oos" -gt 0 ] && [ "$oos" -le $((8 << 20)) ] ||
    fail "node1 should track what node0 missed, within the 8M written (out_of_sync_bytes $oos)"
info "node1 tracks $oos bytes that node0 missed"

# node0 returns while the client keeps writing; node1 resyncs it.
timeout 120 fio --name=load2 --ioengine=nbd --uri="$(uri node2)" \
    --rw=randwrite --bs=4k --iodepth=8 --size=64M \
    --time_based=1 --runtime=5 --output="$tmpdir/fio2.out" &
fio_pid=$!
cleanup_fn "kill $fio_pid 2>/dev/null || true"
start_node node0
wait "$fio_pid" || fail "the client's writes failed during node0's return: $(tail -n 20 "$tmpdir/fio2.out")"
wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 60
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
line=$(grep "resync finished" "$tmpdir/node1.log" | tail -n 1) || fail "node1 did not resync node0"
info "node1: $line"
info "node0: $(grep -E 'generations|resync (started|finished)' "$tmpdir/node0.log" | tail -n 3 | tr '\n' ' ')"
same_disks node0 node1
timed 60 nbdcopy "$(uri node2)" "$tmpdir/back" || fail "nbdcopy from the diskless node failed"
cmp "$tmpdir/back" "$(disk node0)" || fail "the client reads something else than the disks hold"
info "ok: node0 was resynced from node1 while the client wrote; disks identical"

# The diskless primary itself dies in the middle of writes: what it had
# in flight may be on one storage node only.  The storage nodes
# reconcile their activity logs and end identical.
timeout 120 fio --name=load3 --ioengine=nbd --uri="$(uri node2)" \
    --rw=randwrite --bs=64k --iodepth=16 --size=64M \
    --time_based=1 --runtime=20 --output="$tmpdir/fio3.out" &
fio_pid=$!
cleanup_fn "kill $fio_pid 2>/dev/null || true"
sleep 2
kill_node node2
wait "$fio_pid" && fail "fio did not notice that the diskless primary died"
wait_for node0 '[.peers[] | select(.name == "node1") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 60
wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 60
same_disks node0 node1
grep -q "reconciling" "$tmpdir/node0.log" "$tmpdir/node1.log" ||
    fail "the storage nodes did not reconcile after losing their primary"
info "ok: after the diskless primary died mid-write the storage nodes reconciled"
