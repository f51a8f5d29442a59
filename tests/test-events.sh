#!/usr/bin/env bash
# replctl events: the current state first (--now), then every state
# change of a peer killed and returned, in order and with timestamps,
# as text and as JSON; resync progress with --statistics; the stream
# ends by itself ("destroy resource") when the node stops.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 64M
start_node node0 role=primary
start_node node1
wait_uptodate node0

ev_start () {                   # NAME ARGS...: events of node0 into NAME
    local name=$1; shift
    "$REPLCTL" -s "$(sock node0)" events "$@" > "$tmpdir/$name" \
        2> "$tmpdir/$name.err" &
    eval "${name}_pid=$!"
    cleanup_fn "kill \$${name}_pid 2>/dev/null; wait \$${name}_pid 2>/dev/null"
}
ev_wait () {                    # NAME REGEX [SECS]: a line matches
    local i
    for (( i = 0; i < ${3:-10} * 20; i++ )); do
        grep -Eq -- "$2" "$tmpdir/$1" 2>/dev/null && return 0
        sleep 0.05
    done
    fail "$1: no line matching '$2' within ${3:-10} s: $(cat "$tmpdir/$1" "$tmpdir/$1.err")"
}

ev_start text --now
ev_start json --now --json
ev_start stats --statistics
ev_wait text '^[0-9T:.+-]+ exists -$'
ev_wait json '"kind":"exists","object":"-"'
ev_wait stats 'exists -$'

# --now: the current state, each line timestamped.
ts='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}\+00:00'
grep -Eq "^$ts exists resource name:r0 role:Primary quorum:yes$" "$tmpdir/text" ||
    fail "no 'exists resource' line: $(cat "$tmpdir/text")"
grep -Eq "^$ts exists device name:r0 volume:0 disk:UpToDate$" "$tmpdir/text" ||
    fail "no 'exists device' line: $(cat "$tmpdir/text")"
grep -Eq "^$ts exists connection name:r0 peer-node-id:1 conn-name:node1 connection:Connected role:Secondary$" "$tmpdir/text" ||
    fail "no 'exists connection' line: $(cat "$tmpdir/text")"
grep -Eq "^$ts exists peer-device name:r0 peer-node-id:1 conn-name:node1 volume:0 replication:Established peer-disk:UpToDate$" "$tmpdir/text" ||
    fail "no 'exists peer-device' line: $(cat "$tmpdir/text")"

# A write load's worth of changes while node1 is away, then its return.
kill_node node1
ev_wait text 'change connection .*conn-name:node1 connection:Disconnecting$'
nbdsh -u "$(uri node0)" -c 'h.pwrite(b"\x5a" * (8 << 20), 0)'
start_node node1
wait_uptodate node0
ev_wait text 'change peer-device .*conn-name:node1 volume:0 replication:Established$'

# The changes in the order they happened.
want=(
    'change connection name:r0 peer-node-id:1 conn-name:node1 connection:Disconnecting'
    'change connection name:r0 peer-node-id:1 conn-name:node1 connection:Connecting'
    'change peer-device name:r0 peer-node-id:1 conn-name:node1 volume:0 replication:Off'
    'change connection name:r0 peer-node-id:1 conn-name:node1 connection:Connected role:Secondary'
    'change peer-device name:r0 peer-node-id:1 conn-name:node1 volume:0 replication:Established'
    'change peer-device name:r0 peer-node-id:1 conn-name:node1 volume:0 replication:WFBitMapS'
    'change peer-device name:r0 peer-node-id:1 conn-name:node1 volume:0 replication:SyncSource'
    'change peer-device name:r0 peer-node-id:1 conn-name:node1 volume:0 peer-disk:UpToDate'
    'change peer-device name:r0 peer-node-id:1 conn-name:node1 volume:0 replication:Established'
)
pos=0
lines=$(sed -E "s/^$ts //" "$tmpdir/text")
for w in "${want[@]}"; do
    n=$(tail -n +$((pos + 1)) <<<"$lines" | grep -nFx -- "$w" | head -n 1 | cut -d: -f1)
    [ -n "$n" ] || fail "'$w' missing or out of order after line $pos: $lines"
    pos=$((pos + n))
done
info "kill and return of node1, in order: ${#want[@]} changes"
# Every line has a timestamp, and time does not go backwards.
if grep -Evq "^$ts [a-z]" "$tmpdir/text"; then
    fail "a line without a timestamp: $(grep -Ev "^$ts " "$tmpdir/text")"
fi
sort -c <(cut -d' ' -f1 "$tmpdir/text") ||
    fail "timestamps go backwards: $(cut -d' ' -f1 "$tmpdir/text")"

# The same as JSON: every line an object, the same changes.
ev_wait json '"object":"peer-device".*"replication":"SyncSource"'
jq -e -s 'all(.[]; has("time") and has("kind") and has("object"))' \
    "$tmpdir/json" >/dev/null || fail "bad JSON events: $(cat "$tmpdir/json")"
jq -e -s 'any(.[]; .kind == "change" and .object == "connection" and
              ."conn-name" == "node1" and .connection == "Connected" and
              ."peer-node-id" == 1)' "$tmpdir/json" >/dev/null ||
    fail "no JSON connection change: $(cat "$tmpdir/json")"

# --statistics: progress lines, ending at done:100.
ev_wait stats 'change peer-device .*conn-name:node1 volume:0 done:100\.00$' 20
grep -q 'done:' "$tmpdir/text" &&
    fail "progress lines without --statistics: $(grep done: "$tmpdir/text")"

# A bad option is refused with one line.
out=$("$REPLCTL" -s "$(sock node0)" events --bogus 2>&1) &&
    fail "events --bogus succeeded: $out"
grep -q "unknown option '--bogus'" <<<"$out" ||
    fail "events --bogus: $out"

# The node stops: each stream ends by itself, after "destroy resource".
stop_node node0
for name in text json stats; do
    pid_var=${name}_pid
    for (( i = 0; i < 200; i++ )); do
        kill -0 "${!pid_var}" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "${!pid_var}" 2>/dev/null && fail "events ($name) still running after the node stopped"
    wait "${!pid_var}" || fail "events ($name) exited with $?: $(cat "$tmpdir/$name.err")"
done
tail -n 1 "$tmpdir/text" | grep -Eq "^$ts destroy resource name:r0$" ||
    fail "the stream did not end with 'destroy resource': $(tail -n 3 "$tmpdir/text")"
info "ok"
