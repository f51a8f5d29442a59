#!/usr/bin/env bash
# Disk errors, injected with tests/fault-inject.c:
#  1. the primary's own disk fails a write the secondary already applied:
#     the client gets EIO, and the secondary is brought back to the
#     primary's content (replicas never silently differ);
#  2. the secondary's disk is slow and then fails: the primary goes on
#     serving, the secondary neither hangs nor refuses to stop, and once
#     its disk is healthy again a resync makes the replicas identical.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires test -f "$FAULT_INJECT"

bad=$((8 << 20))
make_config 2 C 64M

# ---- 1. the primary's disk fails -----------------------------------------
FAULT_PWRITE_OFFSET=$bad LD_PRELOAD="$FAULT_INJECT" start_node node0 role=primary
start_node node1
wait_uptodate node0

out=$(timed 30 nbdsh -u "$(uri node0)" -c "
try:
    h.pwrite(b'x' * 4096, $bad)
    print('succeeded')
except nbd.Error as e:
    print('failed:', e.errno)
")
[ "$out" = "failed: EIO" ] || fail "client: expected EIO from the failed local write, got '$out'"
grep -q "pwrite at $bad: Input/output error" "$tmpdir/node0.log" ||
    fail "the primary did not log the disk error"
# The secondary applied the write; the primary must give it its own
# content back.
wait_uptodate node0 30
same_disks node0 node1
info "1: failed local write: client got EIO, replicas identical"
stop_node node0
stop_node node1

# ---- 2. the secondary's disk fails, slowly --------------------------------
# Both nodes start from new metadata, so the primary declares its data
# authoritative and sends everything: a full sync.
rm -f "$(disk node0).meta" "$(disk node1).meta"
# Data (not zeroes, which a resync sends as a command) where the
# secondary's bad sector is.
head -c 1M /dev/urandom | dd of="$(disk node0)" bs=1M seek=$((bad >> 20)) conv=notrunc status=none
start_node node0 role=primary
FAULT_PWRITE_OFFSET=$bad FAULT_PWRITE_SLEEP_MS=4000 LD_PRELOAD="$FAULT_INJECT" start_node node1
# The initial full resync runs into the bad sector on node1.
for (( i=0; i<300; i++ )); do
    grep -Eq "write( \(splice\))? at [0-9]+: Input/output error" "$tmpdir/node1.log" && break
    sleep 0.1
done
# (a resync chunk arrives either whole, and is written with pwrite, or
# partly, and the rest is spliced from the socket to the disk)
grep -Eq "write( \(splice\))? at [0-9]+: Input/output error" "$tmpdir/node1.log" ||
    fail "node1 did not hit the injected error"

# The primary serves writes meanwhile, whatever the peer's state.
timed 30 nbdsh -u "$(uri node0)" -c "
for i in range(64):
    h.pwrite(bytes([i]) * 65536, (32 << 20) + i * 65536)
h.flush()
" || fail "writes through the primary failed while the secondary's disk was failing"

# The sick secondary stops promptly on SIGTERM.
pid=${PID[node1]}
t0=$(date +%s%N)
kill "$pid"
for (( i=0; i<100; i++ )); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"
    fail "node1 still running 10 s after SIGTERM"
fi
wait "$pid" 2>/dev/null || true
PID[node1]=
info "2: sick secondary stopped in $(( ($(date +%s%N) - t0) / 1000000 )) ms"

# With a healthy disk it catches up.
start_node node1
wait_uptodate node0 60
same_disks node0 node1
info "ok"
