#!/usr/bin/env bash
# The log an operator reads: in the foreground every line of the plugin
# starts with a timestamp; warnings and events carry no "error:"; every
# stop says why (the signal and who sent it); under systemd (stderr is
# $JOURNAL_STREAM) the lines carry a syslog priority instead of a stamp.
source "$(dirname "$0")/functions.sh"
requires jq --version

stamp='^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} nbdkit: '

make_config 2 C 16M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
stop_node node1
wait_log node0 "peer node1: disconnected"
stop_node node0

log0="$tmpdir/node0.log"
[ -s "$log0" ] || fail "node0 logged nothing"
if grep -Evq "$stamp" "$log0"; then
    fail "lines without a timestamp: $(grep -Ev "$stamp" "$log0" | head -n 3)"
fi
info "$(wc -l <"$log0") lines, each with a timestamp"

# The warning (no secret) is a warning, not an error; events are plain.
grep -Eq "${stamp}repl: warning: resource r0 has no secret" "$log0" ||
    fail "no 'repl: warning:' line for the missing secret: $(grep -m1 'no secret' "$log0")"
grep -q "error: warning" "$log0" && fail "a warning is logged as an error"
grep -Eq "${stamp}repl: resource r0: node node0 \(id 0\) started as Primary" "$log0" ||
    fail "no plain start line: $(grep -m1 'started as' "$log0")"
grep -E "started as|resync finished|disconnected" "$log0" | grep -q "error:" &&
    fail "an event is logged as an error: $(grep -E 'started as|resync finished' "$log0" | grep 'error:')"
info "warning and events without 'error:'"

# The reason for the stop: the signal and its sender (this shell).
grep -Eq "${stamp}repl: stopping: received SIGTERM from pid $$ \(bash\)$" "$log0" ||
    fail "node0 did not log its stop by SIGTERM from pid $$: $(grep stopping "$log0")"
info "stop reason: $(grep -o 'stopping: .*' "$log0")"

# SIGINT (^C in a terminal) is named as such.
start_node node1
kill -INT "${PID[node1]}"
wait "${PID[node1]}" || true
PID[node1]=
grep -Eq "${stamp}repl: stopping: received SIGINT from pid $$" "$tmpdir/node1.log" ||
    fail "node1 did not log its stop by SIGINT: $(grep stopping "$tmpdir/node1.log")"
info "SIGINT named"

# A node that cannot start says why, with a timestamp, and stops.
cp "$CONFIG" "$tmpdir/good.yaml"
sed -i 's|disk: node1.img|disk: missing.img|' "$CONFIG"
rm -f "$(sock node1)"
before=$(wc -l <"$tmpdir/node1.log")
if timed 20 nbdkit -f -p "${NBD_PORT[node1]}" "$PLUGIN" config="$CONFIG" \
       node=node1 >>"$tmpdir/node1.log" 2>&1; then
    fail "node1 started with a missing disk"
fi
tail -n +"$((before + 1))" "$tmpdir/node1.log" |
    grep -Eq "${stamp}repl: error: .*missing\.img" ||
    fail "no timestamped error naming the missing disk: $(tail -n 3 "$tmpdir/node1.log")"
cp "$tmpdir/good.yaml" "$CONFIG"
info "start failure: $(tail -n +"$((before + 1))" "$tmpdir/node1.log" | grep -o 'error: .*' | head -n 1)"

# Under systemd: a syslog priority (<4> warning, <6> info) and no
# timestamp (the journal has its own).
before=$(wc -l <"$tmpdir/node1.log")
JOURNAL_STREAM="$(stat -c '%d:%i' "$tmpdir/node1.log")" start_node node1
wait_log node1 "started as"
stop_node node1
new=$(tail -n +"$((before + 1))" "$tmpdir/node1.log")
grep -q '^<4>nbdkit: repl: warning: resource r0 has no secret' <<<"$new" ||
    fail "journal: no <4> warning line: $(head -n 3 <<<"$new")"
grep -q '^<6>nbdkit: repl: resource r0: node node1 (id 1) started as Secondary' <<<"$new" ||
    fail "journal: no <6> start line: $(head -n 3 <<<"$new")"
grep -Eq '^[0-9]{4}-' <<<"$new" && fail "journal: a line with a timestamp"
info "journal lines: $(grep -c '^<[0-9]>nbdkit: repl: ' <<<"$new") with a priority"
