#!/usr/bin/env bash
# allow-two-primaries with a diskless node: a storage Primary (node0) and
# a diskless Primary (node2) beside it, node1 a storage Secondary.
#
# Without the key a second Primary is refused, storage beside diskless
# and diskless beside storage.  With it, node2 writes through node0
# (its status says so), node1 sees two Primaries and a third is
# refused.  Then two writers, one on node0 and one on node2, write
# random 4 KiB blocks of the same 256 KiB, 16 requests in flight each,
# in 5 rounds of 4 s that end at the same moment on both: in rounds 1
# and 2 node0 is Primary by hand and node2 is auto-promoted by its
# writer; in rounds 3 to 5 both are auto-promoted by their writers at
# the same moment (their promotions cross) and auto-demoted at the end.
# After each round the writes of the two crossed (tests/twoprim.py
# crossed), node0's and node1's disks are byte-identical, and every
# block holds the last write one of the writers made to it, never an
# older one of the same writer, and never one answered before a write
# of the other writer to that block was even sent (tests/twoprim.py
# check).
source "$(dirname "$0")/functions.sh"
requires jq --version
requires /usr/bin/python3 -c "import nbd"

BLOCKS=64                       # 256 KiB: the two writers meet all the time
ROUNDS=${TWOPRIM_ROUNDS:-5}
ROUND_SECS=4                    # 5 rounds of 4 s: 20 s of writing

make_diskless_config 16M
start_three ()
{
    start_node node0
    start_node node1
    start_node node2
    wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
    wait_storage_uptodate node0 node1
}
start_three
role_of () {                    # NODE PEER: the role NODE sees PEER in
    status_json "$1" | jq -r --arg p "$2" '.peers[] | select(.name == $p) | .role'
}

# Without allow-two-primaries: one Primary, storage or diskless.
promote node0
wait_peer_role node2 node0 Primary
promote_refused node2 "peer node0 is Primary; demote it first"
if timed 30 nbdsh -u "$(uri node2)" -c "h.pwrite(b'x' * 4096, 0)" \
       2>/dev/null; then
    fail "node2 took a write while node0 is Primary"
fi
demote node0
wait_peer_role node2 node0 Secondary
promote node2
wait_peer_role node0 node2 Primary
wait_peer_role node1 node2 Primary
promote_refused node0 "peer node2 is Primary; demote it first"
promote_refused node1 "peer node2 is Primary; demote it first"
demote node2
wait_peer_role node0 node2 Secondary
info "without allow-two-primaries a second Primary is refused"

# With it: the nodes restarted with the key.
stop_node node2
stop_node node1
stop_node node0
sed -i 's/^protocol: C/&\nallow-two-primaries: true/' "$CONFIG"
start_three

promote node0
wait_peer_role node2 node0 Primary
promote node2
wait_for node2 '.role == "Primary" and .writes_through == "node0"' 15
wait_peer_role node0 node2 Primary
wait_for node1 '[.peers[] | .role == "Primary"] | all' 15
"$REPLCTL" -s "$(sock node2)" status | grep -q "writes: through node0" ||
    fail "replctl status of node2 does not say where its writes go"
promote_refused node1 "two peers are Primary already"
wait_log node2 "writes go through node0" 5
info "node2 Primary beside node0, writing through it; node1 refused as a third"
demote node2
wait_for node2 '.role == "Secondary"' 15

# The rounds.
logs=()
crossed=0
for (( r = 1; r <= ROUNDS; r++ )); do
    if [ $r = 3 ]; then
        demote node0            # from now on both are auto-promoted
        wait_peer_role node2 node0 Secondary
        wait_peer_role node1 node0 Secondary
    fi
    twoprim_start $r $ROUND_SECS $BLOCKS "$(uri node0)" "$(uri node2)"
    twoprim_wait $r $ROUND_SECS
    [ $TP_RC1 = 0 ] || fail "round $r: writer 1 (node0) failed: $(cat "$tmpdir/w1.out")"
    [ $TP_RC2 = 0 ] || fail "round $r: writer 2 (node2) failed: $(cat "$tmpdir/w2.out")"
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
grep -q "node2: auto-promoted by a client" "$tmpdir/node2.log" ||
    fail "node2 was never auto-promoted"
grep -q "node0: auto-promoted by a client" "$tmpdir/node0.log" ||
    fail "node0 was never auto-promoted"
grep -q "peer node2: writes through this node now" "$tmpdir/node0.log" ||
    fail "node0 never waited for node2's ROUTED"

# The checker catches a lost write: an older write of the same writer
# put back into a copy of the disk.
cp "$(disk node0)" "$tmpdir/tampered.img"
$TWOPRIM tamper "$tmpdir/tampered.img" $BLOCKS "${logs[@]}" >/dev/null ||
    fail "nothing to tamper with"
if $TWOPRIM check "$tmpdir/tampered.img" $BLOCKS "${logs[@]}" \
       >"$tmpdir/check-tampered.out" 2>&1; then
    fail "the checker missed an older write put back"
fi
info "checker self-test: $(head -n 1 "$tmpdir/check-tampered.out")"

# Both Secondary again; the diskless node writes to both storage nodes
# directly, and the disks stay identical.
wait_for node0 '.role == "Secondary"' 15
wait_for node2 '.role == "Secondary" and .writes_through == null' 15
timed 30 nbdsh -u "$(uri node2)" -c "h.pwrite(b'z' * 65536, 0)" ||
    fail "node2 alone does not serve"
wait_for node2 '.role == "Secondary"' 15
wait_storage_uptodate node0 node1
same_disks node0 node1
info "ok: a storage and a diskless Primary wrote the same blocks; $crossed crossed; disks identical"
