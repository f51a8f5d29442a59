#!/usr/bin/env bash
# replctl status shows the generation UUIDs, the metadata, the activity
# log and the resync progress, and they follow the node's life: two
# nodes in sync hold the same current UUID; when the secondary dies the
# primary starts a new generation and its bitmap for the secondary counts
# from the old one; when the secondary comes back it is resynced from
# that bitmap (with a rate and an ETA while it runs), and afterwards both
# hold the new current UUID.  replctl status --watch redraws until it is
# interrupted, and stops with an error when the node goes away.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires nbdcopy --version

hex='^[0-9a-f]{16}$'
zero=0000000000000000
just_created=0000000000000004   # UUID_JUST_CREATED
mib=$((1 << 20))

# jq_check NAME JSON EXPR [ARGS...]: the jq expression must be true.
jq_check ()
{
    local what=$1 json=$2 expr=$3; shift 3
    jq -e "$@" "$expr" <<<"$json" >/dev/null ||
        fail "$what: '$expr' is not true in: $json"
}

# A resync rate of 12 MiB/s, so that the resync of 16 MiB lasts long
# enough (about 1.3 s) to be seen in progress.
make_config 2 C 32M
cat >>"$CONFIG" <<'EOF'
resync:
  resync-rate: 12M
EOF
start_node node0 role=primary
start_node node1
wait_uptodate node0

# ---- In sync after the first (full) sync.
st0=$(status_json node0)
st1=$(status_json node1)
for n in node0 node1; do
    if [ $n = node0 ]; then st=$st0; else st=$st1; fi
    jq_check "$n" "$st" '
        (.current_uuid | test($hex)) and
        .current_uuid != $zero and .current_uuid != $jc and
        (.history_uuids | length == 2 and all(test($hex))) and
        .meta_path == $meta and .meta_busy == false and
        .last_stop == "clean" and
        (.meta_flags | index("consistent") != null) and
        .al_extents > 0 and .al_extent_size >= 65536 and
        .al_active_extents <= .al_extents and .al_seq >= 1 and
        (.al_waits | type == "number") and .al_failed == false and
        (.peers[0].bitmap_uuid == $zero) and
        (.peers[0].peer_uuids.current | test($hex)) and
        (.peers[0].peer_uuids.history | length == 2) and
        (.peers[0].peer_uuids.flags | type == "array") and
        .peers[0].resync_rate_bytes_per_s == 0 and
        .peers[0].resync_eta_s == null' \
        --arg hex "$hex" --arg zero "$zero" --arg jc "$just_created" \
        --arg meta "$(disk $n).meta"
done
jq_check node0 "$st0" '(.meta_flags | index("primary") != null) and
                       .peers[0].sync_decision == "sync-source-full"'
jq_check node1 "$st1" '(.meta_flags | index("primary") == null) and
                       .peers[0].sync_decision == "sync-target-full" and
                       (.peers[0].peer_uuids.flags | index("primary") != null)'
u0=$(jq -r .current_uuid <<<"$st0")
[ "$(jq -r .current_uuid <<<"$st1")" = "$u0" ] ||
    fail "after the first sync the current UUIDs differ: node0 $u0, node1 $(jq -r .current_uuid <<<"$st1")"
jq_check node1 "$st1" '.peers[0].peer_uuids.current == $u0' --arg u0 "$u0"
info "in sync: current UUID $u0 on both nodes"

# The human status shows the same.
"$REPLCTL" -s "$(sock node0)" status > "$tmpdir/human0"
grep -q "^  uuids current:$u0 history:" "$tmpdir/human0" ||
    fail "human status of node0 has no uuids line with $u0: $(cat "$tmpdir/human0")"
grep -q "^    decision:sync-source-full bitmap-uuid:$zero\$" "$tmpdir/human0" ||
    fail "human status of node0 has no decision line: $(cat "$tmpdir/human0")"
grep -Eq "^  activity-log extents:[0-9]+/[0-9]+ of " "$tmpdir/human0" ||
    fail "human status of node0 has no activity-log line: $(cat "$tmpdir/human0")"

# ---- The secondary dies; the primary writes without it.
kill_node node1
wait_for node0 '.peers[0].connection != "Connected"' 10
head -c $((16 * mib)) /dev/urandom > "$tmpdir/data"
timeout 60 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "nbdcopy failed"
st0=$(status_json node0)
jq_check node0 "$st0" '
    (.current_uuid | test($hex)) and .current_uuid != $u0 and
    .current_uuid != $zero and
    .peers[0].bitmap_uuid == $u0 and
    .peers[0].disk == "Outdated" and
    .peers[0].out_of_sync_bytes >= $n and
    .al_active_extents > 0 and .al_waits > 0' \
    --arg hex "$hex" --arg u0 "$u0" --arg zero "$zero" \
    --argjson n $((16 * mib))
u1=$(jq -r .current_uuid <<<"$st0")
info "node1 away: node0's current UUID $u1, its bitmap for node1 counts from $u0"

# ---- The secondary comes back and is resynced from the bitmap.
"$REPLCTL" -s "$(sock node0)" status --watch 0.2 \
    > "$tmpdir/watch" 2> "$tmpdir/watch.err" &
watch_pid=$!
cleanup_fn 'if [ -n "$watch_pid" ]; then kill "$watch_pid"; wait "$watch_pid"; fi'
start_node node1
jq_check node1 "$(status_json node1)" '.last_stop == "unclean"'

# Catch the resync in progress, past its first quarter so that the
# average rate means something.
during=
for (( i=0; i<600; i++ )); do
    st=$(status_json node0)
    if jq -e '.peers[0].replication == "SyncSource" and
              .peers[0].resync_done_bytes * 4 >= .peers[0].resync_total_bytes and
              .peers[0].resync_done_bytes < .peers[0].resync_total_bytes' \
           <<<"$st" >/dev/null; then
        during=$st
        break
    fi
    jq -e '.peers[0].replication == "Established" and
           .peers[0].out_of_sync_bytes == 0' <<<"$st" >/dev/null && break
    sleep 0.05
done
[ -n "$during" ] || fail "the resync was never seen in progress: $st"
jq_check node0 "$during" '
    .peers[0].sync_decision == "sync-source-bitmap" and
    .peers[0].bitmap_uuid == $u0 and
    .peers[0].resync_total_bytes >= $n and
    .peers[0].resync_percent < 100 and
    .peers[0].resync_rate_bytes_per_s >= $rate / 2 and
    .peers[0].resync_rate_bytes_per_s <= $rate * 2 and
    (.peers[0].resync_eta_s | type == "number" and . >= 0 and . <= 3)' \
    --arg u0 "$u0" --argjson n $((16 * mib)) --argjson rate $((12 * mib))
info "resync seen: $(jq -c '.peers[0] | {resync_done_bytes, resync_total_bytes, resync_rate_bytes_per_s, resync_eta_s}' <<<"$during")"

wait_uptodate node0
kill -INT "$watch_pid"
watch_status=0
wait "$watch_pid" || watch_status=$?
watch_pid=
[ "$watch_status" -eq 0 ] ||
    fail "status --watch exited with $watch_status after SIGINT: $(cat "$tmpdir/watch.err")"
[ "$(grep -c '^r0 node:node0 ' "$tmpdir/watch")" -ge 2 ] ||
    fail "status --watch drew fewer than 2 frames: $(cat "$tmpdir/watch")"
grep -Eq '^    \[[=]*>?[.]*\] [0-9.]+% rate:' "$tmpdir/watch" ||
    fail "status --watch never showed a progress bar: $(cat "$tmpdir/watch")"

# ---- In sync again, in the new generation.
st0=$(status_json node0)
st1=$(status_json node1)
jq_check node0 "$st0" '
    .current_uuid == $u1 and .history_uuids[0] == $u0 and
    .peers[0].bitmap_uuid == $zero and
    .peers[0].resync_total_bytes >= $n and
    .peers[0].resync_total_bytes < $size' \
    --arg u0 "$u0" --arg u1 "$u1" --arg zero "$zero" \
    --argjson n $((16 * mib)) --argjson size $((32 * mib))
jq_check node1 "$st1" '
    .current_uuid == $u1 and
    .peers[0].sync_decision == "sync-target-bitmap" and
    .peers[0].peer_uuids.current == $u1' --arg u1 "$u1"
same_disks node0 node1
info "in sync again: current UUID $u1 on both nodes"

# ---- --watch: SIGTERM ends it cleanly; with --json one object a line.
: > "$tmpdir/watch.json"
"$REPLCTL" -s "$(sock node0)" status --json --watch=0.2 \
    >> "$tmpdir/watch.json" 2> "$tmpdir/watch.err" &
watch_pid=$!
for (( i=0; i<100; i++ )); do
    [ "$(wc -l < "$tmpdir/watch.json")" -ge 2 ] && break
    sleep 0.1
done
kill -TERM "$watch_pid"
watch_status=0
wait "$watch_pid" || watch_status=$?
watch_pid=
[ "$watch_status" -eq 0 ] ||
    fail "status --json --watch exited with $watch_status after SIGTERM"
[ "$(wc -l < "$tmpdir/watch.json")" -ge 2 ] ||
    fail "status --json --watch printed fewer than 2 lines"
jq -e --arg u1 "$u1" '.current_uuid == $u1' "$tmpdir/watch.json" >/dev/null ||
    fail "status --json --watch printed something else: $(cat "$tmpdir/watch.json")"

# ---- --watch stops, with an error, when the node goes away.
: > "$tmpdir/watch"
"$REPLCTL" -s "$(sock node1)" status --watch 0.2 \
    >> "$tmpdir/watch" 2> "$tmpdir/watch.err" &
watch_pid=$!
for (( i=0; i<100; i++ )); do
    grep -q '^r0 node:node1 ' "$tmpdir/watch" && break
    sleep 0.1
done
stop_node node1
watch_status=0
timeout 10 tail --pid="$watch_pid" -f /dev/null ||
    fail "status --watch still runs 10 s after node1 stopped"
wait "$watch_pid" || watch_status=$?
watch_pid=
[ "$watch_status" -eq 1 ] ||
    fail "status --watch exited with $watch_status when node1 stopped, not 1"
grep -q "stopped watching" "$tmpdir/watch.err" ||
    fail "status --watch did not say why it stopped: $(cat "$tmpdir/watch.err")"
info "ok"
