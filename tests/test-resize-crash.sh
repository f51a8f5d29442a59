#!/usr/bin/env bash
# A node killed in the middle of growing its metadata (replctl resize)
# restarts, with the old size or the new one and never a mix, and ends
# in sync.  The hook NBDREPL_TEST_RESIZE_CRASH (server/resize.c) kills
# the process (SIGKILL) right before the superblock with the new size
# is written (before-commit) or right after it is durable
# (after-commit).  Three rounds, 2 nodes, a writer on the first 64 MiB:
#   1. the secondary dies before its commit: it restarts at 64 MiB and
#      learns 128 MiB from the primary at its handshake;
#   2. the secondary dies after its commit: it restarts at 128 MiB;
#   3. the primary (which runs the resize) dies after its commit, before
#      it told the secondary: it restarts at 128 MiB as a crashed
#      primary and the secondary grows at the handshake.
# Each time: the disks end identical (their new areas held different
# garbage), a new connection sees 128 MiB, acknowledged writes are all
# there.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires nbdinfo --version

ACKWRITE="$builddir/tests/ackwrite"
ACKCHECK="$(dirname "$0")/ackcheck.py"
[ -x "$ACKWRITE" ] || fail "$ACKWRITE is not built (make tests/ackwrite)"

small=$((64 << 20))
big=$((128 << 20))

# round N VICTIM POINT: VICTIM (node0, the primary, or node1) is killed
# at POINT of its growth.
round ()
{
    local r=$1 victim=$2 point=$3 i out pid st size
    local log="$tmpdir/ack-$r.log"

    info "--- round $r: $victim killed $point"
    rm -f "$tmpdir"/node*.img "$tmpdir"/node*.img.meta
    make_config 2 C 64M
    if [ "$victim" = node0 ]; then
        NBDREPL_TEST_RESIZE_CRASH=$point start_node node0 role=primary
        start_node node1
    else
        start_node node0 role=primary
        NBDREPL_TEST_RESIZE_CRASH=$point start_node node1
    fi
    wait_uptodate node0

    "$ACKWRITE" -l "$log" -f 0 -c 16384 -t 60 "$(uri node0)" \
        >"$tmpdir/ackwrite-$r.out" 2>&1 &
    pid=$!
    cleanup_fn "kill $pid 2>/dev/null || true"
    w0=$(status_json node0 | jq .writes)
    wait_for node0 ".writes > $w0 + 200" 20

    for i in 0 1; do
        dd if=/dev/urandom of="$(disk "node$i")" bs=1M seek=64 count=64 \
           conv=notrunc status=none
    done

    # The victim dies in the middle of it.  The command's answer depends
    # on who died; the state afterwards does not.
    out=$("$REPLCTL" -s "$(sock node0)" resize 2>&1) || true
    info "resize said: $out"
    for (( i=0; i<100; i++ )); do
        kill -0 "${PID[$victim]}" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "${PID[$victim]}" 2>/dev/null &&
        fail "$victim is still running: the hook did not fire"
    wait "${PID[$victim]}" 2>/dev/null || true
    PID[$victim]=
    grep -q "NBDREPL_TEST_RESIZE_CRASH=$point: killing the process" \
        "$tmpdir/$victim.log" || fail "$victim did not die at $point"

    # What its metadata says now: the old size before the commit, the
    # new one after, a valid superblock either way.
    size=$("$REPLCTL" -c "$CONFIG" -n "$victim" dump-md |
           sed -n 's/^size: \([0-9]*\) .*/\1/p')
    if [ "$point" = before-commit ]; then
        [ "$size" = "$small" ] || fail "$victim's metadata says $size bytes after a crash before the commit"
    else
        [ "$size" = "$big" ] || fail "$victim's metadata says $size bytes after a crash after the commit"
    fi
    info "$victim's metadata after the crash: $size bytes"

    # Back without the hook: both end at 128 MiB and in sync.
    if [ "$victim" = node0 ]; then
        # The writer lost its server; it reconnects to node0 once it is
        # back (role=primary: it was primary, node1 is Outdated or the
        # same generation).
        start_node node0 role=primary
    else
        start_node node1
    fi
    wait_for node0 ".size == $big" 20
    wait_for node1 ".size == $big" 20
    wait_uptodate node0 60
    w0=$(status_json node0 | jq .writes)
    wait_for node0 ".writes > $w0 + 100" 30
    kill -TERM "$pid"
    st=0
    wait "$pid" || st=$?
    [ "$st" -eq 0 ] || fail "the writer failed (status $st)"
    wait_uptodate node0 30
    [ "$(nbdinfo --size "$(uri node0)")" -eq "$big" ] ||
        fail "a new connection does not see $big bytes"
    same_disks node0 node1
    for i in 0 1; do
        head -c "$small" "$(disk "node$i")" > "$tmpdir/first-$i.img"
    done
    python3 "$ACKCHECK" --log "$log" "$tmpdir"/first-*.img ||
        fail "ackcheck found acknowledged writes missing"
    rm -f "$tmpdir"/first-*.img
    stop_node node0
    stop_node node1
}

round 1 node1 before-commit
round 2 node1 after-commit
round 3 node0 after-commit
info "ok"
