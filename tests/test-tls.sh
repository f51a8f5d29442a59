#!/usr/bin/env bash
# TLS on the replication link (tls: true).
#  - With a pre-shared key from the secret: nodes connect and sync; what
#    crosses the wire (recorded by a relay in the middle) starts with a
#    TLS record and never shows the data written.
#  - A node without tls: true, and a node with another secret, are
#    refused on both sides with a line that says why; the primary keeps
#    serving.
#  - With certificates: nodes whose certificates the CA signed and that
#    name them connect; a certificate from another CA is refused; a
#    client whose certificate names another node than its hello is
#    refused; a certificate that does not name the node itself, or a key
#    that does not match it, stops the node at start with a clear error.
source "$(dirname "$0")/functions.sh"
umask 077                       # its configurations hold a secret
requires jq --version
requires openssl version

SECRET="correct horse battery staple"
make_config 2 C 16M
base="$tmpdir/base.yaml"
cp "$CONFIG" "$base"
port_of () { sed -n "/name: $1\$/,/disk:/s/.*address: 127.0.0.1:\([0-9]*\)/\1/p" "$2"; }
port1=$(port_of node1 "$base")
# with TLS=... SECRET=... OUT: the base config with those settings.
with () {
    local out=$1; shift
    { sed -n '1,/^protocol:/p' "$base"; printf '%s\n' "$@"; sed '1,/^protocol:/d' "$base"; } > "$out"
}
write_random () {   # write_random NODE OFFSET MIB: random data, flushed
    timed 60 nbdsh -u "$(uri "$1")" -c "
import os
h.pwrite(os.urandom($3 << 20), $2); h.flush()" || fail "write to $1 failed"
}

# --- PSK: connect, sync, and nothing readable on the wire -------------
# node0 reaches node1 through a relay that records both directions.
proxy_port=$(free_port)
with "$tmpdir/psk.yaml" "secret: \"$SECRET\"" "tls: true"
sed "s/127.0.0.1:$port1/127.0.0.1:$proxy_port/" "$tmpdir/psk.yaml" > "$tmpdir/psk-via-proxy.yaml"
/usr/bin/python3 - "$proxy_port" "$port1" "$tmpdir/wire" > "$tmpdir/proxy.log" 2>&1 <<'PY' &
import socket, sys, threading, time
lport, dport, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", lport)); ls.listen(8); ls.settimeout(1)
f = open(out, "wb"); lock = threading.Lock()
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d: break
            with lock: f.write(d); f.flush()
            b.sendall(d)
    except OSError: pass
    for s in (a, b):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
end = time.time() + 120                 # bounded: gone after 2 minutes
while time.time() < end:
    try: c, _ = ls.accept()
    except socket.timeout: continue
    try: d = socket.create_connection(("127.0.0.1", dport), timeout=5)
    except OSError: c.close(); continue
    for a, b in ((c, d), (d, c)):
        threading.Thread(target=pump, args=(a, b), daemon=True).start()
PY
proxy_pid=$!
cleanup_fn "kill $proxy_pid 2>/dev/null || true"
CONFIG="$tmpdir/psk-via-proxy.yaml" start_node node0 role=primary
CONFIG="$tmpdir/psk.yaml" start_node node1
wait_uptodate node0 30
MARKER="nbdrepl-tls-test-plaintext-marker-"
timed 30 nbdsh -u "$(uri node0)" -c "
m = b'$MARKER' * 128
h.pwrite(m[:4096] * 256, 1 << 20); h.flush()" || fail "write failed"
write_random node0 $((4 << 20)) 4
wait_uptodate node0 30
same_disks node0 node1
grep -q "$MARKER" "$(disk node1)" || fail "the marker did not reach node1's disk"
[ "$(stat -c %s "$tmpdir/wire")" -gt $((5 << 20)) ] ||
    fail "the relay saw only $(stat -c %s "$tmpdir/wire") bytes: the data did not go through it"
[ "$(head -c 1 "$tmpdir/wire" | od -An -tx1 | tr -d ' ')" = 16 ] ||
    fail "the connection does not start with a TLS handshake record"
if grep -q -a "$MARKER" "$tmpdir/wire"; then fail "the data written crossed the wire in plain text"; fi
if grep -q -a "NBRP" "$tmpdir/wire"; then fail "protocol headers crossed the wire in plain text"; fi
[ "$(status_json node0 | jq -r .tls)" = psk ] || fail "status does not say tls psk"
"$REPLCTL" -s "$(sock node0)" status | grep -q "link: tls:psk auth:secret" ||
    fail "human status lacks the link line"
# Who encrypts on the connection: OpenSSL, or the kernel where it has
# kernel TLS (the "tls" ULP; this test does not load it).
path=$(status_json node0 | jq -r '.peers[0].tls')
case "$path" in
    openssl|ktls|ktls-tx|ktls-rx) ;;
    *) fail "status does not say who encrypts on the connection (tls: $path)" ;;
esac
if ! grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp; then
    [ "$path" = openssl ] || fail "the kernel has no TLS, yet status says tls: $path"
fi
"$REPLCTL" -s "$(sock node0)" status |
    grep -q "^  node1 .*connection:Connected .* tls:$path\$" ||
    fail "human status lacks tls:$path on node1's line"
info "psk: the connection's TLS runs in $path"
info "psk: synced; $(stat -c %s "$tmpdir/wire") bytes on the wire, none in plain text"
stop_node node1
kill "$proxy_pid" 2>/dev/null || true

# --- A node without tls: true: refused on both sides ------------------
stop_node node0
with "$tmpdir/plain.yaml" "secret: \"$SECRET\""
CONFIG="$tmpdir/psk.yaml" start_node node0 role=primary
CONFIG="$tmpdir/plain.yaml" start_node node1
wait_log node1 "bad hello: the peer speaks TLS and this node does not: set tls: true on every node"
wait_log node0 "peer node1: connect to 127.0.0.1:$port1: TLS handshake: .*(set tls: true on every node\|does it have tls: true"
write_random node0 0 1
[ "$(status_json node0 | jq -r '.peers[0].connection')" != Connected ] || fail "a plain node got connected"
info "plain peer: refused on both sides, node0 serves"
stop_node node1

# --- TLS with another secret -------------------------------------------
with "$tmpdir/other.yaml" "secret: \"not the right secret\"" "tls: true"
CONFIG="$tmpdir/other.yaml" start_node node1
wait_log node1 "connection from 127.0.0.1:[0-9]*: TLS handshake"
wait_log node0 "peer node1: connect to 127.0.0.1:$port1: TLS handshake"
write_random node0 0 1
[ "$(status_json node0 | jq -r '.peers[0].connection')" != Connected ] || fail "a node with another secret got connected"
info "other secret: refused, node0 serves"
stop_node node1

# --- A peer that stops (SIGSTOP) with data in flight -------------------
# node0 gives it up (ping-timeout or write timeout), keeps serving, and
# still stops promptly: its TLS relay, blocked sending to the stopped
# peer, must not hold the node.
CONFIG="$tmpdir/psk.yaml" start_node node1
wait_uptodate node0 30
kill -STOP "${PID[node1]}"
cleanup_fn "kill -CONT ${PID[node1]} 2>/dev/null || true"
write_random node0 0 16
wait_log node0 "peer node1: .*\(ping-timeout\|timeout\)" 20
write_random node0 0 1
kill "${PID[node0]}"
for (( i=0; i<150; i++ )); do kill -0 "${PID[node0]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${PID[node0]}" 2>/dev/null && fail "node0 did not stop within 15 s with a stopped TLS peer"
wait "${PID[node0]}" 2>/dev/null || true
PID[node0]=
kill -CONT "${PID[node1]}"
stop_node node1
info "stopped peer: given up, node0 served and stopped promptly"

# --- Certificates ------------------------------------------------------
cd "$tmpdir"
mkca () {   # mkca NAME
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$1.key" -out "$1.crt" -days 2 -subj "/CN=$1" 2>/dev/null ||
        fail "openssl: cannot make CA $1"
}
mkcert () {   # mkcert CA NAME FILE
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$3.key" -out "$3.csr" -subj "/CN=$2" 2>/dev/null &&
    printf 'subjectAltName=DNS:%s\n' "$2" > "$3.ext" &&
    openssl x509 -req -in "$3.csr" -CA "$1.crt" -CAkey "$1.key" \
        -CAcreateserial -days 2 -extfile "$3.ext" -out "$3.crt" 2>/dev/null ||
        fail "openssl: cannot make the certificate $3"
}
mkca ca
mkca rogue-ca
mkcert ca node0 node0
mkcert ca node1 node1
mkcert rogue-ca node1 rogue-node1
cd - >/dev/null

certs () {   # certs OUT CERT0 CERT1: per-node certificates
    with "$1" "tls: true" "tls-ca: ca.crt"
    sed -i -e "/name: node0\$/,/control:/s|control: node0.sock|&\n    tls-cert: $2.crt\n    tls-key: $2.key|" \
           -e "/name: node1\$/,/control:/s|control: node1.sock|&\n    tls-cert: $3.crt\n    tls-key: $3.key|" "$1"
}
certs "$tmpdir/certs.yaml" node0 node1
CONFIG="$tmpdir/certs.yaml"
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
write_random node0 0 2
wait_uptodate node0 30
same_disks node0 node1
[ "$(status_json node1 | jq -r .tls)" = certificates ] || fail "status does not say tls certificates"
info "certificates: connected and synced"

# node1 with a certificate from another CA: node0 refuses it.
stop_node node1
certs "$tmpdir/rogue.yaml" node0 rogue-node1
CONFIG="$tmpdir/rogue.yaml" start_node node1
wait_log node0 "peer node1: connect to 127.0.0.1:$port1: TLS handshake: the peer's certificate: unable to get local issuer certificate"
write_random node0 0 1
info "certificate from another CA: refused"
stop_node node1

# The cipher suite: nodes use the one the dialling node puts first,
# AES-128-GCM (common/tls.c; OpenSSL's own order puts AES-256-GCM
# first).  openssl s_server with node1's certificate stands in for
# node1 and says what node0 agreed to.  Its standard input is a FIFO
# held open here: at the end of its input it would stop at once.
mkfifo "$tmpdir/s_server.in"
exec 7<>"$tmpdir/s_server.in"
( cd "$tmpdir" && exec timeout 30 openssl s_server -naccept 1 -tls1_3 \
      -accept "$port1" -cert node1.crt -key node1.key -CAfile ca.crt \
      -Verify 2 ) <&7 > "$tmpdir/s_server.out" 2>&1 &
s_server=$!
for (( i=0; i<300; i++ )); do
    grep -q "^CIPHER is" "$tmpdir/s_server.out" && break
    sleep 0.1
done
kill "$s_server" 2>/dev/null || true
wait "$s_server" 2>/dev/null || true
exec 7>&-
grep -q "^CIPHER is TLS_AES_128_GCM_SHA256\$" "$tmpdir/s_server.out" ||
    fail "certificates: not TLS_AES_128_GCM_SHA256: $(grep -a -i cipher "$tmpdir/s_server.out")"
info "certificates: the nodes agree on TLS_AES_128_GCM_SHA256"

# A client whose certificate (node1's, valid) names another node than the
# node0 its hello claims: node1 refuses it after the hello, and sends
# it nothing.
stop_node node0
start_node node1
/usr/bin/python3 - "$port1" "$tmpdir" <<'PY' || fail "the fake node0 failed"
import socket, ssl, sys
from peerwire import *
port, d = int(sys.argv[1]), sys.argv[2]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.load_cert_chain(d + "/node1.crt", d + "/node1.key")
ctx.load_verify_locations(d + "/ca.crt")
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                    server_hostname="node1")
s.sendall(hello(0, 1))
try:
    got = s.recv(4096)
except (ConnectionError, ssl.SSLError):
    got = b""
s.close()
if got:
    sys.exit("node1 answered a client it refuses: %r" % got[:64])
PY
wait_log node1 "connection from 127.0.0.1:[0-9]* (node node0): refusing connection: its TLS certificate does not name node node0"
status_json node1 >/dev/null || fail "node1 stopped answering after the fake node0"
info "certificate naming another node: refused"
stop_node node1

# Start-time errors: the node's own certificate must name it, and the key
# must be the certificate's.
certs "$tmpdir/wrong-name.yaml" node1 node1
if timeout 20 nbdkit -f -p "${NBD_PORT[node0]}" "$PLUGIN" config="$tmpdir/wrong-name.yaml" \
        node=node0 > "$tmpdir/wrong-name.log" 2>&1; then
    fail "node0 started with node1's certificate"
fi
grep -q "tls-cert .*node1.crt does not name node node0" "$tmpdir/wrong-name.log" ||
    fail "no clear error for a certificate naming another node: $(cat "$tmpdir/wrong-name.log")"
certs "$tmpdir/wrong-key.yaml" node0 node1
sed -i "/name: node0\$/,/tls-key:/s|tls-key: node0.key|tls-key: node1.key|" "$tmpdir/wrong-key.yaml"
if timeout 20 nbdkit -f -p "${NBD_PORT[node0]}" "$PLUGIN" config="$tmpdir/wrong-key.yaml" \
        node=node0 > "$tmpdir/wrong-key.log" 2>&1; then
    fail "node0 started with a key that is not its certificate's"
fi
grep -q "tls-key .*node1.key does not match tls-cert .*node0.crt" "$tmpdir/wrong-key.log" ||
    fail "no clear error for a mismatched key: $(cat "$tmpdir/wrong-key.log")"
info "ok: start-time certificate errors are clear"
