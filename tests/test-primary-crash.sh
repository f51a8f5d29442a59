#!/usr/bin/env bash
# The primary crashes (SIGKILL) under a write load and is restarted as
# primary: it finds that it did not stop cleanly, marks the extents of
# its activity log out of sync for its peer, and resyncs exactly those;
# not the whole volume, and not nothing.  Afterwards both disks are
# identical.
#
# The load writes only in the first 32 MiB of a 256 MiB volume, so with
# the default 4 MiB activity-log extents at most 8 extents are active
# when the primary dies.
source "$(dirname "$0")/functions.sh"
requires fio --version
requires jq --version

size=$((256 << 20))
region=$((32 << 20))
extent=$((4 << 20))             # MD_DEFAULT_AL_EXTENT_SIZE
make_config 2 C 256M
start_node node0 role=primary
start_node node1
wait_uptodate node0

# A bounded load in the first 32 MiB: 10 s and 2 GiB per job at most
# (not time_based, which would ignore io_size).  Its client loses its
# server in the middle, so fio's errors are expected; only its end is
# waited for.
timeout 60 \
    fio --name=load --ioengine=nbd --uri="$(uri node0)" \
        --rw=randwrite --bsrange=4k-64k --offset=0 --size=32M \
        --numjobs=2 --iodepth=8 --norandommap=1 --refill_buffers=1 \
        --io_size=2G --runtime=10 \
        --output="$tmpdir/fio.out" >/dev/null 2>&1 &
fio_pid=$!
cleanup_fn 'if [ -n "$fio_pid" ]; then kill "$fio_pid"; wait "$fio_pid"; fi'

wait_for node0 '.writes > 3000' 20
kill -0 "$fio_pid" 2>/dev/null || fail "fio ended before the primary was killed"
kill_node node0
info "killed the primary under load"
wait "$fio_pid" || true
fio_pid=

# node1 notices that its primary is gone and waits for it to come back
# ("Connecting": its receive loop, which applies the primary's writes,
# has ended).
wait_for node1 '.peers[0].connection == "Connecting"' 10

# Stand in for the writes the primary made and node1 never got: a block
# inside the region the load wrote, changed on node1's disk behind its
# back (nothing writes to it now: its primary is gone).  Only a resync
# of the activity-log extents brings it back.
printf 'not what the primary wrote\n%.0s' {1..200} |
    dd of="$(disk node1)" bs=4096 count=1 seek=$(( (5 << 20) / 4096 )) \
       conv=notrunc iflag=fullblock status=none
if cmp -s "$(disk node0)" "$(disk node1)"; then
    fail "the disks are identical before the restart: the test would prove nothing"
fi

# The primary comes back.
start_node node0 role=primary
line=$(grep -E "did not stop cleanly \(it was Primary\): [0-9]+ activity-log extent\(s\) \([0-9]+ bytes\) marked out of sync for every peer" \
            "$tmpdir/node0.log") ||
    fail "node0's log does not say it crashed as primary and marked its activity log"
info "node0 after the crash: ${line#*did not stop cleanly }"
[[ $line =~ :\ ([0-9]+)\ activity-log\ extent\(s\)\ \(([0-9]+)\ bytes\) ]] ||
    fail "cannot parse '$line'"
nextents=${BASH_REMATCH[1]}
marked=${BASH_REMATCH[2]}
[ "$nextents" -gt 0 ] || fail "no activity-log extent marked after a crash under load"
[ "$marked" -eq $(( nextents * extent )) ] ||
    fail "$nextents extents of 4 MiB are not $marked bytes"
# The load touched 8 extents; nothing else was written since the
# initial sync (which does not go through the primary's activity log).
[ "$marked" -le "$region" ] ||
    fail "$nextents extents ($marked bytes) marked, more than the $region bytes the load wrote to"
status_json node0 | jq -e '.last_stop == "unclean"' >/dev/null ||
    fail "node0's status does not say its last stop was unclean"

# The resync: bitmap-based, from the restarted primary, no more than the
# activity log covers.
wait_uptodate node0 60
# (rule 41/44: same generation, a crashed primary; rule 70: the restarted
# primary began a new generation since its peer was away at start)
grep generations "$tmpdir/node0.log" | tail -n 1 |
    grep -qE "peer node1: generations: sync-source-bitmap \(rule (41|44|70): " ||
    fail "node0 did not decide on a bitmap-based resync as the source: $(grep generations "$tmpdir/node0.log" | tail -n 1)"
st=$(status_json node0)
total=$(jq '.peers[0].resync_total_bytes' <<<"$st")
info "resync after the crash: $total bytes ($nextents extents, $marked bytes marked)"
[ "$total" -gt 0 ] || fail "nothing was resynced after the primary crashed: $st"
[ "$total" -le "$marked" ] ||
    fail "resync_total_bytes $total is more than the $marked bytes of the activity log"
[ "$total" -lt "$size" ] || fail "the whole volume was resynced ($total bytes)"
[ "$(grep -c "peer node1: resync started, " "$tmpdir/node0.log")" -eq 2 ] ||
    fail "node0's log does not show exactly two resyncs (the initial one and this one)"
grep -q "peer node1: resync started, $total bytes out of sync" "$tmpdir/node0.log" ||
    fail "node0's log does not show the resync of $total bytes"

same_disks node0 node1
info "ok"
