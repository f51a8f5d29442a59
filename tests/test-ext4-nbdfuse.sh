#!/usr/bin/env bash
# A real file system on the replicated volume: nbdfuse exposes the
# primary's export as a file, a loop device turns it into a block
# device, mkfs.ext4 + mount + files + umount; then the SECONDARY's
# backing file, untouched by anyone but nbdrepl, must be a clean ext4
# holding the same files.
source "$(dirname "$0")/functions.sh"
requires nbdfuse --version
requires losetup --version
requires mkfs.ext4 -V
requires debugfs -V
requires test -c /dev/fuse
requires test -w /dev/loop-control

make_config 2 C 128M
start_node node0 role=primary
start_node node1
wait_uptodate node0

fusedir="$tmpdir/fuse"; mnt="$tmpdir/mnt"
mkdir -p "$fusedir" "$mnt"
nbdfuse "$fusedir" "$(uri node0)" &
fusepid=$!
cleanup_fn "umount '$fusedir' 2>/dev/null; kill $fusepid 2>/dev/null; wait $fusepid 2>/dev/null"
for (( i=0; i<100; i++ )); do [ -f "$fusedir/nbd" ] && break; sleep 0.1; done
[ -f "$fusedir/nbd" ] || fail "nbdfuse did not expose the export within 10 s"

loop=$(losetup -f --show "$fusedir/nbd")
cleanup_fn "loop_detach_if $loop '$fusedir/nbd'"
mkfs.ext4 -q -F "$loop"
mount "$loop" "$mnt"
cleanup_fn "umount '$mnt' 2>/dev/null"

# Some files, big and small, and a directory tree.
head -c 20M /dev/urandom > "$mnt/big"
mkdir -p "$mnt/dir/sub"
for i in $(seq 1 200); do echo "file $i" > "$mnt/dir/sub/f$i"; done
sha_big=$(sha256sum < "$mnt/big" | cut -d' ' -f1)
umount "$mnt"
loop_detach "$loop" "$fusedir/nbd"
umount_settled "$fusedir"
wait $fusepid 2>/dev/null || true

# Every write was acknowledged by both nodes; the secondary's disk is a
# consistent file system with the same contents.
e2fsck -fn "$(disk node1)" > "$tmpdir/fsck.out" 2>&1 ||
    { cat "$tmpdir/fsck.out"; fail "e2fsck found problems on the secondary's disk"; }
got=$(debugfs -R "cat /big" "$(disk node1)" 2>/dev/null | sha256sum | cut -d' ' -f1)
[ "$got" = "$sha_big" ] || fail "/big differs on the secondary"
f=$(debugfs -R "cat /dir/sub/f137" "$(disk node1)" 2>/dev/null)
[ "$f" = "file 137" ] || fail "/dir/sub/f137 on the secondary: '$f'"
same_disks node0 node1
info "ok"
