#!/usr/bin/env bash
# A storage node that forwards a diskless Primary's write to a slow
# resync target gives the slow node up in time, not the Primary its
# live node.
#
# node1's disk is slow (tests/fault-inject.c: each write to node1.img
# takes 0.25 s first), and node1 is resynced in full from node0
# (replctl invalidate, 1 MiB chunks, several in flight).  While node1
# is a sync target, the diskless Primary node2 writes to node0 alone,
# and node0 forwards each of its six writes to node1 in turn, each
# behind the resync data already on its way there: node1 answers them
# seconds later, while it still reads its socket (no ping-timeout), and
# each resync chunk within timeout.  node0 must answer node2
# within node2's net: timeout; it gives node1 up after half of it
# (the write is marked for node1's resync) instead of keeping node2
# waiting until node2 gives node0 up and has no storage node left.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires test -f "$FAULT_INJECT"

make_diskless_config 16M
printf 'metadata:\n  bitmap-granularity: 1M\n' >>"$CONFIG"
# The same data on both disks, not zeroes (which a resync sends
# without data, and which would not be written slowly).
head -c 16M /dev/urandom >"$tmpdir/data"
cp "$tmpdir/data" "$(disk node0)"
cp "$tmpdir/data" "$(disk node1)"
for n in node0 node1; do
    "$REPLCTL" -c "$CONFIG" -n $n create-md --in-sync --force >/dev/null ||
        fail "create-md on $n"
done
start_node node0
FAULT_PWRITE_PATH=node1.img FAULT_PWRITE_DELAY_MS=250 \
    LD_PRELOAD="$FAULT_INJECT" start_node node1
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | length == 2 and all' 30
"$REPLCTL" -s "$(sock node2)" primary >/dev/null || fail "promoting node2 failed"

out=$("$REPLCTL" -s "$(sock node1)" invalidate) || fail "invalidate on node1 failed: $out"
# node0 resyncs node1, which is no target of node2's meanwhile (sync
# fence, or Inconsistent already when node2 saw it reconnect).
wait_for node0 '[.peers[] | select(.name == "node1") | .replication == "SyncSource" and .resync_done_bytes > 0] | length == 1' 30
lines0=$(wc -l <"$tmpdir/node0.log")
lines2=$(wc -l <"$tmpdir/node2.log")

start=$(date +%s%N)
timed 30 nbdsh -u "$(uri node2)" -c "
bufs = [nbd.Buffer.from_bytearray(bytearray(b'w' * 4096)) for i in range(6)]
cookies = [h.aio_pwrite(bufs[i], (8 << 20) + i * 4096) for i in range(6)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    h.aio_command_completed(c)
h.flush()" 2>"$tmpdir/w.err" ||
    fail "node2's writes while node0 forwards to the slow node1 failed: $(tail -n 1 "$tmpdir/w.err"); node2: $(tail -n +$(( lines2 + 1 )) "$tmpdir/node2.log" | grep -m 2 error | tr '\n' ';')"
info "node2's writes took $(( ($(date +%s%N) - start) / 1000000 )) ms"
tail -n +$(( lines0 + 1 )) "$tmpdir/node0.log" | grep -q "peer node1: a write forwarded for the diskless Primary .* giving this node up" ||
    fail "node0 did not give node1 up (the write did not wait behind the slow resync target: the test proves nothing): $(tail -n +$(( lines0 + 1 )) "$tmpdir/node0.log" | grep node1 | tail -n 3 | tr '\n' ';')"
if tail -n +$(( lines2 + 1 )) "$tmpdir/node2.log" | grep "peer node0: .*disconnecting"; then
    fail "node2 lost node0"
fi
info "node0: $(tail -n +$(( lines0 + 1 )) "$tmpdir/node0.log" | grep -m1 'giving this node up' | sed 's/^.*repl: //')"

# node1 is resynced in the end (slowly), the write included.
wait_storage_uptodate node0 node1 120
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | length == 2 and all' 30
same_disks node0 node1
cmp -s <(dd if="$(disk node1)" bs=4096 skip=2048 count=6 status=none) \
       <(head -c 24576 /dev/zero | tr '\0' w) || fail "node2's writes are not on node1"
info "ok: the slow resync target was given up in time, and resynced"
