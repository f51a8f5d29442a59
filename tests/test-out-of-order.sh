#!/usr/bin/env bash
# Messages out of order: a fake primary (tests/peerwire.py) completes
# the handshake with a fresh, Inconsistent node and then sends resync
# messages that belong to no running resync:
#
#  - RESYNC_DONE with no RESYNC_START and no data before it;
#  - RESYNC_DATA with no RESYNC_START before it;
#  - BITMAP_DONE while no bitmap exchange runs (the node is the sync
#    target: it sends its bitmap, it receives none).
#
# Each must be a protocol error: one log line naming the message, the
# connection dropped, and nothing changed: the node stays Inconsistent
# (status, and in its metadata: not consistent, still fresh), its disk
# is untouched.  A RESYNC_DONE taken at its word would make the node
# UpToDate in the fake peer's generation with none of its data.
source "$(dirname "$0")/functions.sh"
umask 077                       # its configurations hold a secret
requires jq --version

make_config 2 C 1M
port=$(awk '/name: node1/{f=1} f && /address:/{split($2,a,":"); print a[2]; exit}' "$CONFIG")
log1="$tmpdir/node1.log"

# fresh_node1: node1 (re)started on a zeroed disk with no metadata: it
# creates fresh metadata and is Inconsistent.
fresh_node1 ()
{
    stop_node node1
    rm -f "$(disk node1)" "$(disk node1).meta"
    truncate -s 1M "$(disk node1)"
    start_node node1
    wait_for node1 '.disk == "Inconsistent"' 10
}

# fake CASE: handshake as node0 (Primary, UpToDate, a real generation),
# send the case's messages, print "closed" if node1 then drops the
# connection, "timeout" if it keeps it.
fake ()
{
    /usr/bin/python3 - "$port" "$1" <<'PY'
import socket, struct, sys, time
from peerwire import *
port, case = int(sys.argv[1]), sys.argv[2]
SIZE = 1 << 20

def fake_handshake(s):
    """The whole handshake, as node 0 (Primary, UpToDate) to node 1, no
    secret: the HELLOs, then the HELLO_STATEs (peerwire.handshake)."""
    handshake(s, 0, 1, PRIMARY, UPTODATE, SIZE,
              current=0x1234567890abcdef, flags=5)  # Consistent|Primary

RESYNC_START, RESYNC_DONE, BITMAP_DONE = 8, 10, 15
s = socket.create_connection(("127.0.0.1", port), timeout=5)
fake_handshake(s)
msgs = {
  "done-alone": hdr(RESYNC_DONE, seq=1),
  "data-alone": hdr(RESYNC_DATA, length=4096, count=4096, seq=1, off=8192)
                + b"D" * 4096,
  "bitmap-done": hdr(BITMAP_DONE, off=8),
}
s.sendall(msgs[case])
# Keep the link alive with PINGs (ping-timeout is 3 s), for 4 s at most:
# only a refusal closes it.
s.settimeout(0.5)
deadline = time.monotonic() + 4
try:
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)     # the node's BITMAP, PINGs, ACKs
        except socket.timeout:
            s.sendall(hdr(PING))
            continue
        if not chunk:
            print("closed"); sys.exit(0)
    print("kept")
except (ConnectionResetError, BrokenPipeError):
    print("closed")
PY
}

# still_inconsistent WHEN: the node, its metadata and its disk are as
# they were.
still_inconsistent ()
{
    local st md bad=0
    st=$(status_json node1) || fail "$1: control socket dead"
    jq -e '.disk == "Inconsistent"' <<<"$st" >/dev/null || {
        echo "$test_name: FAIL: $1: node1 is $(jq -r .disk <<<"$st"), not Inconsistent: $(jq -c '{disk, peers: [.peers[] | {connection, replication, out_of_sync_bytes}]}' <<<"$st")" >&2
        bad=1
    }
    md=$("$REPLCTL" -c "$CONFIG" -n node1 dump-md) || fail "$1: dump-md failed"
    if grep -E '^flags:.*\bconsistent\b' <<<"$md" >/dev/null; then
        echo "$test_name: FAIL: $1: node1's metadata says consistent: $(grep -E '^(flags|current-uuid):' <<<"$md" | tr '\n' ' ')" >&2
        bad=1
    fi
    grep -q '^current-uuid: 0x0000000000000004$' <<<"$md" || {
        echo "$test_name: FAIL: $1: node1's metadata took a generation: $(grep '^current-uuid:' <<<"$md")" >&2
        bad=1
    }
    cmp -s "$(disk node1)" <(head -c 1M /dev/zero) || {
        echo "$test_name: FAIL: $1: node1's disk was written" >&2
        bad=1
    }
    return $bad
}

# expect CASE MESSAGE: on a fresh node1, the case ends in a protocol
# error naming MESSAGE, and node1 is left as it was.  Every case runs;
# the failures are counted at the end.
failures=0
expect ()
{
    local case=$1 msg=$2 out before bad
    fresh_node1
    before=$(wc -l <"$log1")
    out=$(fake "$case") || fail "$case: the fake primary failed: $out"
    bad=0
    [ "$out" = closed ] || {
        echo "$test_name: FAIL: $case: $msg out of order was not refused: the connection stayed up ($out)" >&2
        bad=1
    }
    tail -n +"$((before + 1))" "$log1" | grep -q "protocol error.*$msg" || {
        echo "$test_name: FAIL: $case: no protocol error naming $msg in the log: $(tail -n +"$((before + 1))" "$log1" | grep -i "peer node0" | tail -n 3 | tr '\n' '|')" >&2
        bad=1
    }
    kill -0 "${PID[node1]}" || fail "$case: node1 died"
    still_inconsistent "$case" || bad=1
    if [ $bad -ne 0 ]; then
        failures=$((failures + 1))
        return 0
    fi
    info "$case: refused: $(tail -n +"$((before + 1))" "$log1" | grep "protocol error" | head -n 1)"
}

expect bitmap-done BITMAP_DONE
expect data-alone  RESYNC_DATA
expect done-alone  RESYNC_DONE
[ "$failures" -eq 0 ] || fail "$failures of 3 out-of-order messages were accepted"
info "ok"
