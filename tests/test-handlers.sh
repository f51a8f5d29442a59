#!/usr/bin/env bash
# Handlers: configured commands run on events with the resource, node,
# role and peer in the environment; how each ended is logged.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
ev="$tmpdir/events"
log='echo "$NBDREPL_EVENT node=$NBDREPL_NODE role=$NBDREPL_ROLE peer=$NBDREPL_PEER res=$NBDREPL_RESOURCE" >>'"$ev"
cat >>"$CONFIG" <<EOT
handlers:
  before-resync-target: '$log'
  after-resync-target: '$log'
  role-change: '$log'
  fence-peer: '$log; exit 3'
EOT
# wait_event LINE: bounded wait for a line in the events file.
wait_event () {
    for (( i=0; i<100; i++ )); do
        grep -qxF "$1" "$ev" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "no event '$1' (events: $(tr '\n' '|' <"$ev" 2>/dev/null))"
}

start_node node0 role=primary
start_node node1
wait_uptodate node0 30
wait_event "before-resync-target node=node1 role=Secondary peer=node0 res=r0"
wait_event "after-resync-target node=node1 role=Secondary peer=node0 res=r0"

"$REPLCTL" -s "$(sock node0)" events > "$tmpdir/stream" 2>&1 &
stream_pid=$!
cleanup_fn 'kill $stream_pid 2>/dev/null; wait $stream_pid 2>/dev/null'
for (( i=0; i<100; i++ )); do
    grep -q 'exists -' "$tmpdir/stream" 2>/dev/null && break
    sleep 0.05
done
kill_node node1
wait_event "fence-peer node=node0 role=Primary peer=node1 res=r0"
for (( i=0; i<100; i++ )); do
    grep -q "handler fence-peer (pid [0-9]*): exited with status 3" "$tmpdir/node0.log" && break
    sleep 0.1
done
grep -q "handler fence-peer (pid [0-9]*): exited with status 3" "$tmpdir/node0.log" ||
    fail "the fence-peer handler's exit status was not logged"
# ... and both ends of it are in the events stream.
for (( i=0; i<100; i++ )); do
    grep -q ' response helper name:r0 conn-name:node1 helper:fence-peer status:3$' "$tmpdir/stream" && break
    sleep 0.1
done
grep -Eq ' call helper name:r0 conn-name:node1 helper:fence-peer$' "$tmpdir/stream" &&
grep -Eq ' response helper name:r0 conn-name:node1 helper:fence-peer status:3$' "$tmpdir/stream" ||
    fail "the fence-peer handler is not in the events stream: $(cat "$tmpdir/stream")"

start_node node1
wait_uptodate node0 30
"$REPLCTL" -s "$(sock node0)" secondary >/dev/null || fail "demote failed"
wait_event "role-change node=node0 role=Secondary peer= res=r0"
"$REPLCTL" -s "$(sock node1)" primary >/dev/null || fail "promote failed"
wait_event "role-change node=node1 role=Primary peer= res=r0"
info "ok: $(wc -l <"$ev") handler runs"

# A handler that hangs does not hang the node's stop: it is given 10 s,
# then SIGTERM.
sed -i "s|^  role-change: .*|  role-change: 'sleep 300'|" "$CONFIG"
stop_node node0
start_node node0
wait_uptodate node1 30
"$REPLCTL" -s "$(sock node1)" secondary >/dev/null || fail "demote failed"
"$REPLCTL" -s "$(sock node0)" primary >/dev/null || fail "promote failed"
for (( i=0; i<100; i++ )); do
    grep -q "handler role-change: running 'sleep 300'" "$tmpdir/node0.log" && break
    sleep 0.1
done
grep -q "handler role-change: running 'sleep 300'" "$tmpdir/node0.log" ||
    fail "the hanging handler did not start: $(tail -n 5 "$tmpdir/node0.log")"
t0=$(date +%s)
stop_node node0
t1=$(date +%s)
grep -q "still running as the node stops: sending it Terminated" "$tmpdir/node0.log" ||
    fail "the hanging handler was not terminated at stop: $(tail -n 5 "$tmpdir/node0.log")"
grep -q "handler role-change (pid [0-9]*): killed by signal 15" "$tmpdir/node0.log" ||
    fail "the hanging handler's end was not logged"
[ $((t1 - t0)) -le 20 ] || fail "the stop took $((t1 - t0)) s with a hanging handler"
info "a hanging handler: terminated after the grace, stop took $((t1 - t0)) s"
