#!/usr/bin/env bash
# A stranger without the secret cannot take a link away, nor learn
# anything of the data.  Two storage nodes with a secret, connected, a
# client writing to the primary; meanwhile a Python "attacker" connects
# to both replication ports every 0.5 s claiming to be the other node:
# with a protocol 4 HELLO and a wrong secret, with no secret, and with a
# protocol 3 HELLO (the state in it; claiming Primary to the primary).
# The real link must stay Connected on the connection it had (its
# connected_ms only grows), no write may fail, no new generation, no
# resync, no promotion of the secondary (a client trying it meanwhile is
# refused), and the attacker must receive at most a version-5 HELLO
# (version, features, ids, resource) and the challenge/response bytes:
# never a size, role, disk state or generation UUID.
source "$(dirname "$0")/functions.sh"
umask 077                       # its configurations hold a secret
requires jq --version
requires /usr/bin/python3 -c "import nbd"

ATTACK_SECS=15
SECRET="correct horse battery staple"
make_config 2 C 16M
sed -i "s/^protocol: C/&\nsecret: \"$SECRET\"/" "$CONFIG"
for n in node0 node1; do
    "$REPLCTL" -c "$CONFIG" -n $n create-md --in-sync >/dev/null ||
        fail "create-md --in-sync on $n failed"
done
port_of () { sed -n "/name: $1\$/,/disk:/s/.*address: 127.0.0.1:\([0-9]*\)/\1/p" "$CONFIG"; }
port0=$(port_of node0)
port1=$(port_of node1)

start_node node0 role=primary
start_node node1
wait_uptodate node0 30
wait_for node1 '.peers[0].connection == "Connected" and .peers[0].role == "Primary"' 10
[ "$(status_json node1 | jq -r .auto_promote)" = true ] ||
    fail "auto-promote is off: the test would not see a promotion"

uuid0=$(status_json node0 | jq -r .current_uuid)
uuid1=$(status_json node1 | jq -r .current_uuid)
[ "$uuid0" != null ] && [ "$uuid0" = "$uuid1" ] ||
    fail "the nodes do not share a current UUID: '$uuid0' '$uuid1'"
resyncs () { grep -c "resync started" "$tmpdir/$1.log" || true; }
resyncs0=$(resyncs node0)
resyncs1=$(resyncs node1)
connects () { grep -c "peer $2: connected" "$tmpdir/$1.log" || true; }
[ "$(connects node0 node1)" = 1 ] && [ "$(connects node1 node0)" = 1 ] ||
    fail "the link was made more than once before the attack"

# The attacker: one connection every 0.5 s, in turn each of the ways
# below, for ATTACK_SECS; it reads what it is sent until the node
# closes, and checks every byte of it.  Prints a JSON summary.
/usr/bin/python3 - "$port0" "$port1" "$ATTACK_SECS" > "$tmpdir/attacker.json" \
    2> "$tmpdir/attacker.err" <<'PY' &
import json, os, socket, sys, threading, time
from peerwire import *
port0, port1, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
WRONG = b"not the secret at all"
SIZE = 16 << 20
# (name, port, claimed id, target id, hello bytes, try the auth)
ways = [
    ("v4-wrong-secret to node1", port1, 0, 1,
     hello(0, 1, features=FEATURE_AUTH), True),
    ("v4-no-secret to node1", port1, 0, 1, hello(0, 1), False),
    ("v3-as-secondary to node1", port1, 0, 1,
     hello_v3(0, 1, SECONDARY, UPTODATE, SIZE, features=FEATURE_AUTH,
              current=0x1234567890abcdef, flags=1), True),
    ("v4-wrong-secret to node0", port0, 1, 0,
     hello(1, 0, features=FEATURE_AUTH), True),
    ("v3-as-primary to node0", port0, 1, 0,
     hello_v3(1, 0, PRIMARY, UPTODATE, SIZE, features=FEATURE_AUTH,
              current=0x1234567890abcdef, flags=5), True),
]
lock = threading.Lock()
summary = {"attempts": {}, "messages": {}, "bytes": 0, "violations": []}

def violation(way, why):
    with lock:
        summary["violations"].append("%s: %s" % (way, why))

def check(way, claim, target, t, payload):
    """Is this message one a stranger may see?"""
    with lock:
        summary["messages"][str(t)] = summary["messages"].get(str(t), 0) + 1
    if t == HELLO:
        if len(payload) != HELLO_SIZE:
            return violation(way, "a HELLO of %d bytes (not version 5's "
                             "80: it carries the node's state)" % len(payload))
        h = unhello(payload)
        if (h["version"] != 5 or h["node_id"] != target or
                h["peer_id"] != claim or h["resource"] != b"r0" or
                h["features"] & ~FEATURE_AUTH):
            return violation(way, "unexpected HELLO %r" % h)
    elif t in (AUTH_CHALLENGE, AUTH_RESPONSE):
        if len(payload) != AUTH_SIZE:
            violation(way, "auth message of %d bytes" % len(payload))
    else:
        violation(way, "message type %d (%d bytes) sent to a stranger"
                  % (t, len(payload)))

def attempt(way, port, claim, target, first, auth):
    with lock:
        summary["attempts"][way] = summary["attempts"].get(way, 0) + 1
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=0.5)
    except OSError as e:
        return violation(way, "connect: %s" % e)
    buf = b""
    end = time.time() + 3
    try:
        s.sendall(first)
        while time.time() < end:        # bounded
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            except ConnectionError:
                chunk = b""
            if not chunk:
                break                   # the node closed: refused
            buf += chunk
            with lock:
                summary["bytes"] += len(chunk)
            while len(buf) >= HDR_SIZE:
                magic, t, fl, ln, cnt, seq, off = unhdr(buf)
                if magic != MAGIC or ln > 1 << 20:
                    violation(way, "unparseable bytes %r" % buf[:48])
                    return
                if len(buf) < HDR_SIZE + ln:
                    break
                payload = buf[HDR_SIZE:HDR_SIZE + ln]
                buf = buf[HDR_SIZE + ln:]
                check(way, claim, target, t, payload)
                # Play along as far as a wrong secret goes.
                if auth and t == HELLO:
                    s.sendall(hdr(AUTH_CHALLENGE, length=AUTH_SIZE)
                              + os.urandom(AUTH_SIZE))
                if auth and t == AUTH_CHALLENGE:
                    s.sendall(hdr(AUTH_RESPONSE, length=AUTH_SIZE)
                              + auth_mac(WRONG, payload, claim, target))
        else:
            violation(way, "still open after 3 s")
        if buf:
            violation(way, "%d bytes of a message left: %r" % (len(buf), buf[:48]))
    except ConnectionError:
        pass                            # closed while we sent: refused
    finally:
        s.close()

threads = []
start = time.time()
i = 0
while time.time() - start < secs:       # bounded
    t = threading.Thread(target=attempt, args=ways[i % len(ways)])
    t.start()
    threads.append(t)
    i += 1
    time.sleep(0.5)
for t in threads:
    t.join(10)
print(json.dumps(summary))
PY
attacker=$!
cleanup_fn "kill $attacker 2>/dev/null || true"

# A client of node1 every second: were node1 ever without its primary,
# this open would promote it (auto-promote).  It must be refused.
/usr/bin/python3 - "$(uri node1)" "$ATTACK_SECS" > "$tmpdir/prober.out" 2>&1 <<'PY' &
import sys, time
import nbd
start, opened, refused = time.time(), 0, 0
while time.time() - start < float(sys.argv[2]):         # bounded
    h = nbd.NBD()
    try:
        h.connect_uri(sys.argv[1])
        opened += 1
        h.shutdown()
    except nbd.Error:
        refused += 1
    del h
    time.sleep(1)
print(opened, refused)
PY
prober=$!
cleanup_fn "kill $prober 2>/dev/null || true"

# The client: at most 4000 4k writes at random places, within 20 s.
/usr/bin/python3 - "$(uri node0)" > "$tmpdir/writer.out" 2>&1 <<'PY' &
import os, random, sys, time
import nbd
h = nbd.NBD()
h.connect_uri(sys.argv[1])
size = h.get_size()
start, n = time.time(), 0
while n < 4000 and time.time() - start < 20:            # bounded
    h.pwrite(os.urandom(4096), random.randrange(size // 4096) * 4096)
    n += 1
h.flush()
h.shutdown()
print(n)
PY
writer=$!
cleanup_fn "kill $writer 2>/dev/null || true"

# Meanwhile, twice a second: the link is Connected on both sides, on the
# same connection (its connected_ms only grows), node1 is Secondary.
# Every problem is collected, and all are reported at the end.
problems=()
problem () { problems+=("$*"); info "problem: $*"; }
prev0=0 prev1=0 samples=0
for (( i=0; i<(ATTACK_SECS+10)*2; i++ )); do
    kill -0 $attacker 2>/dev/null || kill -0 $writer 2>/dev/null || break
    s0=$(status_json node0) && s1=$(status_json node1) ||
        fail "status did not answer during the attack"
    c0=$(jq -r '.peers[0].connection' <<<"$s0")
    c1=$(jq -r '.peers[0].connection' <<<"$s1")
    [ "$c0" = Connected ] && [ "$c1" = Connected ] ||
        problem "sample $samples: the link is $c0 / $c1 during the attack"
    ms0=$(jq '.peers[0].connected_ms' <<<"$s0")
    ms1=$(jq '.peers[0].connected_ms' <<<"$s1")
    [ "$ms0" -ge "$prev0" ] && [ "$ms1" -ge "$prev1" ] ||
        problem "sample $samples: the link was made again (connected_ms $prev0 -> $ms0, $prev1 -> $ms1)"
    prev0=$ms0 prev1=$ms1
    [ "$(jq -r .role <<<"$s1")" = Secondary ] ||
        problem "sample $samples: node1 is $(jq -r .role <<<"$s1") during the attack"
    samples=$((samples + 1))
    sleep 0.5
done
[ "$samples" -ge 10 ] || fail "only $samples samples during the attack"

wait $writer || problem "a client write failed: $(tail -n 1 "$tmpdir/writer.out")"
writes=$(tail -n 1 "$tmpdir/writer.out")
wait $attacker || fail "the attacker failed: $(tail -n 5 "$tmpdir/attacker.err")"
wait $prober || fail "the prober failed: $(cat "$tmpdir/prober.out")"
info "attacker: $(cat "$tmpdir/attacker.json")"

# What the attacker got: nothing but version-5 HELLOs and auth bytes.
jq -e '.violations == []' "$tmpdir/attacker.json" >/dev/null ||
    problem "the attacker learnt or changed something: $(jq -c '.violations | unique' "$tmpdir/attacker.json")"
jq -e '[.attempts[]] | length == 5 and all(. >= 3)' "$tmpdir/attacker.json" >/dev/null ||
    fail "the attacker did not try every way 3 times: $(jq -c .attempts "$tmpdir/attacker.json")"
read -r opened refused < "$tmpdir/prober.out"
[ "$refused" -ge 5 ] || fail "the prober tried only $refused + $opened times"
[ "$opened" = 0 ] ||
    problem "a client of node1 was let in $opened times (refused $refused) during the attack"

# Nothing changed: the same connection, generation, no resync, no
# promotion.
for n in node0 node1; do
    if grep -q "replacing the old connection" "$tmpdir/$n.log"; then
        problem "$n replaced its link: $(grep "replacing the old connection" "$tmpdir/$n.log" | head -n1)"
    fi
    if grep -q "auto-promoted by a client" "$tmpdir/$n.log"; then problem "$n was auto-promoted"; fi
done
[ "$(connects node0 node1)" = 1 ] && [ "$(connects node1 node0)" = 1 ] ||
    problem "the link was made again during the attack ($(connects node0 node1) times on node0)"
[ "$(status_json node0 | jq -r .current_uuid)" = "$uuid0" ] ||
    problem "node0 started a new generation: $uuid0 -> $(status_json node0 | jq -r .current_uuid)"
[ "$(status_json node1 | jq -r .current_uuid)" = "$uuid1" ] ||
    problem "node1's generation changed: $uuid1 -> $(status_json node1 | jq -r .current_uuid)"
[ "$(resyncs node0)" = "$resyncs0" ] && [ "$(resyncs node1)" = "$resyncs1" ] ||
    problem "a resync started during the attack"
status_json node0 | jq -e '.role == "Primary" and .quorum == true' >/dev/null ||
    problem "node0 is no longer a Primary with quorum"
if [ ${#problems[@]} -gt 0 ]; then
    fail "${#problems[@]} problems: $(printf '%s; ' "${problems[@]}")"
fi
[ "$writes" -ge 500 ] || fail "only $writes writes during the attack"
jq -e '.messages["1"] >= 3 and .messages["24"] >= 3' "$tmpdir/attacker.json" >/dev/null ||
    fail "the attacker never got as far as the challenge: $(jq -c .messages "$tmpdir/attacker.json")"

# Each refusal named the address and the problem, and was not repeated
# every half second.
wait_log node1 "connection from 127.0.0.1:[0-9]* (node node0): authentication failed: wrong answer to our challenge" 1
wait_log node1 "connection from 127.0.0.1:[0-9]* (node node0): authentication failed: the peer has no secret" 1
wait_log node1 "connection from 127.0.0.1:[0-9]*: bad hello: HELLO: version 3 not supported" 1
wait_log node0 "connection from 127.0.0.1:[0-9]*: node node1 (id 1) dialled us, but the node with the lower id dials" 1
for n in node0 node1; do
    lines=$(grep -c "connection from 127.0.0.1" "$tmpdir/$n.log" || true)
    [ "$lines" -le 4 ] || fail "$n logged $lines refusals for about $((ATTACK_SECS * 2 / 5 * 3)) attempts"
done

# And the replicas are the same.
wait_uptodate node0 10
same_disks node0 node1
info "ok: $writes writes, $samples samples of a link that stayed up, no state to the attacker"
