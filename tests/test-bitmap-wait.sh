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
import socket, struct, sys, time
port = int(sys.argv[1])
def hdr(t, length=0):
    return struct.pack(">IHHIIQQ", 0x4e425250, t, 0, length, 0, 0, 0)
def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise ConnectionError("closed")
        b += c
    return b
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port)); ls.listen(1); ls.settimeout(30)
s, _ = ls.accept()
recv_exact(s, 32 + 144)                     # node0's hello
# node1, Secondary, Inconsistent, no generation yet: node0 will be its
# sync source and wait for its bitmap, which never comes.
hello = (struct.pack(">IIIIIIQ", 3, 0, 1, 0, 0, 0, 16 << 20) + b"r0".ljust(64, b"\0")
         + struct.pack(">QQQQII", 0, 0, 0, 0, 0, 0) + struct.pack(">Q", 0))
s.sendall(hdr(1, len(hello)) + hello)
s.settimeout(0.3)
start = time.time()
while time.time() - start < 30:             # bounded
    try:
        s.sendall(hdr(2))                   # PING: the link is alive
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
