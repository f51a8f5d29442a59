#!/usr/bin/env bash
# TLS identity: a node's certificate must name it exactly.  A wildcard
# certificate (*.r0.lan, signed by the resource's CA) names no node:
#  - a node whose own certificate is the wildcard one refuses to start;
#  - a client presenting it and claiming to be a.r0.lan is refused by
#    b.r0.lan, which sends it nothing;
#  - a server presenting it where a.r0.lan dials b.r0.lan is refused by
#    a.r0.lan.
# Nodes with certificates that name them exactly connect.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires openssl version

cd "$tmpdir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout ca.key -out ca.crt -days 2 -subj "/CN=r0 CA" 2>/dev/null ||
    fail "openssl: cannot make the CA"
mkcert () {   # mkcert NAME FILE: a certificate with CN and DNS SAN NAME
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$2.key" -out "$2.csr" -subj "/CN=$1" 2>/dev/null &&
    printf 'subjectAltName=DNS:%s\n' "$1" > "$2.ext" &&
    openssl x509 -req -in "$2.csr" -CA ca.crt -CAkey ca.key \
        -CAcreateserial -days 2 -extfile "$2.ext" -out "$2.crt" 2>/dev/null ||
        fail "openssl: cannot make the certificate $2"
}
mkcert a.r0.lan a
mkcert b.r0.lan b
mkcert '*.r0.lan' wild
cd - >/dev/null

port_a=$(free_port); port_b=$(free_port)
NBD_PORT[a.r0.lan]=$(free_port); NBD_PORT[b.r0.lan]=$(free_port)
# config OUT CERT-A CERT-B
config () {
    cat > "$1" <<EOF
resource: r0
tls: true
tls-ca: ca.crt
net:
  ping-interval: 0.5
  ping-timeout: 3
  connect-retry-max: 0.5
nodes:
  - name: a.r0.lan
    id: 0
    address: 127.0.0.1:$port_a
    disk: a.img
    control: a.r0.lan.sock
    tls-cert: $2.crt
    tls-key: $2.key
  - name: b.r0.lan
    id: 1
    address: 127.0.0.1:$port_b
    disk: b.img
    control: b.r0.lan.sock
    tls-cert: $3.crt
    tls-key: $3.key
EOF
}
truncate -s 16M "$tmpdir/a.img" "$tmpdir/b.img"

# The wildcard certificate as a node's own: refused at start.
config "$tmpdir/wild-own.yaml" wild b
if timeout 20 nbdkit -f -p "${NBD_PORT[a.r0.lan]}" "$PLUGIN" \
        config="$tmpdir/wild-own.yaml" node=a.r0.lan > "$tmpdir/wild-own.out" 2>&1; then
    fail "a.r0.lan started with a wildcard certificate"
fi
grep -q "tls-cert .*wild.crt does not name node a.r0.lan" "$tmpdir/wild-own.out" ||
    fail "no clear error for a wildcard certificate: $(cat "$tmpdir/wild-own.out")"
info "a wildcard certificate as a node's own: refused at start"

# A client with the wildcard certificate claiming to be a.r0.lan.
CONFIG="$tmpdir/good.yaml"
config "$CONFIG" a b
start_node b.r0.lan
/usr/bin/python3 - "$port_b" "$tmpdir" <<'PY' || fail "the fake a.r0.lan failed"
import socket, ssl, sys
from peerwire import *
port, d = int(sys.argv[1]), sys.argv[2]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.load_cert_chain(d + "/wild.crt", d + "/wild.key")
ctx.load_verify_locations(d + "/ca.crt")
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                    server_hostname="b.r0.lan")
s.sendall(hello(0, 1))
try:
    got = s.recv(4096)
except (ConnectionError, ssl.SSLError):
    got = b""
s.close()
if got:
    sys.exit("b.r0.lan answered a client it must refuse: %r" % got[:64])
PY
wait_log b.r0.lan "connection from 127.0.0.1:[0-9]* (node a.r0.lan): refusing connection: its TLS certificate does not name node a.r0.lan"
status_json b.r0.lan >/dev/null || fail "b.r0.lan stopped answering after the fake a.r0.lan"
stop_node b.r0.lan
info "a client with a wildcard certificate: refused"

# A server with the wildcard certificate where a.r0.lan dials b.r0.lan.
/usr/bin/python3 - "$port_b" "$tmpdir" > "$tmpdir/fake-b.log" 2>&1 <<'PY' &
import socket, ssl, sys, time
port, d = int(sys.argv[1]), sys.argv[2]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.load_cert_chain(d + "/wild.crt", d + "/wild.key")
ctx.load_verify_locations(d + "/ca.crt")
ctx.verify_mode = ssl.CERT_REQUIRED
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port)); ls.listen(8); ls.settimeout(1)
end = time.time() + 60                  # bounded: gone after a minute
while time.time() < end:
    try: c, _ = ls.accept()
    except socket.timeout: continue
    c.settimeout(5)
    try:
        t = ctx.wrap_socket(c, server_side=True)
        print("handshake completed", flush=True)
        t.close()
    except (OSError, ssl.SSLError) as e:
        print("refused:", e, flush=True)
        c.close()
PY
fake_pid=$!
cleanup_fn "kill $fake_pid 2>/dev/null || true"
start_node a.r0.lan role=primary
wait_log a.r0.lan "peer b.r0.lan: connect to 127.0.0.1:$port_b: TLS handshake: the peer's certificate: .*hostname mismatch" 20
grep -q "handshake completed" "$tmpdir/fake-b.log" &&
    fail "a.r0.lan completed a TLS handshake with a wildcard certificate"
kill "$fake_pid" 2>/dev/null || true
wait "$fake_pid" 2>/dev/null || true
info "a server with a wildcard certificate: refused"

# Certificates that name the nodes exactly: connected and in sync.
start_node b.r0.lan
wait_uptodate a.r0.lan 30
timed 30 nbdsh -u "$(uri a.r0.lan)" -c "h.pwrite(b'x' * 65536, 0); h.flush()" ||
    fail "write failed"
wait_uptodate a.r0.lan 30
cmp "$tmpdir/a.img" "$tmpdir/b.img" || fail "disks differ"
info "exact names connect, the wildcard is refused everywhere"

# tls-allow-wildcard: true: both nodes with the wildcard certificate.
stop_node b.r0.lan
stop_node a.r0.lan
config "$CONFIG" wild wild
echo "tls-allow-wildcard: true" >> "$CONFIG"
start_node a.r0.lan role=primary
start_node b.r0.lan
wait_uptodate a.r0.lan 30
timed 30 nbdsh -u "$(uri a.r0.lan)" -c "h.pwrite(b'y' * 65536, 0); h.flush()" ||
    fail "write failed with tls-allow-wildcard"
wait_uptodate a.r0.lan 30
cmp "$tmpdir/a.img" "$tmpdir/b.img" || fail "disks differ with tls-allow-wildcard"
info "ok: with tls-allow-wildcard: true the wildcard certificate is accepted"
