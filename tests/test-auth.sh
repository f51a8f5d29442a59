#!/usr/bin/env bash
# Authentication with the shared secret: nodes with the same secret
# connect and sync; a node with another secret, or with none, is refused
# on both sides with the peer's address in the log, while the primary
# keeps serving; secret-file works; the secret appears in no log, status
# or dump-md; a fake peer that sends our own challenge back (a
# reflection) is refused; a node without a secret warns at start; with
# three nodes, a stranger cannot use one node to answer another's
# challenge (an oracle).
source "$(dirname "$0")/functions.sh"
umask 077                       # its configurations hold a secret
requires jq --version

SECRET="correct horse battery staple"
make_config 2 C 16M
base="$tmpdir/base.yaml"
cp "$CONFIG" "$base"
with_secret () { sed "s/^protocol: C/&\nsecret: \"$1\"/" "$base" > "$2"; }

# Same secret: connected, synced.
with_secret "$SECRET" "$CONFIG"
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'a' * 4096, 0); h.flush()" || fail "write failed"
wait_uptodate node0 30
same_disks node0 node1
info "same secret: connected"

# node1 with another secret: refused on both sides, node0 keeps serving.
stop_node node1
with_secret "not the right secret" "$tmpdir/other.yaml"
CONFIG_NODE0=$CONFIG
CONFIG="$tmpdir/other.yaml"
start_node node1
CONFIG=$CONFIG_NODE0
wait_log node0 "connection to 127.0.0.1:[0-9]* (node node1): authentication failed: wrong answer to our challenge"
wait_log node1 "connection from 127.0.0.1:[0-9]* (node node0): authentication failed: wrong answer to our challenge"
grep -q "authentication failed" "$tmpdir/node1.log" || fail "node1 does not log the failed authentication"
timed 30 nbdsh -u "$(uri node0)" -c "h.pwrite(b'b' * 4096, 4096); h.flush()" ||
    fail "node0 stopped serving after a wrong secret"
[ "$(status_json node0 | jq -r '.peers[0].connection')" != Connected ] || fail "node1 got connected with a wrong secret"
info "wrong secret: refused, node0 serves"

# node1 with no secret at all.
stop_node node1
CONFIG="$base"
start_node node1
CONFIG=$CONFIG_NODE0
wait_log node1 "has a secret and this node has none"
grep -q "warning: resource r0 has no secret" "$tmpdir/node1.log" || fail "node1 did not warn that it has no secret"
info "no secret: refused, and warned at start"

# secret-file, the right secret: node1 catches up.
stop_node node1
printf '%s\n' "$SECRET" > "$tmpdir/secret"
chmod 600 "$tmpdir/secret"
sed "s|^protocol: C|&\nsecret-file: secret|" "$base" > "$tmpdir/file.yaml"
CONFIG="$tmpdir/file.yaml"
start_node node1
CONFIG=$CONFIG_NODE0
wait_uptodate node0 30
same_disks node0 node1
info "secret-file: connected and resynced"

# The secret is never shown.
if grep -q "$SECRET" "$tmpdir"/*.log; then fail "the secret is in a log"; fi
if status_json node0 | grep -q "$SECRET"; then fail "the secret is in status"; fi
if "$REPLCTL" -c "$CONFIG" -n node1 dump-md 2>&1 | grep -q "$SECRET"; then fail "the secret is in dump-md"; fi

# A fake node0 that sends node1's own challenge back (a reflection).
# node1 accepts connections from node0 (the lower id dials).
stop_node node1
stop_node node0
start_node node1
port1=$(sed -n '/name: node1/,/disk:/s/.*address: 127.0.0.1:\([0-9]*\)/\1/p' "$CONFIG")
/usr/bin/python3 - "$port1" <<'PY' || fail "the fake peer failed"
import socket, sys
from peerwire import *
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
# node0, feature AUTH.
s.sendall(hello(0, 1, features=FEATURE_AUTH))
expect(s, HELLO)                        # node1's hello
challenge = expect(s, AUTH_CHALLENGE)
s.sendall(hdr(AUTH_CHALLENGE, length=32) + challenge)   # its own back
try:
    got = s.recv(4096)                  # node1 closes
except ConnectionError:
    got = b""
s.close()
if got:
    sys.exit("node1 answered a reflection: %r" % got[:64])
PY
wait_log node1 "connection from 127.0.0.1:[0-9]* (node node0): authentication failed: the peer sent our own challenge back (a reflection)"
status_json node1 >/dev/null || fail "node1 stopped answering after the fake peer"
info "ok: reflection refused; the nodes kept serving throughout"

# Three nodes: a stranger cannot use one node to answer another's
# challenge.  It asks node2 to authenticate it as node1 (node2 accepts
# node1), and passes node2's challenge on to node1 in a connection that
# claims to be node0 (node1 accepts node0): node1's answer there is
# meant for node0, and node2 must not take it for node1's.
stop_node node1
make_config 3 C 16M
sed -i "s/^protocol: C/&\nsecret: \"$SECRET\"/" "$CONFIG"
start_node node1
start_node node2
wait_for node2 '.peers[] | select(.name == "node1") | .connection == "Connected"' 30
port1=$(sed -n '/name: node1$/,/disk:/s/.*address: 127.0.0.1:\([0-9]*\)/\1/p' "$CONFIG")
port2=$(sed -n '/name: node2$/,/disk:/s/.*address: 127.0.0.1:\([0-9]*\)/\1/p' "$CONFIG")
/usr/bin/python3 - "$port1" "$port2" <<'PY' || fail "the oracle attack: $?"
import os, socket, sys
from peerwire import *
port1, port2 = int(sys.argv[1]), int(sys.argv[2])
to2 = socket.create_connection(("127.0.0.1", port2), timeout=10)
to2.sendall(hello(1, 2, features=FEATURE_AUTH))     # "I am node1"
expect(to2, HELLO)
c2 = expect(to2, AUTH_CHALLENGE)                    # node2's challenge
to2.sendall(hdr(AUTH_CHALLENGE, length=AUTH_SIZE) + os.urandom(AUTH_SIZE))
expect(to2, AUTH_RESPONSE)
to1 = socket.create_connection(("127.0.0.1", port1), timeout=10)
to1.sendall(hello(0, 1, features=FEATURE_AUTH))     # "I am node0"
expect(to1, HELLO)
expect(to1, AUTH_CHALLENGE)
to1.sendall(hdr(AUTH_CHALLENGE, length=AUTH_SIZE) + c2)
answer = expect(to1, AUTH_RESPONSE)                 # node1 answers c2
to2.sendall(hdr(AUTH_RESPONSE, length=AUTH_SIZE) + answer)
try:
    got = to2.recv(4096)
except ConnectionError:
    got = b""
if got:
    sys.exit("node2 took node1's answer to node0: it sent %r" % got[:64])
PY
wait_log node2 "connection from 127.0.0.1:[0-9]* (node node1): authentication failed: wrong answer to our challenge"
if grep -q "replacing the old connection" "$tmpdir/node2.log"; then
    fail "node2 replaced its link with node1"
fi
status_json node2 | jq -e '.peers[] | select(.name == "node1") | .connection == "Connected"' >/dev/null ||
    fail "node2 lost its link with node1"
info "ok: one node's answer is no answer for another (no oracle)"
