#!/usr/bin/env bash
# A fake secondary (a Python script speaking the wire protocol) that
# answers a FUA write of a real protocol B primary with a "received"
# ACK.  Under protocol B only writes that need not be durable may be
# acknowledged on receipt; a FUA write must be applied first.  The
# primary must take that ACK for the protocol error it is: end the
# connection with a log line naming it, not complete the write early,
# and keep serving.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 B 16M
port1=$(sed -n '/name: node1$/,/disk:/s/.*address: 127.0.0.1:\([0-9]*\)/\1/p' "$CONFIG")
"$REPLCTL" -c "$CONFIG" -n node0 create-md --in-sync >/dev/null ||
    fail "create-md --in-sync failed"
start_node node0 role=primary
current=$("$REPLCTL" -s "$(sock node0)" status |
          sed -n 's/^ *uuids current:\([0-9a-f]*\) .*/\1/p' | head -n1)
[ -n "$current" ] || fail "no current UUID in node0's status"

# The fake node1 listens where node1 would; node0 (the lower id) dials
# it.  It claims node0's generation (nothing to resync), acknowledges
# sequenced messages as applied, but answers the first WRITE carrying
# FUA with ACK + RECEIVED.
/usr/bin/python3 - "$port1" "$current" > "$tmpdir/fake.out" 2>&1 <<'PY' &
import socket, struct, sys, time
from peerwire import *
port, current = int(sys.argv[1]), int(sys.argv[2], 16)
FUA, RECEIVED = 0x1, 0x4
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port)); ls.listen(1); ls.settimeout(30)
s, _ = ls.accept()
s.settimeout(30)
handshake(s, 1, 0, SECONDARY, UPTODATE, 16 << 20, current=current,
          flags=1)                              # Consistent
s.settimeout(30)
answered = False
start = time.time()
try:
    while time.time() - start < 30:             # bounded
        h = recv_exact(s, HDR_SIZE)
        magic, t, fl, ln, cnt, seq, off = struct.unpack(">IHHIIQQ", h)
        recv_exact(s, ln)
        if t == PING:
            s.sendall(hdr(PING))                # alive
        if t == WRITE and fl & FUA and not answered:
            s.sendall(hdr(ACK, flags=RECEIVED, seq=seq))
            answered = True
            print("answered WRITE %d (FUA) with a received-ACK" % seq)
        elif 4 <= t <= 10 and seq > 0:           # WRITE .. RESYNC_DONE
            s.sendall(hdr(ACK, seq=seq))
except ConnectionError:
    print("closed" if answered else "closed before the FUA write")
    sys.exit(0 if answered else 1)
except socket.timeout:
    print("still open after 30 s"); sys.exit(1)
print("still open after 30 s"); sys.exit(1)
PY
fake_pid=$!
cleanup_fn "kill $fake_pid 2>/dev/null || true"
wait_log node0 "peer node1: connected" 15

timed 30 nbdsh -u "$(uri node0)" \
    -c "h.pwrite(b'F' * 4096, 0, nbd.CMD_FLAG_FUA)" ||
    fail "the FUA write failed"
wait_log node0 "protocol error: received-ACK [0-9]* covers WRITE [0-9]*, which must be applied first" 15
wait $fake_pid || fail "the fake secondary: $(cat "$tmpdir/fake.out")"
info "refused: $(grep -o "protocol error: received-ACK.*" "$tmpdir/node0.log" | head -n1)"

# The write is on node0's disk, and node0 serves on.
cmp -s <(head -c 4096 "$(disk node0)") <(printf 'F%.0s' $(seq 4096)) ||
    fail "the FUA write is not on node0's disk"
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'x' * 4096, 8192); h.flush()" ||
    fail "node0 stopped serving"
info "ok: node0 serves on"
