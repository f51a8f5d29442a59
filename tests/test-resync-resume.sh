#!/usr/bin/env bash
# A resync interrupted by a crash of its target resumes where it was:
# a fresh secondary joins a primary whose 1 GiB disk is full of data,
# is killed (SIGKILL) in the middle of its initial full sync, and comes
# back.  The second resync is bitmap-based and sends only what the
# first did not finish; then both disks are identical.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires openssl version

size=$((1 << 30))
make_config 2 C 1G
# Data everywhere on the primary's disk (no two blocks alike), so that a
# block the resync skips or puts in the wrong place shows in same_disks.
head -c "$size" /dev/zero |
    openssl enc -aes-128-ctr -pass pass:nbdrepl -nosalt -pbkdf2 2>/dev/null |
    dd of="$(disk node0)" bs=1M conv=notrunc iflag=fullblock status=none
[ "$(stat -c %s "$(disk node0)")" -eq "$size" ] || fail "node0's disk is not $size bytes"
cmp -s -n 1M "$(disk node0)" /dev/zero && fail "node0's disk starts with zeroes"

start_node node0 role=primary
start_node node1
# Kill node1 once a good part (40%) of the full sync is done, but not all.
wait_for node0 '.peers[0].replication == "SyncSource" and
                .peers[0].resync_total_bytes == '"$size"' and
                .peers[0].resync_done_bytes >= '"$((size * 2 / 5))" 30
kill_node node1
st=$(status_json node0)
done1=$(jq '.peers[0].resync_done_bytes' <<<"$st")
info "killed node1 after $done1 of $size bytes of the full sync"
[ "$done1" -lt "$size" ] || fail "the full sync ended before node1 was killed: $st"
grep -q "peer node1: resync started, $size bytes out of sync" "$tmpdir/node0.log" ||
    fail "node0's log does not show the first resync as a full one of $size bytes"
grep -q "peer node1: resync finished" "$tmpdir/node0.log" &&
    fail "the first resync finished: nothing to resume"
wait_for node0 '.peers[0].connection != "Connected"' 10
oos=$(status_json node0 | jq '.peers[0].out_of_sync_bytes')
info "out of sync with node1 down: $oos bytes"
[ "$oos" -lt "$size" ] || fail "the primary forgot the resync's progress: $oos bytes out of sync"

# node1 comes back: the resync resumes.
start_node node1
wait_uptodate node0 60
st=$(status_json node0)
total=$(jq '.peers[0].resync_total_bytes' <<<"$st")
info "second resync: $total bytes"
[ "$(grep -c "peer node1: resync started, " "$tmpdir/node0.log")" -eq 2 ] ||
    fail "node0's log does not show exactly two resyncs"
grep -q "peer node1: resync started, $total bytes out of sync" "$tmpdir/node0.log" ||
    fail "node0's log does not show the second resync of $total bytes"
[ "$(grep -c "peer node1: generations: sync-source-full" "$tmpdir/node0.log")" -eq 1 ] ||
    fail "the second connection decided on a full sync again: $(grep generations "$tmpdir/node0.log" | tail -n 1)"
[ "$total" -gt 0 ] || fail "nothing was resynced after node1 came back: $st"
# Resumed, not started again: what the first resync had done is not
# sent again.  Exactly what is left is what the primary had out of sync
# ($oos bytes); a target that records its progress lazily may lose a
# little of it, but keeps at least half.
[ "$total" -lt "$size" ] ||
    fail "the second resync ($total bytes) is as big as the first: it started again rather than resumed"
[ "$total" -le $(( size - done1 / 2 )) ] ||
    fail "the second resync ($total bytes) resent most of what the first had done ($done1 of $size bytes; $oos were left)"
grep -q "peer node1: resync finished" "$tmpdir/node0.log" ||
    fail "node0's log does not show the end of the resync"
wait_for node1 '.disk == "UpToDate" and .peers[0].connection == "Connected"' 10

same_disks node0 node1
info "ok"
