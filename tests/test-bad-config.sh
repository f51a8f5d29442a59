#!/usr/bin/env bash
# A bad configuration stops nbdkit at start-up, quickly, with a clear
# error naming the key and the value.  Two nodes whose disks differ in
# size are each valid on their own, but must never connect.
source "$(dirname "$0")/functions.sh"
umask 077                       # its configurations hold a secret
requires jq --version

port0=$(free_port)
port1=$(free_port)
truncate -s 16M "$tmpdir/node0.img" "$tmpdir/node1.img"

# write_config FILE: a good two-node configuration on stdout, edited
# by the sed expressions in "$@" (if any).
write_config ()
{
    local file=$1; shift
    {
        echo "resource: r0"
        echo "protocol: C"
        echo "nodes:"
        echo "  - name: node0"
        echo "    id: 0"
        echo "    address: 127.0.0.1:$port0"
        echo "    disk: node0.img"
        echo "    control: node0.sock"
        echo "  - name: node1"
        echo "    id: 1"
        echo "    address: 127.0.0.1:$port1"
        echo "    disk: node1.img"
        echo "    control: node1.sock"
    } | if [ $# -gt 0 ]; then sed "$@"; else cat; fi > "$file"
}

ncases=0
# bad CASE CONFIG NODE EXPECTED...: nbdkit with this configuration must
# exit non-zero within 10 s, printing every EXPECTED string.
bad ()
{
    local name=$1 config=$2 node=$3 out="$tmpdir/$1.out" rc=0 s; shift 3
    timeout 10 nbdkit -f --exit-with-parent -p "$(free_port)" \
        "$PLUGIN" config="$config" node="$node" >"$out" 2>&1 || rc=$?
    [ "$rc" -ne 124 ] || fail "$name: nbdkit still running after 10 s"
    [ "$rc" -ne 0 ] || fail "$name: nbdkit exited with status 0"
    for s in "$@"; do
        grep -qF -- "$s" "$out" ||
            fail "$name: the error does not say '$s': $(cat "$out")"
    done
    # Nothing was left behind that a good start would create.
    [ ! -e "$tmpdir/node0.sock" ] || fail "$name: control socket left behind"
    info "$name: $(head -n 1 "$out")"
    ncases=$((ncases + 1))
}

c="$tmpdir/bad.yaml"

write_config "$c" 's/^protocol: C/protocl: C/'
bad unknown-key "$c" node0 "unknown key 'protocl'" "bad.yaml:2"

write_config "$c" '0,/    disk: node0.img/s//    disc: node0.img/'
bad unknown-node-key "$c" node0 "unknown key 'disc'" "nodes[0] (node0)"

write_config "$c" 's/    id: 1/    id: 0/'
bad duplicate-id "$c" node0 "nodes[1] (node1): id: duplicate 0, also used by node0"

write_config "$c" "s/127.0.0.1:$port1/127.0.0.1:$port0/"
bad duplicate-address "$c" node0 \
    "nodes[1] (node1): address: duplicate 127.0.0.1:$port0, also used by node0"

write_config "$c" 's/name: node1/name: node0/'
bad duplicate-name "$c" node0 "name: duplicate node0"

write_config "$c"
bad no-such-node "$c" node7 "node=node7: no such node in the configuration" \
    "nodes: node0, node1"

write_config "$c" 's/node0.img/missing.img/'
bad missing-disk "$c" node0 "node node0: disk $tmpdir/missing.img: No such file or directory"

printf 'resource: r0\nnodes: [ { name: node0, id: 0\n' > "$c"
bad malformed-yaml "$c" node0 "bad.yaml" "YAML syntax error"

printf 'resource: r0\n\tnodes:\n' > "$c"
bad tab-yaml "$c" node0 "bad.yaml:2"

bad no-config-file "$tmpdir/nonexistent.yaml" node0 \
    "nonexistent.yaml: cannot open: No such file or directory"

mkdir "$tmpdir/dir.yaml"
bad config-is-a-directory "$tmpdir/dir.yaml" node0 \
    "dir.yaml: cannot read: Is a directory"

write_config "$c" 's/^protocol: C/protocol: D/'
bad bad-protocol "$c" node0 "protocol: 'D' is not A, B or C"

# allow-two-primaries: protocol C only, two storage nodes only.
write_config "$c" 's/^protocol: C/protocol: A\nallow-two-primaries: true/'
bad two-primaries-protocol-a "$c" node0 \
    "allow-two-primaries: true needs protocol: C (protocol is A)" "bad.yaml:3"
write_config "$c" 's/^protocol: C/protocol: B\nallow-two-primaries: true/'
bad two-primaries-protocol-b "$c" node0 \
    "allow-two-primaries: true needs protocol: C (protocol is B)"
write_config "$c" 's/^protocol: C/&\nallow-two-primaries: yes please/'
bad two-primaries-not-bool "$c" node0 "allow-two-primaries"

write_config "$c" "/address: 127.0.0.1:$port1/d"
bad missing-address "$c" node0 "nodes[1] (node1): missing required key 'address'"

write_config "$c" '/^resource:/d'
bad missing-resource "$c" node0 "missing required key 'resource'"

write_config "$c" 's/    id: 1/    id: 32/'
bad id-out-of-range "$c" node0 "nodes[1] (node1): id: 32 out of range 0..31"

write_config "$c" 's/    id: 1/    id: -1/'
bad id-negative "$c" node0 "id: '-1'"

write_config "$c" "s/127.0.0.1:$port1/127.0.0.1:70000/"
bad port-out-of-range "$c" node0 "address: '127.0.0.1:70000'"

# secret / secret-file.
write_config "$c" 's/^protocol: C/&\nsecret: short/'
bad secret-too-short "$c" node0 "secret: 5 bytes; it must have 8 to 256"

write_config "$c" 's/^protocol: C/&\nsecret: long enough secret\nsecret-file: s/'
bad secret-and-file "$c" node0 "give secret or secret-file, not both"

write_config "$c" 's/^protocol: C/&\nsecret-file: no-such-secret/'
bad secret-file-missing "$c" node0 "secret-file: " "no-such-secret: No such file or directory"

# A secret in a file others can read: refused (the same secret in a
# file readable by its owner only starts: test-auth).
write_config "$c" 's/^protocol: C/&\nsecret: long enough secret/'
chmod 644 "$c"
bad secret-world-readable "$c" node0 "bad.yaml: this file holds the secret of resource r0 and is readable by all users (mode 0644); refusing to start: chmod 600 it (or insecure-permissions=true)"
# ... unless told: then it starts, with a warning.
nbdkit -f --exit-with-parent -p "$(free_port)" "$PLUGIN" config="$c" \
    node=node0 insecure-permissions=true > "$tmpdir/insecure.log" 2>&1 &
insecure_pid=$!
for (( i = 0; i < 100; i++ )); do
    grep -q "starting anyway" "$tmpdir/insecure.log" && break
    kill -0 "$insecure_pid" 2>/dev/null || break
    sleep 0.1
done
grep -q "readable by all users (mode 0644); starting anyway (insecure-permissions=true): chmod 600 it" "$tmpdir/insecure.log" ||
    fail "insecure-permissions=true: $(tail -n 3 "$tmpdir/insecure.log")"
kill -0 "$insecure_pid" 2>/dev/null ||
    fail "insecure-permissions=true: the node did not start: $(tail -n 3 "$tmpdir/insecure.log")"
kill "$insecure_pid"
wait "$insecure_pid" || true
chmod 640 "$c"
bad secret-group-readable "$c" node0 "bad.yaml: this file holds the secret of resource r0 and is readable by its group (mode 0640)"
write_config "$c" 's/^protocol: C/&\nsecret-file: open.secret/'
chmod 644 "$c"                  # no secret in it: fine
echo "long enough secret" > "$tmpdir/open.secret"
chmod 604 "$tmpdir/open.secret"
bad secret-file-world-readable "$c" node0 "$tmpdir/open.secret holds the secret of resource r0 and is readable by all users (mode 0604)"
chmod 600 "$c"

# 1 MiB of nested brackets (libyaml takes minutes over it): refused at
# the 65th level, without reading the rest.  (The bound is far from
# both: a few ms here, over a second under a sanitizer on a loaded
# machine, minutes without the limit.)
{ echo "resource: r0"; printf 'nodes: '
  head -c 500000 /dev/zero | tr '\0' '['; head -c 500000 /dev/zero | tr '\0' ']'; echo; } > "$c"
start=$(date +%s%N)
bad nested-too-deep "$c" node0 "bad.yaml:2: mappings and sequences nested more than 64 deep; not a configuration file"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -lt 30000 ] || fail "the nested configuration took $ms ms to refuse"

write_config "$c" 's/^protocol: C/&\ndata-integrity: md5/'
bad data-integrity-unknown "$c" node0 "data-integrity: 'md5' is not crc32c or none"

# tls.
write_config "$c" 's/^protocol: C/&\ntls: true/'
bad tls-without-secret-or-ca "$c" node0 "tls: true needs either tls-ca with certificates (tls-cert, tls-key) or a secret"
write_config "$c" 's/^protocol: C/&\ntls: yes please/'
bad tls-not-bool "$c" node0 "tls: "
write_config "$c" 's/^protocol: C/&\ntls-ca: ca.crt/'
bad tls-ca-without-tls "$c" node0 "tls-ca: given, but tls is not true"
write_config "$c" 's/^protocol: C/&\nsecret: long enough secret\ntls: true\ntls-cert: n.crt\ntls-key: n.key/'
bad tls-cert-without-ca "$c" node0 "tls-cert/tls-key: certificates need tls-ca too"
write_config "$c" 's/^protocol: C/&\ntls: true\ntls-ca: ca.crt/'
bad tls-ca-node-without-cert "$c" node0 "nodes[0] (node0): no tls-cert: with tls-ca, every node needs tls-cert and tls-key"
write_config "$c" 's/^protocol: C/&\ntls: true\ntls-ca: no-such-ca.crt\ntls-cert: no-such.crt\ntls-key: no-such.key/'
bad tls-cert-missing "$c" node0 "tls-cert " "no-such.crt: "

# Diskless nodes (disk: none).
write_config "$c" 's/disk: node[01].img/disk: none/'
bad all-diskless "$c" node0 "every node is diskless (disk: none)"

write_config "$c" 's/disk: node1.img/disk: none\n    meta: node1.meta/'
bad diskless-with-meta "$c" node0 "meta: a diskless node (disk: none) has no metadata"

# Three storage nodes and two diskless ones load (issue 18): each node's
# view of the configuration is accepted (create-md on a storage node
# reads all of it; every node's start would fail on nothing else).
write_config "$c"
cat >>"$c" <<EOT
  - name: node2
    id: 2
    address: 127.0.0.1:$(free_port)
    disk: node2.img
  - name: client
    id: 3
    address: 127.0.0.1:$(free_port)
    disk: none
  - name: client2
    id: 4
    address: 127.0.0.1:$(free_port)
    disk: none
EOT
truncate -s 16M "$tmpdir/node2.img"
for n in node0 node2; do
    out=$("$REPLCTL" -c "$c" -n $n create-md --force 2>&1) ||
        fail "diskless-three-storage: the configuration of 3 storage nodes and 2 diskless ones does not load for $n: $out"
done
info "ok: 3 storage nodes with 2 diskless nodes load"

write_config "$c" 's/^protocol: C/&\nread-balancing: prefer-nobody/'
bad read-balancing-unknown-node "$c" node0 \
    "read-balancing: 'prefer-nobody' is not round-robin, least-pending or prefer-NODE"

# metadata: and resync: sections, and each node's meta path.
write_config "$c" 's/^protocol: C/&\nmetadata:\n  bitmap-granularity: 3000/'
bad granularity-not-power-of-2 "$c" node0 "bad.yaml:4" \
    "metadata: bitmap-granularity: 3000 is not a power of 2"

write_config "$c" 's/^protocol: C/&\nmetadata:\n  al-extent-size: 2G/'
bad al-extent-size-out-of-range "$c" node0 \
    "metadata: al-extent-size: 2G out of range 64K..1G"

write_config "$c" 's/^protocol: C/&\nmetadata:\n  al-extents: 0/'
bad al-extents-out-of-range "$c" node0 "metadata: al-extents: 0 out of range 1..65536"

write_config "$c" 's/^protocol: C/&\nresync:\n  resync-rate: 100MB/'
bad rate-bad-suffix "$c" node0 "bad.yaml:4" \
    "resync: resync-rate: '100MB' is not a rate in bytes per second"

write_config "$c" 's/^protocol: C/&\nresync:\n  c-min-rate: 200M\n  c-max-rate: 100M/'
bad c-min-above-c-max "$c" node0 "bad.yaml:4" \
    "resync: c-min-rate: 200M is greater than c-max-rate 100M"

write_config "$c" 's/^protocol: C/&\nresync:\n  resync-rate: 100M\n  c-max-rate: 200M/'
bad fixed-and-dynamic-rate "$c" node0 "bad.yaml:5" \
    "resync: resync-rate 100M and c-max-rate 200M are both set"

write_config "$c" 's/^protocol: C/&\nresync:\n  csums: yes/'
bad csums-not-boolean "$c" node0 "resync: csums: 'yes' is not true or false"

write_config "$c" '0,/    control: node0.sock/s//&\n    meta: ""/'
bad meta-empty "$c" node0 "nodes[0] (node0): meta: empty value"

write_config "$c" 's/^    control: node[01].sock/&\n    meta: shared.meta/'
bad duplicate-meta "$c" node0 \
    "nodes[1] (node1): meta: duplicate $tmpdir/shared.meta, also used by node0"

write_config "$c" '0,/    control: node0.sock/s//&\n    meta: node0.img/'
bad meta-is-own-disk "$c" node0 \
    "nodes[0] (node0): meta: '$tmpdir/node0.img' is the node's own disk"

write_config "$c" 's/^    control: node1.sock/&\n    meta: node0.img/'
bad meta-is-other-disk "$c" node0 \
    "nodes[1] (node1): meta: '$tmpdir/node0.img' is the disk of node0"

# The same file, untouched, does start: the failures above are the edits.
CONFIG="$tmpdir/good.yaml"
write_config "$CONFIG"
NBD_PORT[node0]=$(free_port)
NBD_PORT[node1]=$(free_port)
start_node node0 role=primary
start_node node1
wait_uptodate node0 20
stop_node node1
stop_node node0
info "$ncases bad configurations refused; the good one starts"
# Keep the logs of the next part apart from these.
mv "$tmpdir/node0.log" "$tmpdir/good-node0.log"
mv "$tmpdir/node1.log" "$tmpdir/good-node1.log"

# ---- disks of different sizes ----------------------------------------
# Each node is valid on its own and starts, but they must never connect.
truncate -s 8M "$tmpdir/node1.img"
# node1's metadata still describes 16M: it refuses to start, saying so.
if timeout 20 nbdkit -f -v -p "$(free_port)" "$PLUGIN" config="$CONFIG" node=node1 \
      >"$tmpdir/shrunk.log" 2>&1 </dev/null; then
    fail "node1 started on a disk smaller than its metadata says"
fi
grep -q "volume size mismatch: the metadata says 16777216 bytes, the disk has 8388608" \
    "$tmpdir/shrunk.log" || fail "no clear error for a disk smaller than its metadata: $(tail -n3 "$tmpdir/shrunk.log")"
# With new metadata it starts, and the peers refuse each other.
rm -f "$tmpdir/node0.img.meta" "$tmpdir/node1.img.meta"
start_node node0 role=primary
start_node node1
refusal="disks must be the same size"
wait_for node0 ".peers[0].connection != \"Connected\" and
                (.peers[0].last_error | contains(\"$refusal\"))" 10
wait_for node1 ".peers[0].connection != \"Connected\" and
                (.peers[0].last_error | contains(\"$refusal\"))" 10
for n in node0 node1; do
    grep -F "refusing connection: peer's disk is" "$tmpdir/$n.log" |
        grep -qF "$refusal" || fail "$n's log does not say why it refuses"
done
grep -qF "peer's disk is 8388608 bytes, ours ($tmpdir/node0.img) is 16777216 bytes" \
    "$tmpdir/node0.log" || fail "node0's log does not give both sizes"
grep -qF "peer's disk is 16777216 bytes, ours ($tmpdir/node1.img) is 8388608 bytes" \
    "$tmpdir/node1.log" || fail "node1's log does not give both sizes"

# They keep retrying, and keep refusing: still not connected 3 s
# later (the dialler retries at least every 2 s, connect-retry-max's
# default).
conn_seen=0
for (( i=0; i<30; i++ )); do
    if status_json node0 | jq -e '.peers[0].connection == "Connected"' >/dev/null ||
       status_json node1 | jq -e '.peers[0].connection == "Connected"' >/dev/null; then
        conn_seen=1
        break
    fi
    sleep 0.1
done
[ "$conn_seen" -eq 0 ] || fail "nodes with disks of different sizes connected"
! grep -q "peer node[01]: connected" "$tmpdir/node0.log" "$tmpdir/node1.log" ||
    fail "a log says the nodes connected"
info "ok"
