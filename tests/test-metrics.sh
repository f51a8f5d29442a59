#!/usr/bin/env bash
# The Prometheus endpoint (metrics: in a node's entry): scraped with
# curl and checked with `promtool check metrics`; role and connection
# state; the out-of-sync gauge > 0 while the secondary is away and then
# following the resync down to 0 once it is back; the write counter and
# the ACK latency histogram grow with writes; 404 for another path, 405
# for another method; no endpoint on a node without metrics:; a busy
# metrics address stops the start with one error; the endpoint closes
# when the node stops.
source "$(dirname "$0")/functions.sh"
requires curl --version
requires promtool --version
requires ss --version

make_config 2 C 64M
MPORT=$(free_port)
sed -i "/control: node0.sock/a\\    metrics: 127.0.0.1:$MPORT" "$CONFIG"
# Slow enough (16 MiB at 4 MiB/s) for scrapes to see the resync run.
printf 'resync:\n  resync-rate: 4M\n' >> "$CONFIG"
for n in node0 node1; do
    "$REPLCTL" -c "$CONFIG" -n $n create-md --in-sync >/dev/null ||
        fail "create-md --in-sync on $n failed"
done
URL="http://127.0.0.1:$MPORT/metrics"

# scrape FILE: GET /metrics into FILE (bounded), checked by promtool.
scrape ()
{
    curl -sS -f --max-time 10 -o "$1" "$URL" || fail "GET $URL failed"
    promtool check metrics < "$1" > "$1.promtool" 2>&1 ||
        fail "promtool check metrics: $(cat "$1.promtool")"
}
# value FILE SERIES: the value of one series (name and labels exactly).
value ()
{
    awk -v k="$2" '$1 == k { print $2; found = 1 } END { exit !found }' "$1" ||
        fail "no series $2 in $1"
}
L='resource="r0",node="node0"'
P="$L,peer=\"node1\""

start_node node0 role=primary
wait_log node0 "metrics at $URL"

# A node whose metrics address is taken does not start: one error.
sed "/control: node1.sock/a\\    metrics: 127.0.0.1:$MPORT" "$CONFIG" > "$tmpdir/busy.yaml"
rc=0
timed 30 nbdkit -f -p "$(free_port)" "$PLUGIN" config="$tmpdir/busy.yaml" \
    node=node1 > "$tmpdir/busy.out" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "node1 started with a busy metrics address"
[ $rc -ne 124 ] || fail "node1 with a busy metrics address did not exit"
[ "$(grep -c "metrics 127.0.0.1:$MPORT: cannot listen: Address already in use" "$tmpdir/busy.out")" = 1 ] ||
    fail "no single 'cannot listen' error: $(cat "$tmpdir/busy.out")"
[ "$(grep -c 'error' "$tmpdir/busy.out")" = 1 ] ||
    fail "more than the one error: $(cat "$tmpdir/busy.out")"
info "busy metrics address: refused with one error"

start_node node1
wait_uptodate node0

# Connected, Primary, in sync, and the format is what Prometheus reads.
scrape "$tmpdir/m1"
[ "$(value "$tmpdir/m1" "nbdrepl_role{$L,role=\"Primary\"}")" = 1 ] ||
    fail "role Primary is not 1"
[ "$(value "$tmpdir/m1" "nbdrepl_role{$L,role=\"Secondary\"}")" = 0 ] ||
    fail "role Secondary is not 0"
[ "$(value "$tmpdir/m1" "nbdrepl_peer_connection_state{$P,connection=\"Connected\"}")" = 1 ] ||
    fail "connection Connected is not 1"
[ "$(value "$tmpdir/m1" "nbdrepl_peer_replication_state{$P,replication=\"Established\"}")" = 1 ] ||
    fail "replication Established is not 1"
[ "$(value "$tmpdir/m1" "nbdrepl_peer_out_of_sync_bytes{$P}")" = 0 ] ||
    fail "out of sync while UpToDate"
[ "$(grep -c '^# TYPE ' "$tmpdir/m1")" -ge 20 ] || fail "few metric families"
grep -Eq '^# HELP nbdrepl_peer_ack_latency_seconds .+' "$tmpdir/m1" ||
    fail "no HELP for the ACK latency"
info "connected: $(grep -c '^nbdrepl' "$tmpdir/m1") series, promtool: ok"

# Writes count, and each has its ACK latency recorded.
writes0=$(value "$tmpdir/m1" "nbdrepl_writes_total{$L}")
acks0=$(value "$tmpdir/m1" "nbdrepl_peer_ack_latency_seconds_count{$P}")
nbdsh -u "$(uri node0)" -c '
for i in range(32):
    h.pwrite(b"\x11" * 4096, i * 65536)
'
scrape "$tmpdir/m2"
writes1=$(value "$tmpdir/m2" "nbdrepl_writes_total{$L}")
acks1=$(value "$tmpdir/m2" "nbdrepl_peer_ack_latency_seconds_count{$P}")
[ "$writes1" -ge $((writes0 + 32)) ] || fail "writes_total $writes0 -> $writes1"
[ "$acks1" -ge $((acks0 + 32)) ] || fail "ACK latency count $acks0 -> $acks1"
[ "$(value "$tmpdir/m2" "nbdrepl_peer_ack_latency_seconds_bucket{$P,le=\"+Inf\"}")" = "$acks1" ] ||
    fail "the +Inf bucket is not the count"
[ "$(value "$tmpdir/m2" "nbdrepl_write_bytes_total{$L}")" -ge $((32 * 4096)) ] ||
    fail "write_bytes_total too small"
info "writes: $writes0 -> $writes1, ACK latencies: $acks0 -> $acks1"

# The secondary goes away and misses 16 MiB: the gauge shows it.
kill_node node1
nbdsh -u "$(uri node0)" -c '
for i in range(4):
    h.pwrite(b"\x5a" * (4 << 20), i * (4 << 20))
'
scrape "$tmpdir/m3"
oos=$(value "$tmpdir/m3" "nbdrepl_peer_out_of_sync_bytes{$P}")
[ "$oos" -ge $((16 << 20)) ] || fail "out of sync $oos with node1 away"
[ "$(value "$tmpdir/m3" "nbdrepl_peer_connection_state{$P,connection=\"Connected\"}")" = 0 ] ||
    fail "still Connected with node1 killed"
info "node1 away: out of sync $oos"

# It returns: scrapes follow the resync down to 0 (bounded: 60 s).
start_node node1
seen_resync=0
for (( i = 0; i < 600; i++ )); do
    scrape "$tmpdir/m4"
    o=$(value "$tmpdir/m4" "nbdrepl_peer_out_of_sync_bytes{$P}")
    s=$(value "$tmpdir/m4" "nbdrepl_peer_replication_state{$P,replication=\"SyncSource\"}")
    e=$(value "$tmpdir/m4" "nbdrepl_peer_replication_state{$P,replication=\"Established\"}")
    if [ "$s" = 1 ] && [ "$o" -gt 0 ] && [ "$o" -lt "$oos" ]; then
        seen_resync=1
        done_b=$(value "$tmpdir/m4" "nbdrepl_peer_resync_done_bytes{$P}")
        [ "$done_b" -gt 0 ] || fail "resyncing with nothing done at $o out of sync"
    fi
    [ "$e" = 1 ] && [ "$o" = 0 ] && break
    sleep 0.1
done
[ "$e" = 1 ] && [ "$o" = 0 ] ||
    fail "out of sync $o, Established $e after 60 s"
[ $seen_resync = 1 ] || fail "no scrape saw the resync under way"
[ "$(value "$tmpdir/m4" "nbdrepl_peer_disk_state{$P,disk=\"UpToDate\"}")" = 1 ] ||
    fail "peer disk not UpToDate after the resync"
info "node1 back: resync seen in SyncSource, out of sync back to 0"

# Only GET /metrics.
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/other")
[ "$code" = 404 ] || fail "GET /other: $code"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/")
[ "$code" = 404 ] || fail "GET /: $code"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X POST "$URL")
[ "$code" = 405 ] || fail "POST /metrics: $code"

# node1 has no metrics: it listens on its replication and NBD ports only.
repl1=$(sed -n '/name: node1/,/control/s/.*address: 127.0.0.1:\([0-9]*\)/\1/p' "$CONFIG")
ports=$(ss -ltnpH | grep "pid=${PID[node1]}," | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u | xargs)
want=$(printf '%s\n' "$repl1" "${NBD_PORT[node1]}" | sort -u | xargs)
[ "$ports" = "$want" ] || fail "node1 listens on $ports, expected $want"
grep -q 'metrics at' "$tmpdir/node1.log" && fail "node1 serves metrics: $(grep 'metrics at' "$tmpdir/node1.log")"
info "node1 without metrics: listens on $ports only"

# The node stops: so does the endpoint.
stop_node node0
grep -q 'stopped cleanly' "$tmpdir/node0.log" || fail "node0 did not stop cleanly"
curl -sS --max-time 5 -o /dev/null "$URL" 2>/dev/null && fail "metrics still served after the stop"
info "ok"
