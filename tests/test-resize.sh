#!/usr/bin/env bash
# Online grow (replctl resize), with 2 and then 3 nodes: the volume
# grows from 64 MiB to 128 MiB while tests/ackwrite writes on the first
# 64 MiB through the primary, with one node down during the resize.
# Every disk's new area holds different garbage before (a grown logical
# volume holds whatever was there), so identical disks at the end mean
# the new area was resynced, to the node that was down too (it learns
# the size when it returns).  A new NBD connection sees 128 MiB and
# reads the new area; the writer never sees an error; every write it
# got acknowledged is on every disk.  Shrinking and growing to nothing
# more are refused with the reason.  Last, --assume-clean grows two
# nodes without a resync.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires nbdinfo --version
requires nbdcopy --version

ACKWRITE="$builddir/tests/ackwrite"
ACKCHECK="$(dirname "$0")/ackcheck.py"
[ -x "$ACKWRITE" ] || fail "$ACKWRITE is not built (make tests/ackwrite)"

small=$((64 << 20))
big=$((128 << 20))

run ()
{
    local n=$1 down="node$(( $1 - 1 ))" i out pid st
    local log="$tmpdir/ack-$n.log"

    info "--- $n nodes, $down down during the resize"
    rm -f "$tmpdir"/node*.img "$tmpdir"/node*.img.meta     # the last run's
    make_config "$n" C 64M
    start_node node0 role=primary
    for (( i=1; i<n; i++ )); do start_node "node$i"; done
    wait_uptodate node0

    # The writer: QD1 on the 16384 blocks of the first 64 MiB, stopping
    # at its first failure (-1), for at most 60 s (it is stopped below).
    "$ACKWRITE" -l "$log" -f 0 -c 16384 -t 60 -1 "$(uri node0)" \
        >"$tmpdir/ackwrite-$n.out" 2>&1 &
    pid=$!
    cleanup_fn "kill $pid 2>/dev/null || true"
    w0=$(status_json node0 | jq .writes)
    wait_for node0 ".writes > $w0 + 200" 20

    kill_node "$down"
    wait_for node0 "[.peers[] | select(.name == \"$down\") |
                     .connection != \"Connected\"] | all" 15

    # Refused before anything is grown: no disk is larger yet.
    out=$("$REPLCTL" -s "$(sock node0)" resize 2>&1) &&
        fail "resize with no disk grown succeeded: $out"
    grep -q "nothing to grow" <<<"$out" || fail "resize said: $out"

    # Grow every backing file, the new area full of garbage of its own.
    for (( i=0; i<n; i++ )); do
        dd if=/dev/urandom of="$(disk "node$i")" bs=1M seek=64 count=64 \
           conv=notrunc status=none
        [ "$(stat -c %s "$(disk "node$i")")" -eq "$big" ] ||
            fail "disk of node$i did not grow"
    done
    ! cmp -s "$(disk node0)" "$(disk node1)" ||
        fail "the new areas are the same before the resize"

    out=$("$REPLCTL" -s "$(sock node0)" resize --size 32M 2>&1) &&
        fail "shrinking succeeded: $out"
    grep -q "shrinking is not supported" <<<"$out" || fail "resize said: $out"

    out=$("$REPLCTL" -s "$(sock node0)" resize 2>&1) ||
        fail "resize failed: $out"
    info "$out"
    grep -q "from $small to $big bytes" <<<"$out" || fail "resize said: $out"
    grep -q "away (they grow when they connect): $down" <<<"$out" ||
        fail "resize did not name $down as away: $out"

    # Every node that is up has the new size; new connections see it.
    for (( i=0; i<n-1; i++ )); do
        wait_for "node$i" ".size == $big" 10
    done
    [ "$(nbdinfo --size "$(uri node0)")" -eq "$big" ] ||
        fail "a new connection does not see $big bytes"
    kill -0 "$pid" 2>/dev/null || fail "the writer ended during the resize: $(tail -n 3 "$tmpdir/ackwrite-$n.out")"

    # The node that was down returns with its disk grown: it takes the
    # new size at its handshake and gets the new area by resync.
    start_node "$down"
    wait_uptodate node0 60
    wait_for "$down" ".size == $big" 10
    grep -q "our volume grew from $small to $big bytes" "$tmpdir/$down.log" ||
        fail "$down's log does not show it growing at its return"
    w0=$(status_json node0 | jq .writes)
    wait_for node0 ".writes > $w0 + 100" 20

    # Stop the writer: it must have seen no failure.
    kill -TERM "$pid"
    st=0
    wait "$pid" || st=$?
    [ "$st" -eq 0 ] || fail "the writer failed (status $st): $(tail -n 3 "$tmpdir/ackwrite-$n.out")"
    ! grep -q "^fail " "$log" || fail "the writer logged a failure: $(grep -m1 '^fail ' "$log")"
    info "writer: $(grep -c '^ack ' "$log") acknowledged writes"
    wait_uptodate node0 30

    # The new area through a new connection, and the disks.
    nbdcopy "$(uri node0)" "$tmpdir/export.img"
    [ "$(stat -c %s "$tmpdir/export.img")" -eq "$big" ] ||
        fail "the export copied is not $big bytes"
    cmp "$tmpdir/export.img" "$(disk node0)" ||
        fail "what a client reads differs from node0's disk"
    rm -f "$tmpdir/export.img"
    for (( i=1; i<n; i++ )); do same_disks node0 "node$i"; done
    # Every acknowledged write is there (the first 64 MiB: the rest is
    # the resynced garbage, which ackcheck would call foreign).
    for (( i=0; i<n; i++ )); do
        head -c "$small" "$(disk "node$i")" > "$tmpdir/first-$i.img"
    done
    python3 "$ACKCHECK" --log "$log" "$tmpdir"/first-*.img ||
        fail "ackcheck found acknowledged writes missing"
    rm -f "$tmpdir"/first-*.img

    out=$("$REPLCTL" -s "$(sock node0)" resize 2>&1) &&
        fail "a second resize with nothing to grow succeeded: $out"
    grep -q "nothing to grow" <<<"$out" || fail "resize said: $out"

    for (( i=0; i<n; i++ )); do stop_node "node$i"; done
    # Restarted, every node keeps the size (the metadata says it).
    start_node node0
    wait_for node0 ".size == $big" 10
    stop_node node0
}

# --assume-clean: two nodes up, the new areas grown as zeroes on both
# (truncate): nothing is marked, nothing resynced, the disks are equal.
assume_clean ()
{
    local out lines
    info "--- --assume-clean"
    rm -f "$tmpdir"/node*.img "$tmpdir"/node*.img.meta
    make_config 2 C 64M
    start_node node0 role=primary
    start_node node1
    wait_uptodate node0
    truncate -s 128M "$(disk node0)" "$(disk node1)"
    lines=$(wc -l < "$tmpdir/node0.log")        # the log of every run
    out=$("$REPLCTL" -s "$(sock node0)" resize --assume-clean 2>&1) ||
        fail "resize --assume-clean failed: $out"
    grep -q "the new area is assumed clean" <<<"$out" || fail "resize said: $out"
    wait_for node1 ".size == $big" 10
    status_json node0 | jq -e ".size == $big and
        .peers[0].connection == \"Connected\" and
        .peers[0].out_of_sync_bytes == 0 and
        .peers[0].replication == \"Established\"" >/dev/null ||
        fail "after resize --assume-clean: $(status_json node0)"
    ! tail -n +"$((lines + 1))" "$tmpdir/node0.log" | grep -q "resync started" ||
        fail "resize --assume-clean resynced the new area"
    same_disks node0 node1
    stop_node node1
    stop_node node0
}

run 2
run 3
assume_clean
info "ok"
