#!/usr/bin/env bash
# A secondary whose machine crashes may lose writes it acknowledged
# (they were in its page cache).  At its restart (a new boot id) it marks
# its activity-log extents, and even when the primary wrote nothing
# meanwhile (same generation, no sync by the UUIDs) those extents are
# resynced from the primary.  The crash is simulated: SIGKILL, damage to
# the blocks just written, and a different boot id.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 64M
# A small activity log (4 extents of 4 MiB), so that what it covers is
# clearly less than the volume.
cat >>"$CONFIG" <<'EOT'
metadata:
  al-extents: 4
EOT
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'w' * (1 << 20), 20 << 20); h.flush()" ||
    fail "write failed"
wait_uptodate node0 30

kill_node node1
# What the page cache held is gone: node1's disk lacks the write.
head -c 1M /dev/zero | dd of="$(disk node1)" bs=1M seek=20 conv=notrunc status=none
cmp -s "$(disk node0)" "$(disk node1)" && fail "the simulated loss did not take"
echo 00000000-0000-4000-8000-000000000001 >"$tmpdir/boot_id"
NBDREPL_TEST_BOOT_ID_FILE="$tmpdir/boot_id" start_node node1
grep -q "(the machine restarted)" "$tmpdir/node1.log" ||
    fail "node1 did not see a machine restart"
wait_uptodate node0 30
same_disks node0 node1
total=$(status_json node0 | jq '.peers[0].resync_total_bytes')
[ "$total" -gt 0 ] && [ "$total" -le $((16 << 20)) ] ||
    fail "resync of $total bytes: expected at most the 4 activity-log extents (16 MiB)"
info "ok: the crashed secondary's activity log ($total bytes) was resynced"
