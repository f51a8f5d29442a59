#!/usr/bin/env bash
# What a crash of the primary resyncs on a volume no larger than the
# activity log (al-extents x al-extent-size, 4 GiB by default): no
# extent is ever evicted, so every extent written since the metadata
# was made stays active, across clean restarts, and a crash marks them
# all: here the whole 16 MiB device.  A smaller al-extents bounds it.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires nbdsh --version

# crash_marks AL_EXTENTS: write one block in each 4 MiB extent, stop
# cleanly, restart, kill -9, restart; set n and bytes to what is marked.
crash_marks ()
{
    rm -f "$tmpdir"/node*.img* "$tmpdir"/*.log
    make_config 2 C 16M
    [ -n "$1" ] && printf 'metadata:\n  al-extents: %s\n' "$1" >>"$CONFIG"
    start_node node0 role=primary
    start_node node1
    wait_uptodate node0 30
    timed 30 nbdsh -u "$(uri node0)" \
        -c 'for i in range(4): h.pwrite(b"y" * 4096, i * 4 * 1024 * 1024)' ||
        fail "writes through node0 failed"
    stop_node node1
    stop_node node0
    start_node node0 role=primary     # clean stop, clean start: no writes
    kill_node node0
    start_node node0 role=primary
    wait_log node0 "activity-log extent(s)"
    read -r n bytes < <(sed -n 's/.*: \([0-9]*\) activity-log extent(s) (\([0-9]*\) bytes) marked out of sync.*/\1 \2/p' \
        "$tmpdir/node0.log" | tail -n 1)
    stop_node node0
}

crash_marks ""
[ "$bytes" -eq $((16 << 20)) ] ||
    fail "default activity log: $n extents, $bytes bytes marked, expected the whole 16 MiB"
info "default al-extents (1024 x 4 MiB) on 16 MiB: a crash marks $n extents, $bytes bytes: the whole device"

crash_marks 2
[ "$n" -le 2 ] && [ "$bytes" -le $((8 << 20)) ] ||
    fail "al-extents: 2: $n extents, $bytes bytes marked, expected at most 2 (8 MiB)"
info "al-extents: 2: a crash marks $n extents, $bytes bytes"
