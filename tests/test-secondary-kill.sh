#!/usr/bin/env bash
# The secondary crashes (SIGKILL) in the middle of a write load: the
# client's writes go on without a single error, the primary records
# what the secondary missed, and when the secondary comes back only that
# part is resynced, after which both disks are identical.  Then the
# same with the secondary coming back while the load still runs.
source "$(dirname "$0")/functions.sh"
requires fio --version
requires jq --version

size=$((64 << 20))
make_config 2 C 64M
start_node node0 role=primary
start_node node1
wait_uptodate node0

# A bounded load on the first 8 MiB of the 64 MiB volume: 6 s at most
# (time_based), and timeout(1) bounds the whole run.
json="$tmpdir/fio.json"
timeout 60 \
    fio --name=load --ioengine=nbd --uri="$(uri node0)" \
        --rw=randwrite --bsrange=4k-64k --size=8M --numjobs=2 --iodepth=8 \
        --norandommap=1 --refill_buffers=1 \
        --time_based=1 --runtime=6 \
        --output-format=json --output="$json" &
fio_pid=$!
cleanup_fn 'if [ -n "$fio_pid" ]; then kill "$fio_pid"; wait "$fio_pid"; fi'

# Let the load run for a bit, then crash the secondary under it.
wait_for node0 '.writes > 2000' 20
kill -0 "$fio_pid" 2>/dev/null || fail "fio ended before the secondary was killed"
kill_node node1
writes_at_kill=$(status_json node0 | jq .writes)
info "killed node1 after $writes_at_kill writes"

# The primary notices, and keeps a record of what node1 misses.
wait_for node0 '.peers[0].connection != "Connected" and
                .peers[0].out_of_sync_bytes > 0' 10
# Client writes go on while the secondary is gone.
wait_for node0 ".writes > $writes_at_kill + 500" 10

fio_status=0
wait "$fio_pid" || fio_status=$?
fio_pid=
[ "$fio_status" -eq 0 ] || fail "fio exited with status $fio_status: $(tail -n 20 "$json")"
jq -e '[.jobs[] | .error == 0] | all' "$json" >/dev/null ||
    fail "fio reported errors: $(jq -c '[.jobs[] | .error]' "$json")"
fio_writes=$(jq '[.jobs[].write.total_ios] | add' "$json")
info "fio did $fio_writes writes, no errors"

# With node1 still down, the primary shows it as disconnected, behind.
st=$(status_json node0)
jq -e '.peers[0].connection != "Connected" and
       .peers[0].disk == "Outdated" and
       .peers[0].out_of_sync_bytes > 0' <<<"$st" >/dev/null ||
    fail "primary's status with node1 down: $st"
oos=$(jq '.peers[0].out_of_sync_bytes' <<<"$st")
info "out of sync while node1 is down: $oos bytes"
[ "$oos" -le $((8 << 20)) ] ||
    fail "out_of_sync_bytes $oos is more than the 8 MiB the load touched"

# node1 comes back: it resyncs, and only the dirty part.
start_node node1
wait_uptodate node0
st=$(status_json node0)
total=$(jq '.peers[0].resync_total_bytes' <<<"$st")
info "resync after restart: $total bytes"
[ "$total" -gt 0 ] || fail "resync_total_bytes is $total after reconnecting: $st"
[ "$total" -lt "$size" ] ||
    fail "resync_total_bytes is $total: the whole volume was resynced, not only the dirty part"
[ "$total" -ge "$oos" ] ||
    fail "resync_total_bytes $total is less than the $oos bytes out of sync"
grep -q "resync started, $total bytes out of sync" "$tmpdir/node0.log" ||
    fail "node0's log does not show the resync of $total bytes"

same_disks node0 node1

# Again, but node1 comes back while the load still runs: the resync
# must make progress and finish under client writes, and the result
# must still be identical.  The load covers 32 MiB this time.
json2="$tmpdir/fio2.json"
timeout 60 \
    fio --name=load2 --ioengine=nbd --uri="$(uri node0)" \
        --rw=randwrite --bsrange=1-256k --bs_unaligned=1 --blockalign=1 \
        --size=32M --numjobs=2 --iodepth=8 \
        --norandommap=1 --refill_buffers=1 \
        --time_based=1 --runtime=8 \
        --output-format=json --output="$json2" &
fio_pid=$!
writes0=$(status_json node0 | jq .writes)
wait_for node0 ".writes > $writes0 + 2000" 20
kill_node node1
wait_for node0 '.peers[0].connection != "Connected" and
                .peers[0].out_of_sync_bytes > 0' 10
start_node node1
wait_uptodate node0
kill -0 "$fio_pid" 2>/dev/null ||
    fail "the load ended before the resync under load finished"
info "resync under load: $(status_json node0 | jq .peers[0].resync_total_bytes) bytes"
fio_status=0
wait "$fio_pid" || fio_status=$?
fio_pid=
[ "$fio_status" -eq 0 ] || fail "second fio exited with status $fio_status"
jq -e '[.jobs[] | .error == 0] | all' "$json2" >/dev/null ||
    fail "second fio reported errors: $(jq -c '[.jobs[] | .error]' "$json2")"
# Protocol C, connected: the disks match as soon as fio has returned.
status_json node0 | jq -e '.peers[0].connection == "Connected" and
                           .peers[0].out_of_sync_bytes == 0' >/dev/null ||
    fail "node1 is not connected and in sync after the load: $(status_json node0)"
same_disks node0 node1
info "ok"
