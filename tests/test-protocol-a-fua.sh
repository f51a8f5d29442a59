#!/usr/bin/env bash
# Protocol A with a mix of plain and FUA writes in flight, and every
# sendmsg on the primary slowed down (tests/fault-inject.c), so that the
# secondary often acknowledges a message before its sender has finished
# with it.  A writer must never be released while the sender still uses
# its message: the primary must survive, and the replicas must converge.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires test -f "$FAULT_INJECT"

make_config 2 A 64M
FAULT_SENDMSG_DELAY_US=1000 LD_PRELOAD="$FAULT_INJECT" start_node node0 role=primary
start_node node1
wait_uptodate node0

timed 120 nbdsh -u "$(uri node0)" -c "
import os, random
random.seed(7)
for r in range(150):
    for i in range(16):
        h.aio_pwrite(os.urandom(4096), random.randrange(0, 16384) * 4096,
                     flags=(nbd.CMD_FLAG_FUA if random.random() < 0.5 else 0))
    while h.aio_in_flight() > 0:
        h.poll(-1)
h.flush()
" || fail "client failed"
kill -0 "${PID[node0]}" || fail "the primary died"
grep -q "Assertion" "$tmpdir/node0.log" && fail "the primary hit an assertion"
wait_uptodate node0 30
same_disks node0 node1
info "ok"
