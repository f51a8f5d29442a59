#!/usr/bin/env bash
# How much a secondary that crashed (SIGKILL) gets resynced: what was
# written while it was away, rounded to 4 KiB chunks, and nothing more.
# tests/test-secondary-kill.sh checks that the resync is smaller than
# the volume and at least what the primary shows out of sync; this test
# pins the amount down:
#  - during a load that runs on through the crash, the primary marks at
#    most the chunks the load wrote (fio's I/O log says which);
#  - a known set of writes, trims and zeroes made while the secondary
#    is away adds exactly their chunk-rounded size;
#  - the process crash of a secondary adds nothing (its page cache
#    survives): the resync is exactly what the primary had out of sync.
source "$(dirname "$0")/functions.sh"
requires fio --version
requires jq --version
requires /usr/bin/python3 -c 'import nbd'

chunk=4096
make_config 2 C 128M
start_node node0 role=primary
start_node node1
wait_uptodate node0

# A bounded load on the first 32 MiB: 3000 requests of 4 KiB on average
# at 2 MB/s (so about 6 s; 20 s at most), small enough not to touch
# every chunk; fio logs every write it issues.  (Not time_based: fio
# ignores number_ios then; and rate_iops with a bsrange counts the
# smallest size.)
iolog="$tmpdir/fio.iolog"
timeout 60 \
    fio --name=load --ioengine=nbd --uri="$(uri node0)" \
        --rw=randwrite --bsrange=1-8k --bs_unaligned=1 --blockalign=1 \
        --size=32M --iodepth=16 --norandommap=1 --refill_buffers=1 \
        --number_ios=3000 --rate=2m --runtime=20 \
        --write_iolog="$iolog" \
        --output-format=json --output="$tmpdir/fio.json" &
fio_pid=$!
cleanup_fn 'if [ -n "$fio_pid" ]; then kill "$fio_pid"; wait "$fio_pid"; fi'
wait_for node0 '.writes > 1000' 20
kill -0 "$fio_pid" 2>/dev/null || fail "fio ended before the secondary was killed"
kill_node node1
# The moment the primary shows node1 gone, and how many writes it had
# then: every write fio issued after the first writes_gone + 16 (its
# queue depth) reached the primary with node1 known to be away.
for (( i=0; i<100; i++ )); do
    st=$(status_json node0)
    jq -e '.peers[0].connection != "Connected"' <<<"$st" >/dev/null && break
    sleep 0.1
done
jq -e '.peers[0].connection != "Connected"' <<<"$st" >/dev/null ||
    fail "node0 still shows node1 connected 10 s after it was killed"
writes_gone=$(jq .writes <<<"$st")
wait_for node0 ".writes > $writes_gone + 500" 10
fio_status=0
wait "$fio_pid" || fio_status=$?
fio_pid=
[ "$fio_status" -eq 0 ] || fail "fio exited with status $fio_status"
jq -e '[.jobs[] | .error == 0] | all' "$tmpdir/fio.json" >/dev/null ||
    fail "fio reported errors"

# The primary marked at most the chunks the whole load wrote to, and at
# least those written after it knew node1 was gone.
oos_load=$(status_json node0 | jq '.peers[0].out_of_sync_bytes')
read -r touched after < <(/usr/bin/python3 - "$iolog" $(( writes_gone + 16 )) <<'EOF'
import sys
writes = []
for line in open(sys.argv[1]):
    # version 3: "TIME FILE write OFFSET LENGTH"; version 2 without TIME
    f = line.split()
    if len(f) >= 4 and f[-3] == "write":
        w = (int(f[-2]), int(f[-1]))
        if not writes or writes[-1] != w:    # a requeue is logged twice
            writes.append(w)
def chunk_bytes(ws):
    chunks = set()
    for off, n in ws:
        chunks.update(range(off // 4096, (off + n - 1) // 4096 + 1))
    return len(chunks) * 4096
print(chunk_bytes(writes), chunk_bytes(writes[int(sys.argv[2]):]))
EOF
)
info "load: $oos_load bytes out of sync; fio's writes touched $touched bytes of chunks, $after after node1 was gone"
[ "$oos_load" -gt 0 ] || fail "nothing out of sync after writes with the secondary away"
[ $(( oos_load % chunk )) -eq 0 ] || fail "out_of_sync_bytes $oos_load is not whole chunks"
[ "$after" -gt 0 ] || fail "no writes in fio's I/O log after node1 was gone"
[ "$oos_load" -le "$touched" ] ||
    fail "$oos_load bytes out of sync, more than the $touched bytes of chunks fio wrote"
[ "$oos_load" -ge "$after" ] ||
    fail "$oos_load bytes out of sync, less than the $after bytes of chunks written after node1 was gone"

# Known requests with the secondary away, in 64..80 MiB (the load never
# went there): unaligned, crossing chunk boundaries, overlapping each
# other, and a trim and a zero.  Each adds its chunks, rounded out.
timed 30 nbdsh -u "$(uri node0)" -c "
base = 64 << 20
h.pwrite(b'a' * 1, base + 100)                    # chunk 0
h.pwrite(b'b' * 4096, base + 4096 - 1)            # chunks 0, 1
h.pwrite(b'c' * 10000, base + 3 * 4096 + 5)       # chunks 3..5
h.pwrite(b'd' * 4096, base + 4 * 4096)            # chunk 4 (again)
h.pwrite(b'e' * 65536, base + (1 << 20))          # 16 chunks
h.trim(8192, base + (2 << 20))                    # 2 chunks
h.zero(4096 * 3 + 2, base + (3 << 20) - 1)        # 5 chunks
h.flush()
" || fail "the known writes through node0 failed"
expected=$(( (2 + 3 + 16 + 2 + 5) * chunk ))
oos=$(status_json node0 | jq '.peers[0].out_of_sync_bytes')
info "known requests: $(( oos - oos_load )) bytes out of sync (expected $expected)"
[ $(( oos - oos_load )) -eq "$expected" ] ||
    fail "the known requests added $(( oos - oos_load )) bytes out of sync, not $expected"

# The secondary comes back: the resync is exactly what was out of sync.
start_node node1
wait_uptodate node0
total=$(status_json node0 | jq '.peers[0].resync_total_bytes')
info "resync: $total bytes"
[ "$total" -eq "$oos" ] ||
    fail "resync_total_bytes $total, but $oos bytes were out of sync"
grep -q "peer node1: resync started, $oos bytes out of sync" "$tmpdir/node0.log" ||
    fail "node0's log does not show the resync of $oos bytes"
grep -q "did not stop cleanly, but the machine did not restart" "$tmpdir/node1.log" ||
    fail "node1's log does not say it found a process crash"
status_json node1 | jq -e '.last_stop == "unclean"' >/dev/null ||
    fail "node1's status does not say its last stop was unclean"
same_disks node0 node1
info "ok"
