#!/usr/bin/env bash
# The administrator's commands on a peer, each seen in status and in
# the events stream: disconnect (StandAlone, writes marked) and connect
# (resynced); pause-sync and resume-sync, from the source and from the
# target (PausedSyncS/PausedSyncT, nothing moves while paused);
# invalidate-remote (a full resync); verify --stop; and the errors.
source "$(dirname "$0")/functions.sh"
requires jq --version

mib=$((1 << 20))
make_config 2 C 64M
cat >>"$CONFIG" <<EOT
resync:
  resync-rate: 8M
EOT
start_node node0 role=primary
start_node node1
wait_uptodate node0 30

"$REPLCTL" -s "$(sock node0)" events > "$tmpdir/events" 2>&1 &
events_pid=$!
cleanup_fn 'kill $events_pid 2>/dev/null; wait $events_pid 2>/dev/null'
ev_wait () {                    # REGEX [SECS]
    local i
    for (( i = 0; i < ${2:-20} * 20; i++ )); do
        grep -Eq -- "$1" "$tmpdir/events" 2>/dev/null && return 0
        sleep 0.05
    done
    fail "no event matching '$1': $(cat "$tmpdir/events")"
}
ctl () { "$REPLCTL" -s "$(sock "$1")" "${@:2}"; }
peer () { status_json "$1" | jq -c ".peers[0] | $2"; }
write () {                      # MIB at OFFSET-MIB through node0
    nbdsh -u "$(uri node0)" -c "h.pwrite(bytes([$RANDOM % 256]) * ($1 << 20), $2 << 20)"
}

ev_wait ' exists -$'             # subscribed: every later change comes

# ---- disconnect: StandAlone, writes marked; connect: resynced.
out=$(ctl node0 disconnect node1) || fail "disconnect: $out"
ev_wait 'conn-name:node1 connection:StandAlone$'
wait_for node0 '.peers[0].connection == "StandAlone"' 10
write 4 0
wait_for node1 '.peers[0].connection == "Connecting"' 10
[ "$(peer node0 .connection)" = '"StandAlone"' ] ||
    fail "node1 connected again while StandAlone: $(peer node0 .)"
[ "$(peer node0 .out_of_sync_bytes)" -ge $((4 * mib)) ] ||
    fail "writes while StandAlone not marked: $(peer node0 .)"
ctl node0 connect node1 >/dev/null || fail "connect failed"
wait_uptodate node0 30
same_disks node0 node1
info "disconnect/connect: StandAlone, 4 MiB marked, resynced"

# ---- pause-sync on the source before the resync: it waits paused.
ctl node0 disconnect node1 >/dev/null
write 16 8
ctl node0 pause-sync node1 >/dev/null || fail "pause-sync failed"
ctl node0 connect node1 >/dev/null
ev_wait 'conn-name:node1 volume:0 replication:PausedSyncS$'
wait_for node1 '.peers[0].replication == "PausedSyncT" and
                .peers[0].sync_paused_by_peer' 10
s1=$(peer node0 '.resync_done_bytes')
sleep 1.5
s2=$(peer node0 '.resync_done_bytes')
[ "$s1" = "$s2" ] || fail "the paused resync moved: $s1 -> $s2 bytes"
status_json node0 | jq -e '.peers[0] | .sync_paused_here and
    .replication == "PausedSyncS" and .out_of_sync_bytes > 0' >/dev/null ||
    fail "status while paused: $(peer node0 .)"
"$REPLCTL" -s "$(sock node0)" status | grep -q "replication:PausedSyncS sync-paused-by:this-node" ||
    fail "human status while paused: $("$REPLCTL" -s "$(sock node0)" status)"
ctl node0 resume-sync node1 >/dev/null || fail "resume-sync failed"
ev_wait 'conn-name:node1 volume:0 replication:SyncSource$'
wait_uptodate node0 30
same_disks node0 node1
info "pause-sync on the source: PausedSyncS/PausedSyncT, held, resumed"

# ---- pause-sync on the target, during a resync.
ctl node0 disconnect node1 >/dev/null
write 32 16
ctl node0 connect node1 >/dev/null
wait_for node1 '.peers[0].replication == "SyncTarget"' 20
ctl node1 pause-sync node0 >/dev/null || fail "pause-sync on the target failed"
wait_for node0 '.peers[0].replication == "PausedSyncS" and
                .peers[0].sync_paused_by_peer' 10
wait_for node1 '.peers[0].replication == "PausedSyncT" and
                .peers[0].sync_paused_here' 10
ctl node1 resume-sync node0 >/dev/null || fail "resume-sync on the target failed"
wait_uptodate node0 30
same_disks node0 node1
info "pause-sync on the target: the source waited, then finished"

# ---- invalidate-remote: all of node1 again from node0.
out=$(ctl node1 invalidate-remote node0 2>&1) &&
    fail "invalidate-remote on the Secondary succeeded: $out"
grep -q "run invalidate-remote on the Primary" <<<"$out" ||
    fail "invalidate-remote on the Secondary: $out"
ctl node0 invalidate-remote node1 >/dev/null || fail "invalidate-remote failed"
wait_for node0 '.peers[0].replication == "SyncSource" and
                .peers[0].resync_total_bytes == 64 * 1048576' 10
wait_uptodate node0 30
same_disks node0 node1
info "invalidate-remote: a full resync of 64 MiB"

# ---- verify --stop.
out=$(ctl node0 verify --stop 2>&1) && fail "verify --stop with none running: $out"
grep -q "no verify is running" <<<"$out" || fail "verify --stop: $out"
ctl node0 verify >/dev/null || fail "verify failed"
wait_for node0 '.peers[0].replication == "VerifyS"' 10
ctl node0 verify --stop >/dev/null || fail "verify --stop failed"
wait_for node0 '.peers[0].replication == "Established"' 10
grep -q "verify stopped (replctl verify --stop)" "$tmpdir/node0.log" ||
    fail "the stop is not in the log"
"$REPLCTL" -s "$(sock node0)" status | grep -q "verify:interrupted" ||
    fail "status after verify --stop: $("$REPLCTL" -s "$(sock node0)" status)"
info "verify --stop: stopped"

# ---- Errors: one line each, naming the problem.
out=$(ctl node0 disconnect nosuch 2>&1) && fail "disconnect nosuch: $out"
grep -q "'nosuch' is not a peer of node node0" <<<"$out" || fail "disconnect nosuch: $out"
out=$(ctl node0 pause-sync 2>&1) && fail "pause-sync without a peer: $out"
grep -q "pause-sync: give the peer's name" <<<"$out" || fail "pause-sync: $out"
info "ok"
