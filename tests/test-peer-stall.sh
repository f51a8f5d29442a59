#!/usr/bin/env bash
# The secondary stalls (SIGSTOP) without closing its connection: the
# primary's clients must not hang.  Within about `timeout` (4 s in
# functions.sh's configuration) the primary gives up on the peer,
# completes the writes, and records them as out of sync; once the
# secondary runs again it reconnects, is resynced, and the disks match.
source "$(dirname "$0")/functions.sh"
requires nbdcopy --version
requires jq --version
requires /usr/bin/python3 -c 'import nbd'

# timed SECS CMD...: CMD, which may be a shell function such as nbdsh,
# killed after SECS seconds (status 124).

size=$((64 << 20))
make_config 2 C "$size"
start_node node0 role=primary
start_node node1
wait_uptodate node0
head -c 8M /dev/urandom > "$tmpdir/data"
timeout 60 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "nbdcopy failed"
same_disks node0 node1

# Stall the secondary; never leave it stopped, however the test ends.
pid1=${PID[node1]}
cleanup_fn "kill -CONT $pid1 2>/dev/null"
kill -STOP "$pid1"
info "node1 (pid $pid1) stopped"

# Writes through the primary: a 16 MiB one (more than the socket
# buffers hold, so the sender blocks), then 4 KiB ones.  Each must
# complete within timeout (4 s) plus a margin for the 0.1 s tick.
timed 20 nbdsh -u "$(uri node0)" -c "
import os, time
def timed_write(n, off, limit):
    t = time.monotonic()
    h.pwrite(os.urandom(n), off)
    t = time.monotonic() - t
    print('write of %d bytes at %d took %.2f s' % (n, off, t))
    assert t < limit, 'write took %.2f s, more than %.1f s' % (t, limit)
timed_write(16 << 20, 4 << 20, 8.0)
timed_write(4096, 40 << 20, 8.0)
# The peer is dropped by now: the next ones are quick.
t = time.monotonic()
for i in range(100):
    h.pwrite(os.urandom(4096), (48 << 20) + i * 8192)
t = time.monotonic() - t
print('100 writes of 4 KiB took %.2f s' % t)
assert t < 2.0, '100 writes took %.2f s with the peer dropped' % t
" || fail "writes through the primary did not complete in time with the peer stalled"

# The primary has dropped the stalled peer and knows exactly what it
# missed: the 16 MiB, and one 4 KiB bitmap chunk per small write.
st=$(status_json node0)
jq -e '.peers[0].connection != "Connected" and .peers[0].disk == "Outdated" and
       .peers[0].out_of_sync_bytes == 16777216 + 4096 + 100 * 4096' <<<"$st" \
    >/dev/null || fail "primary's status with the peer stalled: $st"
grep -qE "peer node1: .*(not acknowledged|ping-timeout|send: )" "$tmpdir/node0.log" ||
    fail "node0's log does not say why it dropped node1"
oos=$(jq '.peers[0].out_of_sync_bytes' <<<"$st")

# Keep it stopped until the primary has tried to reconnect and failed
# (the kernel accepts for the stopped process, but no hello comes
# back): on resume the secondary finds that stale connection queued
# before the good one, and must still end up connected.
wait_for node0 '.peers[0].connection != "Connected" and
                (.peers[0].last_error | test("hello|connect"))' 15
info "node0 failed to reconnect meanwhile: $(status_json node0 | jq -r '.peers[0].last_error')"

# Resume it: it reconnects and gets exactly the missed part.
kill -CONT "$pid1"
info "node1 resumed; $oos bytes out of sync"
wait_uptodate node0 30
st=$(status_json node0)
total=$(jq '.peers[0].resync_total_bytes' <<<"$st")
info "resynced $total bytes"
[ "$total" -ge "$oos" ] || fail "resync_total_bytes $total < out of sync $oos: $st"
[ "$total" -lt "$size" ] || fail "the whole volume was resynced ($total bytes)"
same_disks node0 node1
# Both sides agree the connection is up again.
wait_for node1 '.disk == "UpToDate" and .peers[0].connection == "Connected"' 10
info "ok"
