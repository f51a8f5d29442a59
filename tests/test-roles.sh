#!/usr/bin/env bash
# Roles at run time: `replctl secondary` on the primary (refused while a
# client is connected), `replctl primary` on the other node (refused
# while a peer is primary), writes through the new primary reach the old
# one, and promotion of a node that is not UpToDate needs --force.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 32M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
role () { status_json "$1" | jq -r .role; }

head -c 8M /dev/urandom >"$tmpdir/a"
timed 30 nbdcopy "$tmpdir/a" "$(uri node0)" || fail "nbdcopy to node0 failed"

# A peer is primary: node1 may not be promoted.
"$REPLCTL" -s "$(sock node1)" primary >"$tmpdir/err" 2>&1 &&
    fail "node1 was promoted while node0 is Primary"
grep -q "peer node0 is Primary" "$tmpdir/err" || fail "unclear refusal: $(cat "$tmpdir/err")"

# A client holds node0 open: it may not be demoted.
/usr/bin/python3 - "$(uri node0)" "$REPLCTL" "$(sock node0)" <<'PY' || fail "demotion with a client open was not refused"
import subprocess, sys
import nbd
h = nbd.NBD(); h.connect_uri(sys.argv[1])
r = subprocess.run([sys.argv[2], "-s", sys.argv[3], "secondary"],
                   capture_output=True, text=True)
h.shutdown()
sys.exit(0 if r.returncode != 0 and "client" in r.stderr + r.stdout else 1)
PY

# Failover by hand: demote node0, promote node1, write through node1.
"$REPLCTL" -s "$(sock node0)" secondary >/dev/null || fail "demoting node0 failed"
[ "$(role node0)" = Secondary ] || fail "node0 is $(role node0) after secondary"
"$REPLCTL" -s "$(sock node1)" primary >/dev/null || fail "promoting node1 failed"
[ "$(role node1)" = Primary ] || fail "node1 is $(role node1) after primary"
wait_for node0 '.peers[0].role == "Primary"' 10
# node0 now refuses clients and names node1.
nbdinfo "$(uri node0)" >/dev/null 2>&1 && fail "node0 still serves clients"
grep -q "the primary is node1" "$tmpdir/node0.log" || fail "node0 does not name node1 as primary"

head -c 8M /dev/urandom >"$tmpdir/b"
timed 30 nbdcopy "$tmpdir/b" "nbd://127.0.0.1:${NBD_PORT[node1]}" || fail "nbdcopy to node1 failed"
wait_uptodate node1 30
same_disks node0 node1
cmp -n 8M "$tmpdir/b" "$(disk node0)" || fail "node0 lacks what was written through node1"

# node0, restarted while node1 writes, is behind: not UpToDate, so only
# --force may promote it ... and not while node1 is primary anyway.
kill_node node0
timed 30 nbdsh -u "nbd://127.0.0.1:${NBD_PORT[node1]}" -c "h.pwrite(b'z' * 4096, 0)" ||
    fail "write through node1 with node0 down failed"
start_node node0
wait_uptodate node1 30
same_disks node0 node1
# No primary at all; node0 invalidated (not UpToDate): it may not be
# promoted without --force; node1 may, and node0 then gets a full sync.
# (node1 is stopped meanwhile: with no primary, an UpToDate secondary
# would resync node0 at once.)
"$REPLCTL" -s "$(sock node1)" secondary >/dev/null || fail "demoting node1 failed"
stop_node node1
"$REPLCTL" -s "$(sock node0)" invalidate >/dev/null || fail "invalidate on node0 failed"
wait_for node0 '.disk == "Inconsistent"' 10
"$REPLCTL" -s "$(sock node0)" primary >"$tmpdir/err" 2>&1 &&
    fail "node0 was promoted with an Inconsistent disk and no --force"
grep -q "not UpToDate; --force" "$tmpdir/err" || fail "unclear refusal: $(cat "$tmpdir/err")"
start_node node1
"$REPLCTL" -s "$(sock node1)" primary >/dev/null || fail "promoting node1 again failed"
wait_uptodate node1 30
same_disks node0 node1
info "ok: failover by hand; writes through the new primary replicated back"
