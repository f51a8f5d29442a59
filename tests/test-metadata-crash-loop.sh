#!/usr/bin/env bash
# Crash safety of the metadata: the primary is killed (SIGKILL) again
# and again at random moments of a write load that keeps its activity
# log busy, its secondary away.  After every crash the metadata must
# read cleanly (replctl dump-md) and the node must start again; at the
# end the secondary comes back, and the bitmap-based resync, which only
# knows what the crashed runs wrote from the bitmap and activity log on
# disk, must make both disks identical.
#
# The activity log is made tiny (8 extents of 4 MiB for a 512 MiB
# volume, with the configuration's metadata: section) and the load
# writes all over the volume, so nearly every write evicts an extent:
# a data flush, bitmap pages and an activity-log transaction.
source "$(dirname "$0")/functions.sh"
requires fio --version
requires jq --version

al_extents=8
make_config 2 C 512M
cat >> "$CONFIG" <<EOF
metadata:
  al-extent-size: 4M
  al-extents: $al_extents
EOF

start_node node0 role=primary
start_node node1
wait_uptodate node0 60
"$REPLCTL" -c "$CONFIG" -n node0 dump-md > "$tmpdir/md0.txt" ||
    fail "dump-md of node0 failed"
grep -q "^activity-log: $al_extents extents of 4.0 MiB" "$tmpdir/md0.txt" ||
    fail "node0's metadata does not have the configured activity log: $(grep '^activity-log:' "$tmpdir/md0.txt")"
# The secondary goes away: everything written from now on is only in
# node0's bitmap for it (on disk: the pages written when extents leave
# the activity log, and the activity log itself).
stop_node node1

# al_seq: the sequence number of node0's last activity-log transaction.
al_seq ()
{
    sed -n 's/^activity-log-transaction: seq \([0-9]*\) .*/\1/p' "$tmpdir/md0.txt"
}
seq0=$(al_seq)
[ -n "$seq0" ] || fail "no activity-log transaction in dump-md: $(cat "$tmpdir/md0.txt")"

iterations=20
crashes=0
writes_total=0
t_end=$(( $(date +%s) + 45 ))
fio_pid=
cleanup_fn 'if [ -n "$fio_pid" ]; then kill "$fio_pid"; wait "$fio_pid"; fi'
for (( i=1; i<=iterations; i++ )); do
    # At least 10 crashes however slow the machine (each is bounded by
    # fio's timeout and the wait below); more while 45 s last.
    if [ "$(date +%s)" -ge "$t_end" ] && [ "$crashes" -ge 10 ]; then
        break
    fi
    # Random 4 KiB writes all over the volume, at most 10 s and 1 GiB
    # (not time_based, which would ignore io_size); the job dies with
    # its server.
    timeout 30 \
        fio --name=load --ioengine=nbd --uri="$(uri node0)" \
            --rw=randwrite --bs=4k --size=512M --iodepth=4 \
            --norandommap=1 --refill_buffers=1 \
            --io_size=1G --runtime=10 \
            --output=/dev/null >/dev/null 2>&1 &
    fio_pid=$!
    # A random moment: after 0 to 299 writes of this run.
    target=$(( RANDOM % 300 ))
    wait_for node0 ".writes >= $target" 20
    writes=$(status_json node0 | jq .writes) || writes=$target
    kill_node node0
    wait "$fio_pid" || true
    fio_pid=
    crashes=$((crashes + 1))
    writes_total=$((writes_total + writes))

    # The metadata reads cleanly, and says the node did not stop cleanly.
    "$REPLCTL" -c "$CONFIG" -n node0 dump-md > "$tmpdir/md0.txt" 2>"$tmpdir/md0.err" ||
        fail "crash $i (after about $writes writes): dump-md failed: $(cat "$tmpdir/md0.err")"
    [ ! -s "$tmpdir/md0.err" ] ||
        fail "crash $i: dump-md complained: $(cat "$tmpdir/md0.err")"
    flags=$(sed -n 's/^flags: //p' "$tmpdir/md0.txt")
    [[ " $flags " != *" clean "* ]] ||
        fail "crash $i: the metadata says the node stopped cleanly: $flags"
    [[ " $flags " == *" primary "* ]] ||
        fail "crash $i: the metadata does not say the node was primary: $flags"
    nactive=$(sed -n 's/^activity-log-transaction: .*, \([0-9]*\) active extents$/\1/p' "$tmpdir/md0.txt")
    [ -n "$nactive" ] && [ "$nactive" -le "$al_extents" ] ||
        fail "crash $i: active extents '$nactive' (at most $al_extents)"

    # And the node starts again, having marked its activity log.
    start_node node0 role=primary
    [ "$(grep -c "did not stop cleanly (it was Primary): " "$tmpdir/node0.log")" -eq "$crashes" ] ||
        fail "crash $i: node0's log does not show $crashes restarts after a crash"
    grep "did not stop cleanly (it was Primary): " "$tmpdir/node0.log" | tail -n 1 |
        grep -qE ": $nactive activity-log extent\(s\) \($(( nactive << 22 )) bytes\)" ||
        fail "crash $i: the restart did not mark the $nactive extents dump-md showed: $(grep "did not stop cleanly" "$tmpdir/node0.log" | tail -n 1)"
    status_json node0 | jq -e '.role == "Primary" and .disk == "UpToDate" and
                               .last_stop == "unclean"' >/dev/null ||
        fail "crash $i: node0 is not an UpToDate primary that knows it crashed: $(status_json node0)"
done
info "$crashes crashes, about $writes_total writes in all"
[ "$writes_total" -ge 1000 ] || fail "only $writes_total writes during the crash loop"
seq1=$(al_seq)
info "activity-log transactions: seq $seq0 -> $seq1"
[ "$seq1" -ge $(( seq0 + 500 )) ] ||
    fail "only $(( seq1 - seq0 )) activity-log transactions during the crash loop: the log was not exercised"

# The secondary comes back and gets what it missed, from the bitmap.
oos=$(status_json node0 | jq '.peers[0].out_of_sync_bytes')
info "out of sync with node1: $oos bytes"
[ "$oos" -gt 0 ] || fail "node0 has nothing out of sync with node1 after the crash loop"
start_node node1
wait_uptodate node0 60
total=$(status_json node0 | jq '.peers[0].resync_total_bytes')
info "resync: $total bytes"
[ "$total" -ge "$oos" ] && [ "$total" -lt $((512 << 20)) ] ||
    fail "resync of $total bytes ($oos out of sync; the volume is 512 MiB)"
grep "peer node1: generations: " "$tmpdir/node0.log" | tail -n 1 | grep -q "sync-source-bitmap" ||
    fail "the last connection was not a bitmap-based resync: $(grep "peer node1: generations: " "$tmpdir/node0.log" | tail -n 1)"
same_disks node0 node1

# Both stop cleanly, and say so.
stop_node node0
stop_node node1
for n in node0 node1; do
    "$REPLCTL" -c "$CONFIG" -n $n dump-md > "$tmpdir/md.txt" || fail "dump-md of $n failed"
    grep -qE "^flags: .*\bclean\b" "$tmpdir/md.txt" ||
        fail "$n's metadata does not say it stopped cleanly: $(grep '^flags:' "$tmpdir/md.txt")"
done
info "ok"
