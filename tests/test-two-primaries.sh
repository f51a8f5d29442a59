#!/usr/bin/env bash
# allow-two-primaries: true.  node1 is promoted (replctl primary) while
# node0 is Primary; both then write random 4 KiB blocks of the same
# 256 KiB, 16 requests in flight each, in 5 rounds of 4 s that end at
# the same moment on both.  Their writes cross on the wire (the nodes
# count the conflicts); after each round both disks are byte-identical,
# and every block
# holds the last write one of the writers made to it, never an older
# one of the same writer, and never one answered before a write of the
# other writer to that block was even sent (tests/twoprim.py check).
# Then node1 is demoted, node0 serves alone, node1 is auto-promoted
# beside it by a client (and demoted after it), replctl adjust refuses
# to add or replace a node, and a node whose
# configuration lacks allow-two-primaries is refused by its peer.  (Without the key a second Primary is refused: test-roles.sh,
# test-second-primary.sh.)
source "$(dirname "$0")/functions.sh"
requires jq --version
requires /usr/bin/python3 -c "import nbd"

BLOCKS=64                       # 256 KiB: the two writers meet all the time
ROUNDS=${TWOPRIM_ROUNDS:-5}
ROUND_SECS=4                    # 5 rounds of 4 s: 20 s of writing

make_config 2 C 16M
sed -i 's/^protocol: C/&\nallow-two-primaries: true/' "$CONFIG"
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
role () { status_json "$1" | jq -r .role; }

# node1 promoted by hand beside node0.
"$REPLCTL" -s "$(sock node1)" primary >"$tmpdir/err" 2>&1 ||
    fail "promoting node1 beside node0 failed: $(cat "$tmpdir/err")"
wait_for node1 '.role == "Primary"' 15
wait_for node0 '.role == "Primary" and .peers[0].role == "Primary"' 15
info "both Primary"

# Each round, the two writers stop at the same moment, so that the last
# writes to each block cross on the wire; then the disks must be
# identical and explainable.  (Only the last writes of a round decide
# what the disks hold, hence rounds.)
logs=()
for (( r = 1; r <= ROUNDS; r++ )); do
    twoprim_start $r $ROUND_SECS $BLOCKS "$(uri node0)" "$(uri node1)"
    # Bounded: the writers stop at the deadline; 60 s more is a hang.
    twoprim_wait $r $ROUND_SECS
    [ $TP_RC1 = 0 ] || fail "round $r: writer 1 failed: $(cat "$tmpdir/w1.out")"
    [ $TP_RC2 = 0 ] || fail "round $r: writer 2 failed: $(cat "$tmpdir/w2.out")"
    logs+=("$tmpdir/w1.$r.json" "$tmpdir/w2.$r.json")
    wait_uptodate node0 30
    wait_uptodate node1 30
    same_disks node0 node1
    $TWOPRIM check "$(disk node0)" $BLOCKS "${logs[@]}" \
        >"$tmpdir/check.out" 2>&1 ||
        fail "round $r: checker: $(tail -n 20 "$tmpdir/check.out")"
    info "round $r: $(cat "$tmpdir/w1.out"); $(cat "$tmpdir/w2.out"); $(tail -n 1 "$tmpdir/check.out")"
done

# The writes crossed: each node saw the other's writes overlap its own.
c0=$(status_json node0 | jq .write_conflicts)
c1=$(status_json node1 | jq .write_conflicts)
k0=$(status_json node0 | jq .write_conflicts_kept_local)
k1=$(status_json node1 | jq .write_conflicts_kept_local)
info "conflicts seen: node0 $c0 (kept its own: $k0), node1 $c1 (kept its own: $k1)"
[ "$c0" -gt 0 ] && [ "$c1" -gt 0 ] ||
    fail "no concurrent writes to the same blocks: the test proves nothing"
# The rule of the ids: only the higher id (node1) keeps its own bytes
# over a write that crossed it.
[ "$k0" -eq 0 ] || fail "node0 (the lower id) kept its own bytes $k0 times"
[ "$k1" -gt 0 ] || fail "node1 (the higher id) never kept its own bytes"

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

# node1 demoted by hand; node0 stays Primary alone.
"$REPLCTL" -s "$(sock node1)" secondary >/dev/null || fail "demoting node1 failed"
wait_for node0 '.peers[0].role == "Secondary"' 15
[ "$(role node0)" = Primary ] || fail "node0 is $(role node0)"
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'z' * 4096, 0)" ||
    fail "node0 alone does not serve"
# auto-promote beside a Primary, and auto-demote after.
timed 30 nbdsh -u "$(uri node1)" -c "h.pwrite(b'y' * 4096, 4096)" ||
    fail "node1 was not auto-promoted beside node0"
grep -q "node1: auto-promoted by a client" "$tmpdir/node1.log" ||
    fail "node1 served without being auto-promoted"
wait_for node1 '.role == "Secondary"' 15
wait_uptodate node0 30
same_disks node0 node1

# Nodes neither come nor go with allow-two-primaries (exactly two
# storage nodes): replctl adjust refuses a third node (the file does not
# load) and node1 replaced by another, naming the key; nothing changes.
wait_for node0 '.peers[0].role == "Secondary"' 15
cp "$CONFIG" "$tmpdir/r0-two.yaml"
node2_entry="  - name: node2
    id: 2
    address: 127.0.0.1:$(free_port)
    disk: node2.img
    control: node2.sock"
adjust_refused () {             # WHAT EXPECTED
    local out
    out=$("$REPLCTL" -s "$(sock node0)" adjust 2>&1) &&
        fail "adjust accepted $1: $out"
    grep -qF -- "$2" <<<"$out" && grep -qF "nothing changed" <<<"$out" ||
        fail "adjust ($1): '$out' does not name '$2'"
}
printf '%s\n' "$node2_entry" >>"$CONFIG"
adjust_refused "a third node" "allow-two-primaries: true needs exactly two nodes"
sed '/^  - name: node1$/,/^    control: node1.sock$/d' "$tmpdir/r0-two.yaml" \
    >"$CONFIG"
printf '%s\n' "$node2_entry" >>"$CONFIG"
adjust_refused "node1 replaced" \
    "nodes[1] (node2 added): allow-two-primaries is true: the nodes cannot change while the node runs"
cp "$tmpdir/r0-two.yaml" "$CONFIG"
out=$("$REPLCTL" -s "$(sock node0)" adjust) || fail "adjust of the good file: $out"
[ "$out" = "adjusted: nothing changed" ] ||
    fail "a refused adjust changed something: $out"
info "adjust refuses a third node and a replaced peer (allow-two-primaries)"

# A disconnect while both are Primary: both start a new generation at
# once, so that meeting again is a split brain, never a resync that
# overwrites the writes of one side.  (node1 writes nothing after the
# cut: a generation started only at a next write would have left it in
# the old one, node0's sync target once demoted.)
"$REPLCTL" -s "$(sock node1)" primary >/dev/null || fail "promoting node1 again failed"
wait_for node0 '.peers[0].role == "Primary"' 15
"$REPLCTL" -s "$(sock node0)" disconnect node1 >/dev/null || fail "disconnect failed"
wait_log node0 "lost the other Primary" 15
wait_log node1 "lost the other Primary" 15
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'w' * 4096, 8192)" ||
    fail "node0 does not serve after the disconnect"
"$REPLCTL" -s "$(sock node1)" secondary >/dev/null || fail "demoting node1 failed"
"$REPLCTL" -s "$(sock node0)" connect node1 >/dev/null || fail "connect failed"
wait_log node0 "refusing connection: split-brain" 20
status_json node1 | jq -e '.peers[0].connection != "Connected"' >/dev/null ||
    fail "node1 connected to node0 after both were Primary apart"
info "apart as two primaries: $(grep -m1 -o 'refusing connection: split-brain[^;]*' "$tmpdir/node0.log")"

# Both nodes must agree on allow-two-primaries: node1 restarted without
# it is refused, and says why.
stop_node node1
sed '/^allow-two-primaries/d' "$CONFIG" >"$tmpdir/r0-one.yaml"
CONFIG_SAVED=$CONFIG
CONFIG="$tmpdir/r0-one.yaml"
start_node node1
CONFIG=$CONFIG_SAVED
wait_log node1 "allow-two-primaries is false here and true on the peer" 20
[ "$(role node1)" = Secondary ] || fail "node1 is $(role node1)"
info "ok: two primaries wrote the same blocks and ended identical"
