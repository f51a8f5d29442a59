#!/usr/bin/env bash
# A fake primary (a Python script speaking the wire protocol) connects to
# a real secondary and sends malformed messages after a good handshake.
# Each must end that connection with a log line naming the problem,
# write nothing to the disk, and leave the secondary running; a correct
# WRITE afterwards is applied and acknowledged.
source "$(dirname "$0")/functions.sh"
umask 077                       # its configurations hold a secret
requires jq --version

make_config 2 C 1M
start_node node1
port=$(awk '/name: node1/{f=1} f && /address:/{split($2,a,":"); print a[2]; exit}' "$CONFIG")
log1="$tmpdir/node1.log"

# fake CASE: handshake as node0 (Primary), send one message, report what
# came back.
fake ()
{
    /usr/bin/python3 - "$port" "$1" "$(disk node1)" <<'PY'
import socket, struct, sys
from peerwire import *
port, case = int(sys.argv[1]), sys.argv[2]
SIZE = 1 << 20
s = socket.create_connection(("127.0.0.1", port), timeout=10)
# node 0 (Primary, UpToDate) to node 1, no secret; generation UUIDs:
# a current UUID, no bitmap or history, flags Consistent | Primary;
# primary since 0 (never).
try:
    handshake(s, 0, 1, PRIMARY, UPTODATE, SIZE, current=0x1234567890abcdef,
              flags=5)
except ConnectionError:
    sys.exit("no handshake with the secondary")
W = WRITE
msgs = {
  "past-end":   hdr(W, length=4096, count=4096, seq=1, off=SIZE - 512) + b"x" * 4096,
  "overflow":   hdr(TRIM, count=4096, seq=1, off=(1 << 64) - 1024),
  "len-count":  hdr(W, length=512, count=4096, seq=1) + b"x" * 512,
  "bad-seq":    hdr(W, length=512, count=512, seq=5) + b"x" * 512,
  # (RESYNC_DATA only arrives in a resync: RESYNC_START first.)
  "misaligned": hdr(8, seq=1, off=SIZE)
                + hdr(RESYNC_DATA, length=4096, count=4096, seq=2, off=512) + b"x" * 4096,
  "bad-type":   hdr(77, seq=1),
  "bad-magic":  hdr(W, length=512, count=512, seq=1, magic=0xdeadbeef) + b"x" * 512,
  "bad-flags":  hdr(W, flags=0x80, length=512, count=512, seq=1) + b"x" * 512,
  "huge":       hdr(W, length=0xffffffff, count=0xffffffff, seq=1),
  "good":       hdr(W, length=512, count=512, seq=1, off=4096) + b"G" * 512,
  "cut-off":    hdr(W, length=4096, count=4096, seq=1, off=8192) + b"C" * 100,
  "ping-flood": hdr(PING) * 20000
                + hdr(W, length=512, count=512, seq=1, off=4096) + b"G" * 512,
}
s.sendall(msgs[case])
if case == "cut-off":
    s.shutdown(socket.SHUT_WR)          # the rest never comes
# Read until the secondary closes or acknowledges.
got = b""
try:
    while True:
        chunk = s.recv(4096)
        if not chunk: break
        got += chunk
        # Skip PINGs; look for an ACK of seq 1.
        while len(got) >= 32:
            magic, t, fl, ln, cnt, seq, off = struct.unpack(">IHHIIQQ", got[:32])
            got = got[32 + ln:]
            if t == ACK and seq == 1:
                print("acked"); sys.exit(0)
except socket.timeout:
    print("timeout"); sys.exit(0)
print("closed")
PY
}

expect ()
{
    local case=$1 pattern=$2 out
    out=$(fake "$case") || fail "$case: fake primary failed: $out"
    [ "$out" = closed ] || fail "$case: expected the secondary to close, got '$out'"
    grep -q -- "$pattern" "$log1" || fail "$case: log lacks '$pattern'"
    kill -0 "${PID[node1]}" || fail "$case: the secondary died"
    info "$case: refused: $(grep -- "$pattern" "$log1" | tail -n1)"
}

expect past-end   "WRITE: offset 1048064 + count 4096 beyond the end"
expect overflow   "TRIM: offset 18446744073709550592 + count 4096 overflows"
expect len-count  "WRITE: length 512 != count 4096"
expect bad-seq    "sequence number 5, expected 1"
expect misaligned "RESYNC_DATA: offset 512 not a multiple"
expect bad-type   "protocol error: .*type 77"
expect bad-magic  "bad magic 0xdeadbeef"
expect bad-flags  "WRITE: flags 0x80 not allowed"
expect huge       "length 4294967295 > maximum"

expect cut-off    "connection closed by peer in the middle of a message (132 bytes of it received)"

# Nothing of the above reached the disk.
cmp -s "$(disk node1)" <(head -c 1M /dev/zero) || fail "bad messages changed the disk"

out=$(fake good)
[ "$out" = acked ] || fail "good WRITE: expected an ACK, got '$out'"
cmp -s <(dd if="$(disk node1)" bs=512 skip=8 count=1 status=none) <(printf 'G%.0s' $(seq 512)) ||
    fail "good WRITE not on the disk"
status_json node1 >/dev/null || fail "control socket dead"

# A flood of 20000 PINGs, then the good write: still served.
out=$(fake ping-flood)
[ "$out" = acked ] || fail "after a flood of pings: expected an ACK, got '$out'"
info "ping-flood: 20000 PINGs, then a WRITE acknowledged"

# Two connections claiming to be node0: the second replaces the first
# (a node that restarted before we noticed), which is closed and logged.
/usr/bin/python3 - "$port" <<'PY' || fail "the duplicate connections test failed"
import socket, sys
from peerwire import *
port = int(sys.argv[1])
def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    handshake(s, 0, 1, PRIMARY, UPTODATE, 1 << 20,
              current=0x1234567890abcdef, flags=5)
    return s
a = connect()
b = connect()
a.settimeout(10)
try:
    while a.recv(4096):
        pass                           # PINGs, until node1 closes it
except socket.timeout:
    sys.exit("the first connection was not closed")
b.close()
PY
grep -q "peer connected again; replacing the old connection" "$log1" ||
    fail "the second connection as node0 was not logged"
status_json node1 >/dev/null || fail "control socket dead after the duplicate connections"
info "same node id twice: the first connection closed, logged"

# A connection that stalls in its handshake and finishes it after a newer
# connection from the same node was handed over (handshakes run in
# parallel): it is dropped and logged; the newer link stays and works.
/usr/bin/python3 - "$port" <<'PY' || fail "the stale handshake test failed"
import socket, struct, sys
from peerwire import *
port = int(sys.argv[1])
h = hello(0, 1)
old = socket.create_connection(("127.0.0.1", port), timeout=10)
old.sendall(h[:HDR_SIZE + 16])          # accepted first; stalls
new = socket.create_connection(("127.0.0.1", port), timeout=10)
# Handed over: node1's peer thread answered with its HELLO_STATE.
handshake(new, 0, 1, PRIMARY, UPTODATE, 1 << 20,
          current=0x1234567890abcdef, flags=5)
old.sendall(h[HDR_SIZE + 16:])          # the old handshake ends now
answer = b""
try:
    while True:                         # until node1 closes it
        chunk = old.recv(4096)
        if not chunk:
            break
        answer += chunk
except socket.timeout:
    sys.exit("the stale connection was not closed")
# The listener's HELLO at most (no secret: nothing to authenticate);
# a HELLO_STATE would come from the peer thread, after a hand-over.
if answer not in (b"", hello(1, 0)):
    sys.exit("the stale connection was answered beyond the HELLO: it "
             "replaced the newer one")
new.sendall(hdr(WRITE, length=512, count=512, seq=1, off=12288) + b"N" * 512)
got = b""
while True:
    chunk = new.recv(4096)
    if not chunk:
        sys.exit("the newer connection was closed")
    got += chunk
    while len(got) >= HDR_SIZE:
        magic, t, fl, ln, cnt, seq, off = struct.unpack(">IHHIIQQ", got[:HDR_SIZE])
        if len(got) < HDR_SIZE + ln:
            break
        got = got[HDR_SIZE + ln:]
        if t == ACK and seq == 1:
            sys.exit(0)
PY
grep -q "finished its handshake after a newer one from the same node; dropped" "$log1" ||
    fail "the stale connection was not logged"
cmp -s <(dd if="$(disk node1)" bs=512 skip=24 count=1 status=none) <(printf 'N%.0s' $(seq 512)) ||
    fail "the WRITE on the newer connection is not on the disk"
info "stale handshake: dropped and logged, the newer connection kept"
info "ok"
