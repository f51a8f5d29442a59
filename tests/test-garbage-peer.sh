#!/usr/bin/env bash
# Hostile or broken input on the replication port: garbage, a truncated
# hello, a hello for another resource, a hello with a wrong protocol
# version (an unknown one, and version 3's), and a connection that says
# nothing.  Each is refused with a log line naming the problem; the
# node keeps serving and replicating.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires nbdcopy --version

make_config 2 C 16M
start_node node0 role=primary
start_node node1
wait_uptodate node0

# node1 accepts connections from node0 (the lower id dials).
port=$(awk '/name: node1/{f=1} f && /address:/{split($2,a,":"); print a[2]; exit}' "$CONFIG")

# send HEX-BYTES: connect to node1's replication port, send, close.
send ()
{
    /usr/bin/python3 - "$port" "$1" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(bytes.fromhex(sys.argv[2]))
time.sleep(0.2)
s.close()
PY
}

# A well-formed HELLO header + payload, with fields to vary.
hello ()
{
    local version=$1 resource=$2 node_id=${3:-0} peer_id=${4:-1}
    /usr/bin/python3 - "$version" "$resource" "$node_id" "$peer_id" <<'PY'
import sys
from peerwire import hello, hello_v3, PRIMARY, UPTODATE
version, resource, node_id, peer_id = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3]), int(sys.argv[4])
if version == 3:                # the old layout, with the state in it
    m = hello_v3(node_id, peer_id, PRIMARY, UPTODATE, 16 << 20, resource,
                 current=0x1234567890abcdef, flags=5)
else:
    m = hello(node_id, peer_id, resource, version=version)
print(m.hex())
PY
}

log1="$tmpdir/node1.log"
expect_log ()
{
    local pattern=$1 secs=${2:-5} i
    for (( i=0; i<secs*10; i++ )); do
        grep -q -- "$pattern" "$log1" && return 0
        sleep 0.1
    done
    fail "node1 did not log '$pattern'"
}

send "$(head -c 64 /dev/urandom | od -An -tx1 | tr -d ' \n')"
expect_log "bad hello: bad magic"

send "4e425250000100000000006000"            # header cut short
expect_log "closed before a complete hello"

send "$(hello 5 r9)"
expect_log "(node node0): refusing connection: peer serves resource 'r9'"

send "$(hello 99 r0)"
expect_log "bad hello: .*version 99"

# A node of protocol version 3 (its HELLO is 144 bytes): named for it.
send "$(hello 3 r0)"
expect_log "bad hello: HELLO: version 3 not supported (want 5)"

send "$(hello 5 r0 7 1)"
expect_log "node id 7 is not a peer"

# A wrong message type where the hello should be.
send "4e425250000200000000000000000000000000000000000000000000000000000000"
expect_log "expected HELLO, got PING"

# Connections that send nothing are dropped after the hello timeout,
# and hold up nobody meanwhile: with three of them open, a fourth
# connection is still answered at once (a listener that shook hands one
# connection at a time would reach it only after 15 s).
/usr/bin/python3 - "$port" "$tmpdir/silent.ready" <<'PY' &
import socket, sys, time
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
         for _ in range(3)]
open(sys.argv[2], "w").close()
time.sleep(7)
PY
silent=$!
cleanup_fn "kill $silent 2>/dev/null"
for (( i=0; i<50; i++ )); do [ -e "$tmpdir/silent.ready" ] && break; sleep 0.1; done
[ -e "$tmpdir/silent.ready" ] || fail "the silent connections did not connect within 5 s"
send "$(hello 5 r0 6 1)"
expect_log "node id 6 is not a peer" 3
expect_log "no hello within 3 s" 10

# Through all of that the pair stayed connected and replicating, on
# the connection it had from the start.
if grep -q "replacing the old connection" "$log1"; then
    fail "bad input replaced the good connection"
fi
wait_uptodate node0 10
status_json node0 | jq -e '.peers[0].connection == "Connected"' >/dev/null ||
    fail "node0 lost its peer"
head -c 16M /dev/urandom > "$tmpdir/data"
nbdcopy "$tmpdir/data" "$(uri node0)"
cmp "$tmpdir/data" "$(disk node1)" || fail "replication broken after bad input"
kill -0 "${PID[node1]}" || fail "node1 died"
info "ok"
