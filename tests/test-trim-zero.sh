#!/usr/bin/env bash
# Trim, zero (with and without may_trim, with and without FUA) and FUA
# writes through the primary, on aligned and unaligned ranges: both
# disks stay identical, the data reads back as expected (zeroed ranges
# as zeroes), and trim and zero cross the wire as commands, not data.
source "$(dirname "$0")/functions.sh"
requires nbdcopy --version
requires jq --version
requires /usr/bin/python3 -c 'import nbd'

# timed SECS CMD...: CMD, which may be a shell function such as nbdsh,
# killed after SECS seconds (status 124).

size=$((32 << 20))
make_config 2 C "$size"
start_node node0 role=primary
start_node node1
wait_uptodate node0

head -c "$size" /dev/urandom > "$tmpdir/data"
timeout 60 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "nbdcopy failed"
same_disks node0 node1

# Phase 1: trims and zeroes only.  Python keeps a model of the disk
# (the random data, with each operation applied) in $tmpdir/model.
bytes_before=$(status_json node0 | jq '.peers[0].bytes_sent')
timed 60 nbdsh -u "$(uri node0)" -c "
import nbd
M = 1 << 20
size = $size
model = bytearray(open('$tmpdir/data', 'rb').read())
ops = [
    # (what, count, offset, flags)
    ('trim', M, 0, 0),                                   # aligned
    ('trim', 1000, 12345, 0),                            # unaligned
    ('trim', 3 * 4096, 5 * 4096, nbd.CMD_FLAG_FUA),
    ('zero', 2 * M, 3 * M, 0),                           # may trim
    ('zero', 777, 8 * M + 123, nbd.CMD_FLAG_NO_HOLE),    # unaligned, no trim
    ('zero', 9 * M + 1, 10 * M - 1, nbd.CMD_FLAG_NO_HOLE),  # > 4 MiB: split
    ('zero', 5 * M + 4097, 20 * M + 511, 0),             # > 4 MiB, may trim
    ('zero', 65536, 30 * M, nbd.CMD_FLAG_FUA | nbd.CMD_FLAG_NO_HOLE),
    ('zero', 4097, size - 4097, 0),                      # up to the end
    ('trim', 1, size - 1 - 8192, 0),                     # a single byte
]
for what, count, off, flags in ops:
    if what == 'trim':
        h.trim(count, off, flags)
    else:
        h.zero(count, off, flags)
    model[off:off + count] = bytes(count)
    # Zeroed ranges read back as zeroes through NBD at once.
    if what == 'zero':
        assert h.pread(count, off) == bytes(count), \
            'zero(%d, %d, %d) does not read back as zeroes' % (count, off, flags)
open('$tmpdir/model', 'wb').write(model)
" || fail "phase 1 (trim and zero) failed"
same_disks node0 node1
cmp "$tmpdir/model" "$(disk node0)" || fail "phase 1: primary's disk differs from the model"
bytes_after=$(status_json node0 | jq '.peers[0].bytes_sent')
# About 17 MiB were trimmed or zeroed: as commands that is a few hundred
# bytes on the wire, far below 64 KiB.
sent=$((bytes_after - bytes_before))
info "phase 1: $sent bytes sent to the peer for the trims and zeroes"
[ "$sent" -lt 65536 ] || fail "trim and zero sent $sent bytes: they travel with data"
[ "$sent" -gt 0 ] || fail "trim and zero sent nothing to the peer"

# Phase 2: FUA writes, some into the zeroed and trimmed ranges, some
# unaligned, the last byte of the disk, and one over 4 MiB (split on
# the wire); then more zeroes with FUA over part of them.
timed 60 nbdsh -u "$(uri node0)" -c "
import nbd, os
M = 1 << 20
size = $size
model = bytearray(open('$tmpdir/model', 'rb').read())
def write(off, n, flags=nbd.CMD_FLAG_FUA):
    buf = os.urandom(n)
    h.pwrite(buf, off, flags)
    model[off:off + n] = buf
def zero(off, n, flags):
    h.zero(n, off, flags)
    model[off:off + n] = bytes(n)
write(0, 4096)
write(12000, 70000)
write(3 * M + 1, 5 * M + 3)
write(size - 1, 1)
write(17 * M + 1, 511)
write(25 * M, 64 * 1024, 0)            # a plain write for contrast
zero(3 * M + 4096, 8192, nbd.CMD_FLAG_FUA)
zero(17 * M, 1000, nbd.CMD_FLAG_FUA | nbd.CMD_FLAG_NO_HOLE)
h.trim(100, 12345, nbd.CMD_FLAG_FUA)
model[12345:12445] = bytes(100)
assert h.pread(size, 0) == model, 'the disk read through NBD differs from the model'
open('$tmpdir/model', 'wb').write(model)
" || fail "phase 2 (FUA writes) failed"
# Protocol C: both disks have it all as soon as the client has its replies.
same_disks node0 node1
cmp "$tmpdir/model" "$(disk node0)" || fail "phase 2: primary's disk differs from the model"
cmp "$tmpdir/model" "$(disk node1)" || fail "phase 2: secondary's disk differs from the model"

# Trim and zero with may_trim punched holes on both sides alike.
blocks0=$(stat -c %b "$(disk node0)")
blocks1=$(stat -c %b "$(disk node1)")
info "allocated 512-byte blocks: node0 $blocks0, node1 $blocks1 (of $((size / 512)))"
[ "$blocks0" -lt $((size / 512)) ] || fail "no hole was punched on the primary"
[ "$blocks1" -lt $((size / 512)) ] || fail "no hole was punched on the secondary"

status_json node0 | jq -e '.peers[0].connection == "Connected" and
    .peers[0].out_of_sync_bytes == 0 and .peers[0].in_flight == 0' >/dev/null ||
    fail "primary's status: $(status_json node0)"
info "ok"
