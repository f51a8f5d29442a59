#!/usr/bin/env bash
# `meta: internal` and a non-default metadata geometry: the metadata
# lives at the end of each backing file, the exported volume is what is
# left in front of it, replication and a restart with a bitmap resync
# work, and the metadata area itself is never part of what is replicated.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires nbdinfo --version

make_config 2 C 64M
# Metadata at the end of each disk, 64K bitmap chunks, a small log.
sed -i -e 's/^\(    disk: .*\)$/\1\n    meta: internal/' "$CONFIG"
cat >>"$CONFIG" <<'EOF'
metadata:
  bitmap-granularity: 64K
  al-extents: 8
EOF

start_node node0 role=primary
start_node node1
wait_uptodate node0 30

size=$(nbdinfo --size "$(uri node0)")
[ "$size" -gt 0 ] && [ "$size" -lt $((64 << 20)) ] ||
    fail "export size $size: expected less than the 64M disk (metadata at its end)"
grep -q "internal, at byte $size" "$tmpdir/node0.log" ||
    fail "node0's log does not say where its internal metadata starts"
info "volume: $size bytes of the 64M disk"

# Some data, then the volumes (not the metadata areas) must be identical.
head -c "$size" /dev/urandom >"$tmpdir/data"
timed 60 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "nbdcopy failed"
wait_uptodate node0 30
cmp -n "$size" "$(disk node0)" "$(disk node1)" || fail "volumes differ"
cmp -n "$size" "$tmpdir/data" "$(disk node1)" || fail "node1 lacks the data"
# The metadata areas are each node's own (node id, instance): they differ.
cmp -s "$(disk node0)" "$(disk node1)" &&
    fail "the whole disks are identical: the metadata area was replicated?"

# Secondary away for a few writes: only their 64K chunks come back.
kill_node node1
timed 30 nbdsh -u "$(uri node0)" -c "
for i in range(5):
    h.pwrite(bytes([i + 1]) * 4096, i * (1 << 20))
h.flush()
"
wait_for node0 '.peers[0].out_of_sync_bytes == 5 * 65536' 20
start_node node1
wait_uptodate node0 30
total=$(status_json node0 | jq '.peers[0].resync_total_bytes')
[ "$total" -eq $((5 * 65536)) ] ||
    fail "resync after restart moved $total bytes, expected 5 chunks of 64K"
cmp -n "$size" "$(disk node0)" "$(disk node1)" || fail "volumes differ after resync"
info "ok: resync after restart: $total bytes"

# replctl finds the internal metadata too (node stopped), and sees the
# configured geometry.
stop_node node1
out=$("$REPLCTL" -c "$CONFIG" -n node1 dump-md) || fail "dump-md of internal metadata failed"
grep -q "granularity.*65536" <<<"$out" || fail "dump-md does not show the 64K granularity: $out"
info "dump-md reads the internal metadata"
