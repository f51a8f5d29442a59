#!/usr/bin/env bash
# A sync source waits for its target's bitmap before resyncing.  A peer
# that completes the handshake, keeps the link alive with PINGs but never
# sends its bitmap must not hold the connection for ever: after 5 x
# net timeout the source drops it, says why, and keeps serving.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
sed -i 's/^  timeout: 4$/  timeout: 1/' "$CONFIG"
grep -q '^  timeout: 1$' "$CONFIG" || fail "could not set timeout: 1"
port1=$(sed -n '/name: node1$/,/disk:/s/.*address: 127.0.0.1:\([0-9]*\)/\1/p' "$CONFIG")

# The fake node1 listens where node1 would; node0 (the lower id) dials it.
/usr/bin/python3 - "$port1" > "$tmpdir/fake.out" 2>&1 <<'PY' &
import socket, sys, time
from peerwire import *
port = int(sys.argv[1])
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port)); ls.listen(1); ls.settimeout(30)
s, _ = ls.accept()
s.settimeout(30)
# node1, Secondary, Inconsistent, no generation yet: node0 will be its
# sync source and wait for its bitmap, which never comes.
handshake(s, 1, 0, SECONDARY, INCONSISTENT, 16 << 20)
s.settimeout(0.3)
start = time.time()
while time.time() - start < 30:             # bounded
    try:
        s.sendall(hdr(PING))                # the link is alive
        if s.recv(65536) == b"":
            print("closed after %.1f s" % (time.time() - start)); sys.exit(0)
    except socket.timeout:
        pass
    except ConnectionError:
        print("reset after %.1f s" % (time.time() - start)); sys.exit(0)
print("still open after 30 s"); sys.exit(1)
PY
fake_pid=$!
cleanup_fn "kill $fake_pid 2>/dev/null || true"
start_node node0 role=primary
wait_log node0 "peer node1: connected" 15
wait_log node0 "peer node1: its bitmap did not arrive within [0-9.]* s of connecting; reconnecting" 20
wait $fake_pid || fail "the fake peer's connection was not dropped: $(cat "$tmpdir/fake.out")"
info "dropped: $(cat "$tmpdir/fake.out")"
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'x' * 4096, 0); h.flush()" ||
    fail "node0 stopped serving"
info "ok: node0 serves on"
