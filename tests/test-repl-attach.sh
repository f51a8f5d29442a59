#!/usr/bin/env bash
# repl-attach / repl-detach.  Diskless mode: the client's own diskless
# node attached as a block device, ext4 on it, a storage node SIGKILLed
# while files are written: no I/O error, fsck clean, disks identical
# once it is back.  --remote mode: attached to the storage primary; the
# primary is SIGKILLed, the other node is promoted by the relay's next
# connection, and the writes resume on the same device.
source "$(dirname "$0")/functions.sh"
requires nbdfuse --version
requires losetup --version
requires mkfs.ext4 -V
requires socat -V
requires test -c /dev/fuse
requires test -w /dev/loop-control
requires jq --version

ATTACH="$(dirname "$0")/../client/repl-attach"
DETACH="$(dirname "$0")/../client/repl-detach"
export NBDREPL_RUN_DIR="$tmpdir/run"
mnt="$tmpdir/mnt"
mkdir -p "$mnt"

# ---- diskless mode
make_diskless_config 128M
start_node node0
start_node node1

dev=$("$ATTACH" r0 --node node2 -c "$CONFIG" --plugin "$PLUGIN") ||
    fail "repl-attach failed: $(cat "$NBDREPL_RUN_DIR"/attach-r0/*.log 2>/dev/null | tail -n 5)"
cleanup_fn "umount '$mnt' 2>/dev/null; '$DETACH' r0 2>/dev/null"
[ -b "$dev" ] || fail "repl-attach printed '$dev', not a block device"
info "attached the diskless node as $dev"
mkfs.ext4 -q -F "$dev"
mount "$dev" "$mnt"

# Files are written; node0 is SIGKILLed in the middle.
( for i in $(seq 1 40); do
      head -c 1M /dev/urandom > "$mnt/f$i" || exit 1
      sync -f "$mnt/f$i" || exit 1
  done ) &
writer=$!
sleep 1
kill_node node0
wait "$writer" || fail "writing files failed when node0 died"
# The diskless node's own lines are kept although its nbdkit runs in
# the background (log-file=): its connections, and node0's loss.
grep -q "peer node1: connected" "$NBDREPL_RUN_DIR/attach-r0/nbdkit.log" &&
    grep -q "peer node0: disconnected" "$NBDREPL_RUN_DIR/attach-r0/nbdkit.log" ||
    fail "the diskless node's log lacks its connections: $(tail -n 5 "$NBDREPL_RUN_DIR/attach-r0/nbdkit.log")"
sha=$(cat "$mnt"/f* | sha256sum | cut -d' ' -f1)
umount "$mnt"
e2fsck -fn "$dev" > "$tmpdir/fsck.out" 2>&1 ||
    { cat "$tmpdir/fsck.out"; fail "e2fsck found problems on the attached device"; }
"$DETACH" r0 || fail "repl-detach failed"
[ ! -e "$NBDREPL_RUN_DIR/attach-r0" ] || fail "repl-detach left its state behind"
losetup -j "$tmpdir/run/attach-r0/fuse/r0" 2>/dev/null | grep -q . && fail "the loop device is still there"

start_node node0
wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 60
same_disks node0 node1
mount -o ro "$(disk node0)" "$mnt"
got=$(cat "$mnt"/f* | sha256sum | cut -d' ' -f1)
umount "$mnt"
[ "$got" = "$sha" ] || fail "the files on node0's disk differ from what was written"
info "ok: diskless attach, a storage node killed under ext4, fsck clean, disks identical"
stop_node node0
stop_node node1

# ---- remote mode
rm -f "$tmpdir"/node*.img "$tmpdir"/node*.img.meta
make_config 2 C 64M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
dev=$("$ATTACH" r0 --remote "$(uri node0)" "$(uri node1)") ||
    fail "repl-attach --remote failed: $(cat "$NBDREPL_RUN_DIR"/attach-r0/*.log 2>/dev/null | tail -n 5)"
info "attached remotely as $dev"
head -c 8M /dev/urandom > "$tmpdir/a"
dd if="$tmpdir/a" of="$dev" bs=1M oflag=direct status=none || fail "writing before the failover failed"
kill_node node0
start=$(date +%s.%N)
head -c 8M /dev/urandom > "$tmpdir/b"
timeout 60 dd if="$tmpdir/b" of="$dev" bs=1M seek=8 oflag=direct status=none ||
    fail "writing after the primary died failed: $(tail -n 5 "$NBDREPL_RUN_DIR/attach-r0/nbdkit.log")"
info "writes resumed $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s after the primary died (relay: $(tail -n 1 "$NBDREPL_RUN_DIR/attach-r0/relay.log"))"
status_json node1 | jq -e '.role == "Primary"' >/dev/null || fail "node1 was not promoted"
cmp -n 8M "$tmpdir/a" "$(disk node1)" || fail "the data before the failover is not on node1"
cmp -n 8M "$tmpdir/b" "$(disk node1)" --ignore-initial=0:8M || fail "the data after the failover is not on node1"
"$DETACH" r0 || fail "repl-detach failed"
info "ok: remote attach followed the failover to node1"
