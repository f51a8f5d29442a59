#!/usr/bin/env bash
# allow-two-primaries: true, both nodes Primary and both writing large
# requests (1 to 4 MiB, random data) over the same 24 MiB, 4 in flight
# each, for 12 s: far more than the sockets (64K buffers) hold in each
# direction.
# The reader of each connection must never wait for a send (its ACKs are
# queued, never waited for): otherwise both readers end up behind sends
# that wait for the other's reader, until net: timeout ends the
# connection, a split brain.  So: every write answered, the connection
# never dropped (no "disconnecting", no "lost the other Primary" in
# either log, the same connection up at the end), identical disks.
# With TWOPRIM_AL_EXTENTS=N (test-two-primaries-large-al.sh) the
# activity log holds N extents of 1 MiB: local writes wait for room in
# it, and so do the peer's writes, which must never hold their range
# while they wait (a local write holding extents waits for that range).
source "$(dirname "$0")/functions.sh"
requires jq --version
requires /usr/bin/python3 -c "import nbd"

SECS=${TWOPRIM_LARGE_SECS:-12}

make_config 2 C 32M
sed -i 's/^protocol: C/&\nallow-two-primaries: true/' "$CONFIG"
if [ -n "${TWOPRIM_AL_EXTENTS:-}" ]; then
    printf 'metadata:\n  al-extent-size: 1M\n  al-extents: %s\n' \
        "$TWOPRIM_AL_EXTENTS" >>"$CONFIG"
fi
# Small socket buffers: a few requests in flight are far more than they
# hold.
sed -i 's/^net:/&\n  sndbuf-size: 64K\n  rcvbuf-size: 64K/' "$CONFIG"
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
"$REPLCTL" -s "$(sock node1)" primary >"$tmpdir/err" 2>&1 ||
    fail "promoting node1 beside node0 failed: $(cat "$tmpdir/err")"
wait_for node0 '.role == "Primary" and .peers[0].role == "Primary"' 15
wait_for node1 '.role == "Primary" and .peers[0].role == "Primary"' 15
since0=$(status_json node0 | jq .peers[0].connected_ms)
info "both Primary"

deadline=$($TWOPRIM now "$SECS")
$TWOPRIM big "$(uri node0)" 1 24 "$deadline" >"$tmpdir/w1.out" 2>&1 &
w1=$!
cleanup_fn "kill $w1 2>/dev/null || true"
$TWOPRIM big "$(uri node1)" 2 24 "$deadline" >"$tmpdir/w2.out" 2>&1 &
w2=$!
cleanup_fn "kill $w2 2>/dev/null || true"
# Bounded: the writers stop at the deadline; 60 s more is a hang.
for (( i = 0; i < (SECS + 60) * 10; i++ )); do
    kill -0 $w1 2>/dev/null || kill -0 $w2 2>/dev/null || break
    sleep 0.1
done
kill -0 $w1 2>/dev/null && fail "writer 1 still running"
kill -0 $w2 2>/dev/null && fail "writer 2 still running"
wait $w1 || fail "writer 1 failed: $(cat "$tmpdir/w1.out")"
wait $w2 || fail "writer 2 failed: $(cat "$tmpdir/w2.out")"
info "$(cat "$tmpdir/w1.out"); $(cat "$tmpdir/w2.out")"

for n in node0 node1; do
    if grep -E "disconnecting|lost the other Primary" "$tmpdir/$n.log"; then
        fail "$n: the connection dropped while both were Primary"
    fi
done
status_json node0 | jq -e '.peers[0].connection == "Connected"' >/dev/null ||
    fail "node0 is not connected to node1 at the end"
now0=$(status_json node0 | jq .peers[0].connected_ms)
[ "$now0" -ge "$since0" ] || fail "node0 reconnected meanwhile"
wait_uptodate node0 30
wait_uptodate node1 30
same_disks node0 node1
info "ok: two primaries wrote large requests at once, the link stayed up"
