#!/usr/bin/env bash
# A secondary that applies steadily but slowly is not given up, and
# does not give up its Primary.
#
# node1's disk is slow (tests/fault-inject.c: each write to node1.img
# takes 0.25 s first).  A client writes 32 blocks at once to the
# Primary node0, which sends all of them to node1 at once; node1 reads
# them in one batch and applies them in order, one every 0.25 s: the
# last is done about 8 s after it was sent, twice net: timeout (4 s)
# and more than twice ping-timeout (3 s).
#
# Before, node1 answered the batch once, at its end, and read nothing
# meanwhile: its ticker took node0 for silent ("nothing received for
# 3.0 s (ping-timeout)"), and node0, whose timeout ran from each
# message's send, would have given node1 up after 4 s.  Now node1
# answers what it has applied every 0.1 s of a batch and counts node0
# as heard meanwhile, and node0's timeout runs from node1's last
# answer: node1 stays connected, every write lands on both disks.  A
# peer that stops answering is still given up (tests/test-peer-stall.sh).
# (In the VM test with the kernel's NBD client, a storage node that
# forwarded a diskless Primary's writes one at a time to its slow
# resync target cost the Primary its live node this way.)
source "$(dirname "$0")/functions.sh"
requires test -f "$FAULT_INJECT"
requires jq --version

make_config 2 C 16M
start_node node0 role=primary
FAULT_PWRITE_PATH=node1.img FAULT_PWRITE_DELAY_MS=250 \
    LD_PRELOAD="$FAULT_INJECT" start_node node1
wait_uptodate node0 30
lines0=$(wc -l <"$tmpdir/node0.log")
lines1=$(wc -l <"$tmpdir/node1.log")

start=$(date +%s%N)
timed 60 nbdsh -u "$(uri node0)" -c "
bufs = [nbd.Buffer.from_bytearray(bytearray(b's' * 4096)) for i in range(32)]
cookies = [h.aio_pwrite(bufs[i], i * 65536) for i in range(32)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    h.aio_command_completed(c)" 2>"$tmpdir/w.err" ||
    fail "the writes failed: $(tail -n 1 "$tmpdir/w.err")"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
info "32 writes took $ms ms"
for n in node0 node1; do
    eval "from=\$lines${n#node}"
    if tail -n +$(( from + 1 )) "$tmpdir/$n.log" | grep "peer node.: .*disconnecting"; then
        fail "$n gave its peer up"
    fi
done
[ "$ms" -ge 6000 ] ||
    fail "the writes took $ms ms: node1 did not apply them one by one at 0.25 s (the test proves nothing)"
wait_uptodate node0 30
same_disks node0 node1
info "ok: node1 applied slowly and both stayed connected; disks identical"
