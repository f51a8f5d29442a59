#!/usr/bin/env bash
# A node added by replctl adjust starts at once, whatever else runs:
#  - on node0, the Primary, a slow resync of node1 (resync-rate 1M,
#    32 MiB: about 30 s) runs when node2 is added: node0 connects node2
#    and starts syncing it while node1's resync still runs (a resync
#    must not keep the new peer waiting for its end);
#  - node1 runs with NBDREPL_TEST_ADJUST_PUBLISH_DELAY_MS (adjust.c):
#    its adjust waits 2 s (20 ticks) between publishing the new peer
#    list and marking node2 as waiting to start; node2 must start on
#    node1 all the same (the epoch it waits for is taken from the
#    publication, not from a later moment the ticker may have passed;
#    before, node1 never started it).
# A writer runs on node0 meanwhile.  Then resync-rate is lifted by
# adjust: all three disks end identical, the writer saw no error.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires fio --version

make_config 2 C 32M
# node1 gets id 2: node0 (id 0) dials node2 (id 1), node2 dials node1.
sed -i 's/^    id: 1$/    id: 2/' "$CONFIG"
# Before nodes:, which node2 is appended to below.
sed -i 's/^nodes:$/resync:\n  resync-rate: 1M\nnodes:/' "$CONFIG"
ctl () { "$REPLCTL" -s "$(sock "$1")" "${@:2}"; }
start_node node0 role=primary
NBDREPL_TEST_ADJUST_PUBLISH_DELAY_MS=2000 start_node node1
wait_for node0 '[.peers[] | select(.name == "node1" and
    .replication == "SyncSource")] | length == 1' 30
info "node1's full sync runs at 1 MiB/s"

fio_pid=
cleanup_fn 'if [ -n "$fio_pid" ]; then kill "$fio_pid" 2>/dev/null; wait "$fio_pid"; fi'
timeout 120 fio --name=w --ioengine=nbd --uri="$(uri node0)" \
    --rw=randwrite --bs=4k --size=32M --iodepth=4 --time_based=1 \
    --runtime=8 --output-format=json --output="$tmpdir/fio.json" &
fio_pid=$!

truncate -s 32M "$(disk node2)"
NBD_PORT[node2]=$(free_port)
cat >>"$CONFIG" <<EOT
  - name: node2
    id: 1
    address: 127.0.0.1:$(free_port)
    disk: node2.img
    control: node2.sock
EOT
for n in node0 node1; do
    out=$(ctl $n adjust) || fail "adjust on $n (add): $out"
    grep -qF "node node2 (id 1, 127.0.0.1:" <<<"$out" ||
        fail "adjust on $n did not report the addition: $out"
done
grep -q "NBDREPL_TEST_ADJUST_PUBLISH_DELAY_MS=2000: waiting" \
    "$tmpdir/node1.log" || fail "node1's adjust did not wait (the hook)"
start_node node2

# node0 connects node2 while node1's resync still runs.
wait_for node0 '[.peers[] | select(.name == "node2" and
    .connection == "Connected" and .replication == "SyncSource")] |
    length == 1' 15
status_json node0 | jq -e '[.peers[] | select(.name == "node1" and
    .replication == "SyncSource" and .out_of_sync_bytes > 0)] |
    length == 1' >/dev/null ||
    fail "node1's resync ended before node2 connected, the test proves nothing: $(status_json node0)"
grep -q "peer node2: started (added by replctl adjust)" "$tmpdir/node0.log" ||
    fail "node0 did not log node2's start"
info "node0 connected node2 and syncs it during node1's resync"
# ... and node1, whose adjust waited after the publication (node1 and
# node2 connect only once one of them is UpToDate: the start is what
# is checked here, by the line it logs).
wait_log node1 "peer node2: started (added by replctl adjust)" 15
info "node1 started node2 after a delayed adjust"

wait "$fio_pid" || fail "fio exited with $?: $(tail -n 20 "$tmpdir/fio.json")"
fio_pid=
jq -e '[.jobs[] | .error == 0 and .write.io_bytes > 0] | all' \
    "$tmpdir/fio.json" >/dev/null || fail "fio: $(cat "$tmpdir/fio.json")"

# Lift the rate: everything syncs, the disks end identical.
sed -i '/^resync:$/d; /^  resync-rate: 1M$/d' "$CONFIG"
for n in node0 node1 node2; do
    out=$(ctl $n adjust) || fail "adjust on $n (rate): $out"
done
wait_uptodate node0 60
wait_for node1 '[.peers[] | .connection == "Connected"] | all' 30
same_disks node0 node1 node2
info "ok"
