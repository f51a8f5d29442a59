#!/usr/bin/env bash
# In the guest (tests/vm/vm-run), with the kernel's NBD client: a
# diskless node replicating to two storage nodes, attached by
# repl-attach through nbd-client on a unix socket (/dev/nbdN); ext4 on
# it and fio writing with verify while a storage node is SIGKILLed and
# started again: no I/O error (fio, kernel log), fsck clean, the two
# storage disks identical once resynced; repl-detach releases the
# device.  Then the same diskless node served on TCP and attached by
# nbd-client over TCP, as the README describes doing by hand: the files
# are there, more are written and checked, disks identical.
vm_timeout=400
source "$(dirname "$0")/vm/guest.sh"
source "$(dirname "$0")/functions.sh"
requires nbd-client --version
requires mkfs.ext4 -V
requires fio --version
requires jq --version
[ ! -e /sys/module/nbd ] || fail "nbd is loaded already: repl-attach's modprobe is not tested"

ATTACH="$(dirname "$0")/../client/repl-attach"
DETACH="$(dirname "$0")/../client/repl-detach"
export NBDREPL_RUN_DIR="$tmpdir/run"
mnt="$tmpdir/mnt"
mkdir -p "$mnt"

# No I/O error on DEV in the kernel's log since the mark.
dmesg -C
no_kernel_io_errors ()
{
    if dmesg | grep -iE "(I/O|critical medium|buffer i/o) error|EXT4-fs error|${1#/dev/}: .*error"; then
        fail "the kernel logged I/O errors on $1"
    fi
}

# ---- (1) repl-attach, diskless node on a unix socket, nbd-client
make_diskless_config 128M
start_node node0
start_node node1

dev=$("$ATTACH" r0 --node node2 -c "$CONFIG" --plugin "$PLUGIN") ||
    fail "repl-attach failed: $(tail -n 5 "$NBDREPL_RUN_DIR"/attach-r0/*.log 2>/dev/null)"
cleanup_fn "umount '$mnt' 2>/dev/null; '$DETACH' r0 2>/dev/null"
case $dev in
    /dev/nbd[0-9]*) ;;
    *) fail "repl-attach printed '$dev', not an NBD device (the kernel has nbd here)" ;;
esac
[ -b "$dev" ] || fail "$dev is not a block device"
[ "$(cat "/sys/block/${dev#/dev/}/size")" -eq $((128 << 11)) ] ||
    fail "$dev is $(cat "/sys/block/${dev#/dev/}/size") sectors, not 128 MiB"
info "repl-attach attached the diskless node as $dev (nbd-client, unix socket)"
mkfs.ext4 -q -F "$dev"
mount "$dev" "$mnt"
sync -f "$mnt"
base=$(status_json node2 | jq .write_bytes)

# fio writes 16k blocks at random with a checksum in each, rate-limited
# so that it runs long enough (about 20 s) for node0 to die and come
# back in the middle, then reads everything back and checks it.  (TCG
# does a few hundred requests a second here at best.)
fio --name=verify --directory="$mnt" --size=12M --bs=16k --rw=randwrite \
    --ioengine=libaio --direct=1 --iodepth=8 --rate_iops=40 --eta=never \
    --verify=crc32c --verify_fatal=1 --do_verify=1 \
    --output="$tmpdir/fio.out" &
fio_pid=$!
cleanup_fn "kill $fio_pid 2>/dev/null; wait $fio_pid 2>/dev/null"

# node0 dies once fio's writes are flowing (1 MiB more through node2).
wait_for node2 ".write_bytes > $base + 1048576" 60
kill -0 "$fio_pid" 2>/dev/null || fail "fio ended before node0 could be killed: $(cat "$tmpdir/fio.out")"
kill_node node0
info "node0 killed while fio writes"
# Writes go on to node1 alone, which records what node0 misses.
wait_for node1 '[.peers[] | select(.name == "node0") | .out_of_sync_bytes > 0] | all' 60
kill -0 "$fio_pid" 2>/dev/null || fail "fio ended before node0 came back: $(cat "$tmpdir/fio.out")"
start_node node0
wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected"] | all' 60
info "node0 back while fio writes: $(status_json node1 | jq -c '.peers[] | select(.name == "node0") | {disk, replication, out_of_sync_bytes}')"
kill -0 "$fio_pid" 2>/dev/null ||
    fail "fio had finished by the time node0 reconnected: the test did not test what it says"
wait "$fio_pid" || fail "fio failed: $(cat "$tmpdir/fio.out")"
grep -q "err= 0" "$tmpdir/fio.out" || fail "fio reported errors: $(cat "$tmpdir/fio.out")"
info "fio: $(grep -E '^ *write:|err=' "$tmpdir/fio.out" | tr -s ' ' | tr '\n' ' ')"
info "fio verify: $(grep -E 'READ:|WRITE:' "$tmpdir/fio.out" | tr -s ' ' | tr '\n' ' ')"
no_kernel_io_errors "$dev"

# Files, to be found again over TCP.
head -c 4M /dev/urandom > "$mnt/file1"
sha1=$(sha256sum < "$mnt/file1" | cut -d' ' -f1)
umount "$mnt"
e2fsck -fn "$dev" > "$tmpdir/fsck.out" 2>&1 ||
    { cat "$tmpdir/fsck.out"; fail "e2fsck found problems on $dev"; }
info "fsck: $(tail -n 1 "$tmpdir/fsck.out")"

wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 120
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 60
"$DETACH" r0 || fail "repl-detach failed"
[ ! -e "$NBDREPL_RUN_DIR/attach-r0" ] || fail "repl-detach left its state behind"
[ "$(cat "/sys/block/${dev#/dev/}/size")" -eq 0 ] || fail "$dev is still connected after repl-detach"
nbd-client -c "$dev" >/dev/null 2>&1 && fail "nbd-client -c: $dev still has a server"
info "repl-detach released $dev"
same_disks node0 node1
info "storage disks identical: $(sha256sum < "$(disk node0)" | cut -c1-16)"
no_kernel_io_errors "$dev"

# ---- (1b) the same diskless node on TCP, nbd-client over TCP
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 60
nbd-client 127.0.0.1 "${NBD_PORT[node2]}" "$dev" > "$tmpdir/nbd-client.out" 2>&1 ||
    fail "nbd-client over TCP failed: $(cat "$tmpdir/nbd-client.out")"
cleanup_fn "nbd-client -d $dev >/dev/null 2>&1"
info "nbd-client attached node2 over TCP (127.0.0.1:${NBD_PORT[node2]}) as $dev"
mount "$dev" "$mnt"
[ "$(sha256sum < "$mnt/file1" | cut -d' ' -f1)" = "$sha1" ] ||
    fail "file1 differs when read over TCP"
fio --name=verify-tcp --directory="$mnt" --size=4M --bs=64k --rw=randwrite \
    --ioengine=libaio --direct=1 --iodepth=4 --eta=never \
    --verify=crc32c --verify_fatal=1 --do_verify=1 \
    --output="$tmpdir/fio-tcp.out" || fail "fio over TCP failed: $(cat "$tmpdir/fio-tcp.out")"
grep -q "err= 0" "$tmpdir/fio-tcp.out" || fail "fio over TCP reported errors"
umount "$mnt"
e2fsck -fn "$dev" > "$tmpdir/fsck-tcp.out" 2>&1 ||
    { cat "$tmpdir/fsck-tcp.out"; fail "e2fsck found problems on $dev (TCP)"; }
nbd-client -d "$dev" >/dev/null 2>&1 || fail "nbd-client -d failed"
no_kernel_io_errors "$dev"
stop_node node2
same_disks node0 node1
info "ok: nbd-client over TCP: files intact, fio verify passed, fsck clean, disks identical"
