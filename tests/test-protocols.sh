#!/usr/bin/env bash
# Protocols A, B and C each converge: an nbdcopy through the primary
# ends up on the secondary (at once for C; soon after for A and B),
# and under every protocol a flush returns only once everything written
# before it is on the peer's disk.
source "$(dirname "$0")/functions.sh"
requires nbdcopy --version
requires jq --version
requires /usr/bin/python3 -c 'import nbd'

# timed SECS CMD...: CMD, which may be a shell function such as nbdsh,
# killed after SECS seconds (status 124).

size=32M
head -c "$size" /dev/urandom > "$tmpdir/data"

# Never leave the secondary stopped, however the test ends.
cleanup_fn 'if [ -n "${PID[node1]:-}" ]; then kill -CONT "${PID[node1]}"; fi'

for proto in A B C; do
    rm -f "$tmpdir"/node*.img
    make_config 2 "$proto" "$size"
    start_node node0 role=primary
    start_node node1
    wait_uptodate node0
    status_json node0 | jq -e ".protocol == \"$proto\"" >/dev/null ||
        fail "$proto: status does not show protocol $proto"

    timeout 60 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "$proto: nbdcopy failed"
    cmp "$tmpdir/data" "$(disk node0)" || fail "$proto: primary's disk differs from the data"
    if [ "$proto" = C ]; then
        cmp "$tmpdir/data" "$(disk node1)" ||
            fail "C: secondary's disk differs right after nbdcopy returned"
    else
        # A and B may complete a write before the peer has applied it,
        # but the data must arrive soon (bounded poll, 10 s).
        for (( i=0; i<100; i++ )); do
            cmp -s "$tmpdir/data" "$(disk node1)" && break
            sleep 0.1
        done
        cmp "$tmpdir/data" "$(disk node1)" ||
            fail "$proto: secondary's disk differs 10 s after nbdcopy returned"
    fi
    wait_uptodate node0 20
    same_disks node0 node1

    # Flush.  The secondary is stopped (SIGSTOP) for 1.5 s, well under
    # ping-timeout (3 s) and timeout (4 s), so it stays connected; while
    # it is stopped the client writes 64 non-overlapping ranges (no FUA)
    # and then flushes.  As soon as the flush returns, every range must
    # be on the secondary's disk, under every protocol.  Under A the
    # writes themselves complete while the secondary is stopped, so the
    # ranges are checked to be missing there before the flush: that
    # shows the flush is what waits.
    lines_before=$(wc -l < "$tmpdir/node0.log")
    timed 30 nbdsh -u "$(uri node0)" -c "
import os, random, signal, threading
proto, pid, d1 = '$proto', ${PID[node1]}, '$(disk node1)'
def peer_lacks():
    n = 0
    with open(d1, 'rb') as f1:
        for off, buf in writes:
            f1.seek(off)
            n += f1.read(len(buf)) != buf
    return n
slots = random.sample(range(h.get_size() // 65536), 64)
writes = [(s * 65536, os.urandom(4096 * (1 + i % 8) - 512 * (i % 3)))
          for i, s in enumerate(slots)]
resumed = threading.Event()
def resume():
    resumed.set()
    os.kill(pid, signal.SIGCONT)
os.kill(pid, signal.SIGSTOP)
# The stop takes effect asynchronously: wait (bounded) until every
# thread of the secondary is stopped before writing.
import glob, time
deadline = time.monotonic() + 5
while time.monotonic() < deadline:
    states = []
    for st in glob.glob('/proc/%d/task/*/stat' % pid):
        try:
            states.append(open(st).read().rsplit(')', 1)[1].split()[0])
        except OSError:
            pass
    if states and all(x == 'T' for x in states):
        break
    time.sleep(0.001)
else:
    raise AssertionError('the secondary did not stop within 5 s')
timer = threading.Timer(1.5, resume)
timer.start()
try:
    for off, buf in writes:
        h.aio_pwrite(buf, off)
    while h.aio_in_flight() > 0:
        h.poll(-1)
    if proto == 'A' and not resumed.is_set():
        lacks = peer_lacks()
        print(proto + ': before the flush the stopped peer lacks', lacks, 'of 64 ranges')
        assert lacks > 0, 'A: the stopped peer has all the data before the flush'
    h.flush()
    assert resumed.is_set(), 'flush returned while the peer was stopped'
    lacks = peer_lacks()
    assert lacks == 0, '%s: %d ranges missing on the peer right after flush' % (proto, lacks)
finally:
    timer.cancel()
    os.kill(pid, signal.SIGCONT)
" || fail "$proto: flush did not make the writes durable on the peer"
    # The secondary stayed connected throughout, so the flush covered it.
    if tail -n +"$((lines_before + 1))" "$tmpdir/node0.log" | grep -q disconnect; then
        fail "$proto: the secondary was disconnected during the flush test"
    fi
    same_disks node0 node1

    status_json node0 | jq -e '.writes > 64 and .peers[0].connection == "Connected"' \
        >/dev/null || fail "$proto: status after the writes: $(status_json node0)"
    info "$proto: ok"
    stop_node node1
    stop_node node0
done
info "ok"
