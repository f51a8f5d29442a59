#!/usr/bin/env bash
# allow-two-primaries: true.  A node that becomes the second Primary
# tells its peer in a STATE message once it is Primary; a client may
# write on it before that STATE has left.  The peer, Primary itself,
# must take such a write (every peer write goes the two-primaries way
# anyway) rather than end the connection, which while both are Primary
# is a split brain.  So: node1, beside Primary node0, is auto-promoted
# by the first of several clients opening at once, the others write the
# moment their open returns; 12 times, each ending with the clients
# gone and node1 demoted again.  The connection never drops, and the
# disks end identical.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires /usr/bin/python3 -c "import nbd"

ROUNDS=12
CLIENTS=6

make_config 2 C 16M
sed -i 's/^protocol: C/&\nallow-two-primaries: true/' "$CONFIG"
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
wait_for node1 '.role == "Secondary" and .peers[0].role == "Primary"' 15

writer='
import nbd, sys
h = nbd.NBD()
for i in range(100):            # bounded: the open is refused while the
    try:                        # first client is still promoting node1
        h.connect_uri(sys.argv[1])
        break
    except nbd.Error:
        import time; time.sleep(0.01)
        h = nbd.NBD()
else:
    sys.exit("cannot open " + sys.argv[1])
off = int(sys.argv[2]) * 4096
h.pwrite(bytes([int(sys.argv[2]) % 251 + 1]) * 4096, off)
h.shutdown()
'
for (( r = 1; r <= ROUNDS; r++ )); do
    pids=()
    for (( k = 0; k < CLIENTS; k++ )); do
        timeout 30 /usr/bin/python3 -c "$writer" "$(uri node1)" \
            $(( r * CLIENTS + k )) >"$tmpdir/c$k.out" 2>&1 &
        pids+=($!)
    done
    for (( k = 0; k < CLIENTS; k++ )); do
        wait ${pids[k]} ||
            fail "round $r: client $k failed: $(cat "$tmpdir/c$k.out")"
    done
    wait_for node1 '.role == "Secondary"' 15
    for n in node0 node1; do
        if grep -E "disconnecting|lost the other Primary" "$tmpdir/$n.log"; then
            fail "round $r: $n: the connection dropped"
        fi
    done
done
grep -q "node1: auto-promoted by a client" "$tmpdir/node1.log" ||
    fail "node1 was never auto-promoted: the test proves nothing"
wait_uptodate node0 30
same_disks node0 node1
info "ok: $ROUNDS rounds of $CLIENTS clients writing as node1 became Primary; the link stayed up"
