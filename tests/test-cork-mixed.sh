#!/usr/bin/env bash
# cork under a mixed load on a diskless client: 1M random reads and
# writes (READ_REPLYs of a megabyte come back while writes go out) on
# one connection, 4k random writes (which cork holds) on another, at
# the same time.  Whoever reads a connection must never block sending
# the held writes (the storage node may be blocked sending a READ_REPLY
# until we read): no link may stall ("send made no progress"), no
# request may fail, and the storage nodes end identical.  Small socket
# buffers (net: sndbuf-size, rcvbuf-size) make a stall quick to show.
source "$(dirname "$0")/functions.sh"
requires jq --version

RB="$builddir/client/replbench"
make_diskless_config 64M
# Small socket buffers, so that a reader blocked in a send would block
# the link within the run (with the default 4M it takes longer).
sed -i 's/^  connect-retry-max: 0.5$/&\n  sndbuf-size: 64K\n  rcvbuf-size: 64K/' "$CONFIG"
grep -q '^  rcvbuf-size: 64K$' "$CONFIG" || fail "could not set the buffer sizes"
start_node node0
start_node node1
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30

uri=$(uri node2)
timeout 60 "$RB" --uri "$uri" --rw randrw --rwmixread 50 --bs 1M --qd 16 \
    --runtime 5 --size 64M --json > "$tmpdir/big.json" 2>"$tmpdir/big.err" &
big=$!
timeout 60 "$RB" --uri "$uri" --rw randwrite --bs 4k --qd 16 \
    --runtime 5 --size 64M --json > "$tmpdir/small.json" 2>"$tmpdir/small.err" &
small=$!
wait "$big" || fail "1M randrw failed: $(cat "$tmpdir/big.err")"
wait "$small" || fail "4k randwrite failed: $(cat "$tmpdir/small.err")"
jq -e '.errors == 0 and .reads > 0 and .writes > 0' "$tmpdir/big.json" >/dev/null ||
    fail "1M randrw: $(cat "$tmpdir/big.json")"
jq -e '.errors == 0 and .writes > 0' "$tmpdir/small.json" >/dev/null ||
    fail "4k randwrite: $(cat "$tmpdir/small.json")"
info "1M randrw: $(jq -r '"\(.reads) reads, \(.writes) writes"' "$tmpdir/big.json"); 4k: $(jq -r '.writes' "$tmpdir/small.json") writes"

for n in node0 node1 node2; do
    if grep -E "no progress|ping-timeout|timeout\)|disconnecting" "$tmpdir/$n.log"; then
        fail "$n: a link stalled or dropped under the mixed load"
    fi
done
status_json node2 | jq -e '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' >/dev/null ||
    fail "node2 lost a storage node"

stop_node node2
wait_for node0 '[.peers[] | select(.name == "node1") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 30
same_disks node0 node1
info "ok"
