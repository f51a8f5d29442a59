#!/usr/bin/env bash
# replctl resize with a diskless node attached by repl-attach (its
# Primary: the first open auto-promotes it): the resize runs on an
# UpToDate storage node, the storage nodes grow, the diskless node
# reconnects and takes the new size; the attached device keeps its old
# size until `repl-attach --reattach`, which gives a device of the new
# size whose new area reads what the storage nodes hold, and whose old
# area kept its data.
source "$(dirname "$0")/functions.sh"
requires nbdfuse --version
requires losetup --version
requires blockdev --version
requires test -c /dev/fuse
requires test -w /dev/loop-control
requires jq --version

ATTACH="$(dirname "$0")/../client/repl-attach"
DETACH="$(dirname "$0")/../client/repl-detach"
export NBDREPL_RUN_DIR="$tmpdir/run"
small=$((64 << 20))
big=$((128 << 20))

# node1 as node0 sees it: connected, UpToDate, nothing out of sync.
node1_in_sync ()
{
    wait_for node0 '[.peers[] | select(.name == "node1") |
                     .connection == "Connected" and .disk == "UpToDate" and
                     .replication == "Established" and
                     .out_of_sync_bytes == 0] | all' "${1:-30}"
}

make_diskless_config 64M
start_node node0
start_node node1
node1_in_sync

dev=$("$ATTACH" r0 --node node2 -c "$CONFIG" --plugin "$PLUGIN") ||
    fail "repl-attach failed: $(cat "$NBDREPL_RUN_DIR"/attach-r0/*.log 2>/dev/null | tail -n 5)"
cleanup_fn "'$DETACH' r0 2>/dev/null"
[ "$(blockdev --getsize64 "$dev")" -eq "$small" ] || fail "$dev is not $small bytes"
# Some data at the start, through the device (the diskless Primary).
head -c 4M /dev/urandom > "$tmpdir/data"
dd if="$tmpdir/data" of="$dev" bs=1M oflag=direct status=none
wait_for node0 '[.peers[] | select(.name == "node2") | .role == "Primary"] | all' 10

for n in node0 node1; do
    dd if=/dev/urandom of="$(disk $n)" bs=1M seek=64 count=64 conv=notrunc \
       status=none
done
out=$("$REPLCTL" -s "$(sock node0)" resize 2>&1) || fail "resize failed: $out"
info "$out"
wait_for node0 ".size == $big" 10
wait_for node1 ".size == $big" 10
node1_in_sync 60
# The diskless node comes back at the new size.
sock2="$NBDREPL_RUN_DIR/attach-r0/nbd.sock"
for (( i=0; i<100; i++ )); do
    [ "$(nbdinfo --size "nbd+unix:///?socket=$sock2" 2>/dev/null)" = "$big" ] && break
    sleep 0.1
done
[ "$(nbdinfo --size "nbd+unix:///?socket=$sock2")" = "$big" ] ||
    fail "the diskless node's export is not $big bytes: $(tail -n 5 "$NBDREPL_RUN_DIR/attach-r0/nbdkit.log")"
# The attached device keeps its size until it is attached again.
[ "$(blockdev --getsize64 "$dev")" -eq "$small" ] ||
    fail "$dev changed size by itself"

dev=$("$ATTACH" r0 --reattach) || fail "repl-attach --reattach failed"
info "reattached as $dev"
[ "$(blockdev --getsize64 "$dev")" -eq "$big" ] ||
    fail "after --reattach $dev is $(blockdev --getsize64 "$dev") bytes, not $big"
cmp -n $((4 << 20)) "$tmpdir/data" "$dev" || fail "the data written before the resize changed"
dd if="$dev" of="$tmpdir/tail" bs=1M skip=64 count=64 iflag=direct status=none
cmp "$tmpdir/tail" <(tail -c "$small" "$(disk node0)") ||
    fail "the new area read through the device differs from node0's disk"
"$DETACH" r0
same_disks node0 node1
info "ok"
