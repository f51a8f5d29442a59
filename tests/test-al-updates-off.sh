#!/usr/bin/env bash
# metadata: al-updates: false (DRBD's al-updates no): no activity-log
# transaction is ever written, and a primary that crashes gets every peer
# fully resynced, since nothing says where its writes were.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 32M
cat >>"$CONFIG" <<'EOT'
metadata:
  al-updates: false
EOT
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'a' * (1 << 20), 0); h.flush()" ||
    fail "write failed"
wait_uptodate node0 30
seq=$(status_json node0 | jq .al_seq)
[ "$seq" -le 1 ] || fail "activity-log transactions were written (al_seq $seq)"

kill_node node0
start_node node0 role=primary
wait_uptodate node0 60
grep -q "keeps no activity log (al-updates: false): every peer gets a full resync" \
    "$tmpdir/node0.log" || fail "no full-resync notice after the crash"
total=$(status_json node0 | jq '.peers[0].resync_total_bytes')
[ "$total" -eq $((32 << 20)) ] || fail "resync after the crash: $total bytes, expected all 32M"
same_disks node0 node1
info "ok: no AL transactions; a crash meant a full resync ($total bytes)"
