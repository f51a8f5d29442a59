#!/usr/bin/env bash
# Quorum (majority by default with 3 nodes): a primary that loses it
# stops completing writes — with on-no-quorum: io-error they fail with
# EIO, with suspend-io they wait — and goes on when a peer is back.
source "$(dirname "$0")/functions.sh"
requires jq --version

write_at () {   # write_at NODE OFFSET: one 4K write + flush, exit status
    timed 30 nbdsh -u "$(uri "$1")" -c "
h.pwrite(b'q' * 4096, $2)
h.flush()
"
}

make_config 3 C 16M
start_node node0 role=primary
start_node node1
start_node node2
wait_uptodate node0 30

kill_node node1
wait_for node0 '[.peers[] | select(.connection == "Connected")] | length == 1' 20
write_at node0 0 || fail "a write with 2 of 3 nodes (a majority) failed"

kill_node node2
wait_for node0 '[.peers[] | select(.connection == "Connected")] | length == 0' 20
if write_at node0 4096 2>"$tmpdir/err"; then
    fail "a write without quorum succeeded"
fi
grep -q "quorum lost" "$tmpdir/node0.log" || fail "node0 did not log the loss of quorum"
[ "$(status_json node0 | jq .quorum)" = false ] || fail "status does not show the loss of quorum"

start_node node1
wait_for node0 '[.peers[] | select(.connection == "Connected")] | length == 1' 20
write_at node0 8192 || fail "a write after quorum came back failed"
grep -q "quorum regained" "$tmpdir/node0.log" || fail "node0 did not log quorum regained"
info "io-error: writes failed without quorum and went on with it"

# ---- suspend-io ------------------------------------------------------------
stop_node node1
stop_node node0
sed -i 's/^protocol: C/&\non-no-quorum: suspend-io/' "$CONFIG"
start_node node0 role=primary
start_node node1
wait_for node0 '[.peers[] | select(.connection == "Connected")] | length == 1' 20
kill_node node1
wait_for node0 '[.peers[] | select(.connection == "Connected")] | length == 0' 20
write_at node0 12288 &
writer=$!
# The write is held while there is no quorum (observed for 2 s) ...
for (( i=0; i<20; i++ )); do
    kill -0 "$writer" 2>/dev/null || fail "a write completed without quorum under suspend-io"
    sleep 0.1
done
# ... and completes once a peer is back.
start_node node2
wait "$writer" || fail "the suspended write failed after quorum came back"
info "suspend-io: the write waited for quorum and then completed"
