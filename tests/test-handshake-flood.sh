#!/usr/bin/env bash
# A flood of connections that connect and say nothing, or send garbage,
# cannot keep a configured peer out, with and without tls: true.
# 64 attacking sockets reconnect as soon as they are closed: 32 silent
# and 16 sending garbage from 127.0.0.1 (the nodes' own address, so a
# configured one), 16 silent from 127.0.0.2 (no node's address).  While
# they go on, node1 restarts: node0 must connect to it again within one
# handshake deadline plus a few retries, and a write on node0 must reach
# node1.  node1's log gets a bounded number of refusal lines.
source "$(dirname "$0")/functions.sh"
umask 077                       # the configuration holds a secret
requires jq --version
requires ip addr show dev lo
ip -4 addr show dev lo | grep -q "inet 127.0.0.1/8" ||
    { echo "$test_name: SKIP: loopback is not 127.0.0.1/8"; exit 77; }

ATTACK_SECS=25
LINK_SECS=10                    # 3 s handshake deadline, retries, resync
uptodate='[.peers[] | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all'

run () {   # run MODE: "plain" or "tls"
    local mode=$1 port1 attack i before lines start ms
    make_config 2 C 16M
    echo 'secret: "flood test secret of resource r0"' >> "$CONFIG"
    [ "$mode" = tls ] && echo "tls: true" >> "$CONFIG"
    port1=$(sed -n '/name: node1$/,/disk:/s/.*address: 127.0.0.1:\([0-9]*\)/\1/p' "$CONFIG")
    : > "$tmpdir/node0.log"; : > "$tmpdir/node1.log"
    start_node node0 role=primary
    start_node node1
    wait_uptodate node0 30

    /usr/bin/python3 - "$port1" "$ATTACK_SECS" "$tmpdir/attack.ready" \
        > "$tmpdir/attack-$mode.log" 2>&1 <<'PY' &
import os, socket, sys, threading, time
port, secs, ready = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
end = time.time() + secs
count = [0]
def attacker(src, garbage):
    while time.time() < end:
        try:
            s = socket.socket()
            s.bind((src, 0))
            s.settimeout(1)
            s.connect(("127.0.0.1", port))
            count[0] += 1
            if garbage:
                s.sendall(os.urandom(64))
            # Hold it until the node closes it (or a second passes).
            try:
                s.recv(4096)
            except OSError:
                pass
            s.close()
        except OSError:
            pass
        time.sleep(0.01)
threads = [threading.Thread(target=attacker, args=a, daemon=True)
           for a in [("127.0.0.1", False)] * 32 + [("127.0.0.1", True)] * 16
                    + [("127.0.0.2", False)] * 16]
for t in threads: t.start()
time.sleep(1); open(ready, "w").close()
for t in threads: t.join()
print("connections:", count[0])
PY
    attack=$!
    cleanup_fn "kill $attack 2>/dev/null || true"
    for (( i=0; i<50; i++ )); do [ -e "$tmpdir/attack.ready" ] && break; sleep 0.1; done
    [ -e "$tmpdir/attack.ready" ] || fail "$mode: the attack did not start"
    rm -f "$tmpdir/attack.ready"

    # node1 restarts under the attack: node0 dials it again.
    kill_node node1
    before=$(wc -l < "$tmpdir/node1.log")
    start_node node1
    start=$(date +%s%N)
    # Bounded by the clock (status calls are slow under the flood).
    until status_json node0 2>/dev/null | jq -e "$uptodate" >/dev/null; do
        ms=$(( ($(date +%s%N) - start) / 1000000 ))
        [ "$ms" -lt $((LINK_SECS * 1000)) ] ||
            fail "$mode: node0 not connected to node1 and in sync within $LINK_SECS s under the flood: $(status_json node0 | jq -c '.peers[0] | {connection, last_error}')"
        sleep 0.1
    done
    info "$mode: the link came back under the flood in $(( ($(date +%s%N) - start) / 1000000 )) ms"
    kill -0 "$attack" 2>/dev/null || fail "$mode: the attack ended before the link came back: make ATTACK_SECS longer"

    # A write on node0 reaches node1, still under the attack.
    timed 30 nbdsh -u "$(uri node0)" -c "
import os
h.pwrite(os.urandom(4 << 20), 1 << 20); h.flush()" || fail "$mode: the write failed"
    wait_uptodate node0 "$LINK_SECS"
    kill -0 "$attack" 2>/dev/null || fail "$mode: the attack ended before the write was replicated"
    wait "$attack" || fail "$mode: the attacker failed: $(cat "$tmpdir/attack-$mode.log")"
    info "$mode: $(cat "$tmpdir/attack-$mode.log")"
    same_disks node0 node1

    # The log: refusals bounded (32 a minute overall, as documented).
    lines=$(tail -n +"$((before + 1))" "$tmpdir/node1.log" | grep -c "connection from" || true)
    [ "$lines" -le 40 ] || fail "$mode: node1 logged $lines refusal lines during the flood"
    grep -q "connection from 127.0.0.2:[0-9]*: not the address of a node of resource r0; refused" "$tmpdir/node1.log" ||
        fail "$mode: no refusal of the unconfigured address logged"
    info "$mode: $lines refusal lines logged"
    stop_node node0
    stop_node node1
}

for mode in ${FLOOD_MODES:-plain tls}; do
    run "$mode"
done

# Each node dials from its own address: node0 at 127.0.0.2 reaches
# node1 at 127.0.0.1 from 127.0.0.2 (the routing alone would pick
# 127.0.0.1, node1's own address, which node1 refuses).
make_config 2 C 16M
sed -i '0,/address: 127.0.0.1:/s//address: 127.0.0.2:/' "$CONFIG"
: > "$tmpdir/node0.log"; : > "$tmpdir/node1.log"
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
grep -q "not the address of a node" "$tmpdir/node1.log" &&
    fail "node1 refused node0's connection: $(grep "not the address" "$tmpdir/node1.log")"
info "ok: node0 dialled from its own address 127.0.0.2"

