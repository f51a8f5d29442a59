#!/usr/bin/env bash
# fencing: resource-only.  A Primary that loses its peer holds writes
# until the fence-peer handler exits: a write that lost the peer, and
# writes after it, complete only after the handler has finished; exit
# 4 (peer outdated) lets them go on and marks the peer Outdated; a
# failed fence (exit 1) holds them, status says so, and replctl
# resume-io lets them go on.  Without a fence-peer handler the
# configuration is refused.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
cp "$CONFIG" "$tmpdir/base.yaml"
echo "fencing: resource-only" >> "$CONFIG"

# Refused without a fence-peer handler.
out=$(timeout 10 nbdkit -f --exit-with-parent -p "$(free_port)" "$PLUGIN" \
          config="$CONFIG" node=node0 2>&1 </dev/null) &&
    fail "fencing without fence-peer started"
grep -q "fencing: resource-only needs a fence-peer handler" <<<"$out" ||
    fail "fencing without fence-peer: $(tail -n 3 <<<"$out")"

# The handler records when it ran; its exit status comes from a file.
fence="$tmpdir/fence"
echo 4 > "$fence.status"
cat >> "$CONFIG" <<EOT
handlers:
  fence-peer: 'sleep 2; date +%s.%N > $fence.done; exit \$(cat $fence.status)'
EOT
start_node node0 role=primary
start_node node1
wait_uptodate node0 30

# A write while node1 is lost: done only after the handler.
kill_node node1
nbdsh -u "$(uri node0)" -c 'h.pwrite(b"\x11" * 65536, 0)'
date +%s.%N > "$tmpdir/write.done"
[ -e "$fence.done" ] || fail "a write completed before fence-peer had run"
awk -v w="$(cat "$tmpdir/write.done")" -v f="$(cat "$fence.done")" \
    'BEGIN { exit !(w >= f) }' ||
    fail "the write completed before fence-peer exited"
wait_for node0 '.peers[0].disk == "Outdated" and .writes_held == null' 10
grep -q "fence-peer exited 4 (the peer was outdated): writes go on" "$tmpdir/node0.log" ||
    fail "the fence is not in the log"
info "exit 4: the write waited for the fence, the peer is Outdated"
start_node node1
wait_uptodate node0 30
same_disks node0 node1

# A failed fence holds writes until resume-io.
rm -f "$fence.done"
echo 1 > "$fence.status"
kill_node node1
nbdsh -u "$(uri node0)" -c 'h.pwrite(b"\x22" * 65536, 65536)' &
writer=$!
cleanup_fn 'if [ -n "$writer" ]; then kill $writer; wait $writer; fi'
wait_for node0 '.writes_held == "fence-failed"' 20
kill -0 "$writer" 2>/dev/null || fail "a write completed after a failed fence"
"$REPLCTL" -s "$(sock node0)" status | grep -q "writes: HELD (fence-failed): replctl resume-io" ||
    fail "human status: $("$REPLCTL" -s "$(sock node0)" status)"
"$REPLCTL" -s "$(sock node0)" resume-io | grep -q "writes resumed" ||
    fail "resume-io failed"
for (( i = 0; i < 100; i++ )); do
    kill -0 "$writer" 2>/dev/null || break
    sleep 0.1
done
wait "$writer" || fail "the held write failed after resume-io"
writer=
out=$("$REPLCTL" -s "$(sock node0)" resume-io 2>&1) && fail "a second resume-io: $out"
grep -q "not held by a failed fence" <<<"$out" || fail "resume-io: $out"
info "exit 1: writes held until resume-io, then done"
start_node node1
wait_uptodate node0 30
same_disks node0 node1
info "ok"
