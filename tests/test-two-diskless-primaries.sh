#!/usr/bin/env bash
# allow-two-primaries with two diskless Primaries (server/diskless-
# primaries.c): two storage nodes (node0, node1), two diskless ones
# (node2, node3).
#
# Without the key a second diskless Primary is refused.  With it, node3
# promoted beside node2 writes and reads through node2 (its status says
# so), the storage nodes see two Primaries, and a third is refused.
# Then two writers, one on node2 and one on node3, write random 4 KiB
# blocks of the same 256 KiB, 16 requests in flight each, in rounds of
# 4 s that end at the same moment on both: in rounds 1 and 2 node2 is
# Primary by hand and node3 is auto-promoted by its writer; in rounds 3
# and 4 both are auto-promoted by their writers at the same moment
# (their promotions cross: the lower id writes, the other through it).
# After each round the writes of the two crossed, node0's and node1's
# disks are byte-identical, and every block holds the last write one of
# the writers made to it, never an older one of the same writer, and
# never one answered before a write of the other writer to that block
# was even sent (tests/twoprim.py check).  Then the node that the other
# writes through is demoted under the other's writes (a live
# migration's end), and last it dies (SIGKILL) while both write: each
# time the other goes on, straight to the storage nodes, without a
# failed write, and the checker and the disks agree again.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires /usr/bin/python3 -c "import nbd"

BLOCKS=64                       # 256 KiB: the two writers meet all the time
ROUNDS=${TWODL_ROUNDS:-4}
ROUND_SECS=4

make_diskless_config 16M 2
start_all ()
{
    local n
    for n in node0 node1 node2 node3; do start_node $n; done
    for n in node2 node3; do
        wait_for $n '([.peers[] | .connection == "Connected"] | all) and ([.peers[] | select(.name == "node0" or .name == "node1") | .disk == "UpToDate"] | all)' 30
    done
    wait_storage_uptodate node0 node1
}
start_all

# Without allow-two-primaries: one diskless Primary.
promote node2
wait_peer_role node3 node2 Primary
promote_refused node3 "peer node2 is Primary; demote it first"
demote node2
wait_peer_role node3 node2 Secondary
info "without allow-two-primaries a second diskless Primary is refused"

for n in node3 node2 node1 node0; do stop_node $n; done
sed -i 's/^protocol: C/&\nallow-two-primaries: true/' "$CONFIG"
start_all

promote node2
wait_peer_role node3 node2 Primary
promote node3
wait_for node3 '.role == "Primary" and .writes_through == "node2"' 15
wait_for node2 '.role == "Primary" and .writes_through == null' 15
for n in node0 node1; do
    wait_for $n '[.peers[] | select(.name == "node2" or .name == "node3") | .role == "Primary"] | all' 15
done
"$REPLCTL" -s "$(sock node3)" status | grep -q "writes: through node2" ||
    fail "replctl status of node3 does not say where its writes go"
promote_refused node0 "two peers are Primary already"
promote_refused node1 "two peers are Primary already"
timed 30 nbdsh -u "$(uri node3)" -c "h.pwrite(b'q' * 4096, 0); assert h.pread(4096, 0) == b'q' * 4096" ||
    fail "a write and a read through node2 failed"
grep -q "a diskless Primary, writes through" "$tmpdir/node3.log" ||
    grep -q "writes go through node2, the diskless Primary" "$tmpdir/node3.log" ||
    fail "node3 does not log that its writes go through node2"
info "node3 Primary beside node2, writing through it; node0 and node1 refused as a third"
demote node3
wait_for node3 '.role == "Secondary"' 15

# The rounds.
logs=()
crossed=0
for (( r = 1; r <= ROUNDS; r++ )); do
    if [ $r = 3 ]; then
        demote node2            # from now on both are auto-promoted
        wait_peer_role node3 node2 Secondary
        wait_peer_role node0 node2 Secondary
    fi
    twoprim_start $r $ROUND_SECS $BLOCKS "$(uri node2)" "$(uri node3)"
    twoprim_wait $r $ROUND_SECS
    [ $TP_RC1 = 0 ] || fail "round $r: writer 1 (node2) failed: $(cat "$tmpdir/w1.out")"
    [ $TP_RC2 = 0 ] || fail "round $r: writer 2 (node3) failed: $(cat "$tmpdir/w2.out")"
    logs+=("$tmpdir/w1.$r.json" "$tmpdir/w2.$r.json")
    n=$($TWOPRIM crossed "$tmpdir/w1.$r.json" "$tmpdir/w2.$r.json")
    crossed=$(( crossed + n ))
    wait_storage_uptodate node0 node1
    wait_storage_uptodate node1 node0
    same_disks node0 node1
    $TWOPRIM check "$(disk node0)" $BLOCKS "${logs[@]}" \
        >"$tmpdir/check.out" 2>&1 ||
        fail "round $r: checker: $(tail -n 20 "$tmpdir/check.out")"
    info "round $r: $(cat "$tmpdir/w1.out"); $(cat "$tmpdir/w2.out"); $n crossed; $(tail -n 1 "$tmpdir/check.out")"
done
[ "$crossed" -gt 0 ] ||
    fail "no two writes to one block were in flight together: the test proves nothing"
grep -q "node3: auto-promoted by a client" "$tmpdir/node3.log" ||
    fail "node3 was never auto-promoted"
grep -q "node2: auto-promoted by a client" "$tmpdir/node2.log" ||
    fail "node2 was never auto-promoted"

# A live migration's end: the writer (node2, Primary by hand, no client
# of its own) is demoted while node3 writes through it; node3 goes on,
# straight to the storage nodes, without a failed write.
wait_for node2 '.role == "Secondary"' 15
wait_for node3 '.role == "Secondary"' 15
promote node2
r=$(( ROUNDS + 1 ))
SECS=8
$TWOPRIM write "$(uri node3)" 2 $BLOCKS "$($TWOPRIM now $(( SECS + 1 )))" \
    $(( r * 10000000 )) 1000000 "$tmpdir/w2.$r.json" >"$tmpdir/w2.out" 2>&1 &
wpid=$!
cleanup_fn "kill $wpid 2>/dev/null || true"
wait_for node3 '.role == "Primary" and .writes > 200 and .writes_through == "node2"' 15
demote node2
wait_log node3 "writes straight to the storage nodes now" 15
wait $wpid || fail "node3's writer failed when node2 was demoted: $(tail -n 5 "$tmpdir/w2.out")"
logs+=("$tmpdir/w2.$r.json")
wait_for node3 '.role == "Secondary" and .writes_through == null' 15
wait_storage_uptodate node0 node1
same_disks node0 node1
$TWOPRIM check "$(disk node0)" $BLOCKS "${logs[@]}" >"$tmpdir/check.out" 2>&1 ||
    fail "after node2's demotion: $(tail -n 20 "$tmpdir/check.out")"
info "node2 demoted under node3's writes: $(cat "$tmpdir/w2.out"); $(tail -n 1 "$tmpdir/check.out")"

# Two promotions that cross (each node waits 1 s after it asked the
# other, test hook): both see the other deciding, and node2, the lower
# id, writes; node3 writes through it.
for n in node2 node3; do stop_node $n; done
NBDREPL_TEST_DL_DECIDE_DELAY_MS=1000 start_node node2
NBDREPL_TEST_DL_DECIDE_DELAY_MS=1000 start_node node3
for n in node2 node3; do
    wait_for $n '([.peers[] | .connection == "Connected"] | all) and ([.peers[] | select(.name == "node0" or .name == "node1") | .disk == "UpToDate"] | all)' 30
done
"$REPLCTL" -s "$(sock node3)" primary >"$tmpdir/p3.out" 2>&1 &
p3=$!
"$REPLCTL" -s "$(sock node2)" primary >"$tmpdir/p2.out" 2>&1 ||
    fail "promoting node2 failed: $(cat "$tmpdir/p2.out")"
wait $p3 || fail "promoting node3 failed: $(cat "$tmpdir/p3.out")"
wait_for node3 '.role == "Primary" and .writes_through == "node2"' 15
wait_for node2 '.role == "Primary" and .writes_through == null' 15
timed 30 nbdsh -u "$(uri node3)" -c "h.pwrite(b'c' * 4096, 8192); h.flush()" ||
    fail "node3's write after the crossed promotions failed"
demote node3
demote node2
info "crossed promotions: node2 writes, node3 through it"

# The writer dies while the other writes through it.
r=$(( ROUNDS + 2 ))
twoprim_start $r $SECS $BLOCKS "$(uri node2)" "$(uri node3)"
wait_for node2 '.role == "Primary" and .writes > 200' 15
wait_for node3 '.role == "Primary" and .writes > 200 and .writes_through == "node2"' 15
kill_node node2
twoprim_wait $r $SECS
[ $TP_RC2 = 0 ] || fail "node3's writer failed when node2 died: $(tail -n 5 "$tmpdir/w2.out")"
logs+=("$tmpdir/w1.$r.json" "$tmpdir/w2.$r.json")
wait_log node3 "writes straight to the storage nodes now" 15
info "node2 killed; node3's writer: $(cat "$tmpdir/w2.out")"
wait_storage_uptodate node0 node1 60
wait_storage_uptodate node1 node0 60
same_disks node0 node1
$TWOPRIM check "$(disk node0)" $BLOCKS "${logs[@]}" >"$tmpdir/check.out" 2>&1 ||
    fail "after node2's death: $(tail -n 20 "$tmpdir/check.out")"
info "node2 died: $(tail -n 1 "$tmpdir/check.out")"
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected"] | all' 30
wait_for node3 '.role == "Secondary"' 15
same_disks node0 node1
info "ok: two diskless Primaries wrote the same blocks; $crossed crossed; disks identical"
