#!/usr/bin/env bash
# fencing: resource-only.  A Primary that loses its peer holds writes
# until the fence-peer handler exits: a write that lost the peer, and
# writes after it, complete only after the handler has finished; exit
# 4 (peer outdated) lets them go on and marks the peer Outdated; a
# failed fence (exit 1) holds them, status says so, and replctl
# resume-io lets them go on; so does a handler still running after
# fencing-timeout.  replctl outdate on a Secondary: Outdated, not
# promoted without --force.  Without a fence-peer handler the
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
echo 2 > "$fence.sleep"
cat >> "$CONFIG" <<EOT
fencing-timeout: 4
handlers:
  fence-peer: 'sleep \$(cat $fence.sleep); date +%s.%N > $fence.done; exit \$(cat $fence.status)'
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

# A handler that runs past fencing-timeout (4 s) has failed.
echo 7 > "$fence.status"
echo 8 > "$fence.sleep"
kill_node node1
nbdsh -u "$(uri node0)" -c 'h.pwrite(b"\x33" * 65536, 131072)' &
writer=$!
wait_for node0 '.writes_held == "fence-failed"' 15
grep -q "fence-peer has not exited within fencing-timeout (4 s)" "$tmpdir/node0.log" ||
    fail "the fence timeout is not in the log"
kill -0 "$writer" 2>/dev/null || fail "a write completed while the fence hung"
"$REPLCTL" -s "$(sock node0)" resume-io >/dev/null || fail "resume-io failed"
wait "$writer" || fail "the held write failed after resume-io"
writer=
wait_log node0 "fence-peer exited 7 after replctl resume-io: ignored" 15
info "a fence past fencing-timeout: held until resume-io, its late end ignored"
start_node node1
wait_uptodate node0 30
same_disks node0 node1

# replctl outdate: refused on the Primary; a Secondary is Outdated and
# not promoted without --force.
out=$("$REPLCTL" -s "$(sock node0)" outdate 2>&1) && fail "outdate on the Primary: $out"
grep -q "this node is Primary" <<<"$out" || fail "outdate on the Primary: $out"
[ "$("$REPLCTL" -s "$(sock node1)" outdate)" = Outdated ] || fail "outdate failed"
[ "$("$REPLCTL" -s "$(sock node1)" dstate)" = Outdated ] ||
    fail "dstate after outdate: $("$REPLCTL" -s "$(sock node1)" dstate)"
"$REPLCTL" -s "$(sock node0)" secondary >/dev/null || fail "demote failed"
wait_for node1 '.peers[0].role == "Secondary"' 10
out=$("$REPLCTL" -s "$(sock node1)" primary 2>&1) && fail "an Outdated node was promoted: $out"
grep -q "not UpToDate" <<<"$out" || fail "promote of an Outdated node: $out"
info "outdate: Outdated, promotion refused without --force"
info "ok"
