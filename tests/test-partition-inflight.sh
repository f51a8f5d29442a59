#!/usr/bin/env bash
# A write in flight when the primary is cut off (3 nodes, quorum
# majority, protocol C): the primary alpha loses both peers while the
# write waits for their answers.  It must not be reported as done, since
# alpha no longer has quorum once they are gone:
#  - on-no-quorum: io-error: the write fails with EIO; the majority
#    promotes beta, alpha is demoted and rejoins; all disks identical.
#  - on-no-quorum: suspend-io: the write waits while alpha has no
#    quorum, and completes once the link is back; it is then on every
#    disk.
# (Before, the write succeeded when the peers timed out, and with a new
# primary promoted on the other side the acknowledged block was lost.)
source "$(dirname "$0")/functions.sh"
requires ip -V
requires jq --version
ns_nodes 10.96.0 alpha beta gamma

write_at ()     # write_at NODE OFFSET BYTE
{
    timeout 60 ip netns exec "$NS-$1" /usr/bin/python3 -m nbd -u "nbd://${addr[$1]}:10809" \
        -c "h.pwrite(b'$3' * 4096, $2)"
}
block_is ()     # block_is NODE OFFSET BYTE
{
    cmp -s <(dd if="$tmpdir/$1.img" bs=4096 skip=$(($2 / 4096)) count=1 status=none) \
           <(head -c 4096 /dev/zero | tr '\0' "$3")
}
all_in_sync ()  # all_in_sync PRIMARY
{
    wait_st "$1" '[.peers[] | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 60
}

start_cluster ()        # start_cluster ON-NO-QUORUM
{
    ns_config -q "$1" alpha beta gamma
    start_ns alpha role=primary
    start_ns beta
    start_ns gamma
    all_in_sync alpha
}

# ---- io-error: the write in flight fails ----------------------------
start_cluster io-error
write_at alpha 0 a || fail "a write before the partition failed"

ip -n "$NS-alpha" link set eth0 down
# The write must start while alpha still counts its peers as connected
# (they time out after ping-timeout, 2 s), so that it waits for them.
st alpha | jq -e '.quorum == true and ([.peers[] | .connection == "Connected"] | all)' >/dev/null ||
    fail "alpha noticed the partition before the write started (machine too slow?)"
if write_at alpha 8192 x 2>"$tmpdir/inflight.err"; then
    fail "a write in flight when alpha lost both peers was acknowledged without quorum"
fi
grep -q "Input/output error\|EIO" "$tmpdir/inflight.err" ||
    fail "the write failed, but not with EIO: $(tail -n 2 "$tmpdir/inflight.err")"
info "io-error: the write in flight failed: $(tail -n 1 "$tmpdir/inflight.err")"
wait_st alpha '.quorum == false' 20

# The majority carries on; alpha steps down and rejoins.
wait_st beta '[.peers[] | select(.name == "alpha") | .connection != "Connected"] | all' 20
"$REPLCTL" -s "$tmpdir/beta.sock" primary || fail "the majority could not promote beta"
write_at beta 4096 b || fail "beta, with the majority, could not write"
"$REPLCTL" -s "$tmpdir/alpha.sock" secondary || fail "demoting alpha failed"
ip -n "$NS-alpha" link set eth0 up
all_in_sync beta
cmp "$tmpdir/alpha.img" "$tmpdir/beta.img" || fail "alpha and beta differ"
cmp "$tmpdir/gamma.img" "$tmpdir/beta.img" || fail "gamma and beta differ"
block_is beta 0 a || fail "the write acknowledged before the partition is lost"
block_is beta 4096 b || fail "beta's write is lost"
for n in alpha beta gamma; do stop_ns $n; done

# ---- suspend-io: the write in flight waits for quorum ---------------
start_cluster suspend-io
ip -n "$NS-alpha" link set eth0 down
st alpha | jq -e '.quorum == true' >/dev/null ||
    fail "alpha noticed the partition before the write started (machine too slow?)"
write_at alpha 12288 s 2>"$tmpdir/suspended.err" &
writer=$!
cleanup_fn "kill $writer 2>/dev/null"
wait_st alpha '.quorum == false' 20
# Quorum is lost and the peers are gone: the write must still be held.
kill -0 $writer 2>/dev/null ||
    fail "the write completed while alpha had no quorum (on-no-quorum: suspend-io)"
info "suspend-io: the write waits while alpha has no quorum"
ip -n "$NS-alpha" link set eth0 up
wait $writer || fail "the suspended write failed once quorum was back: $(cat "$tmpdir/suspended.err")"
all_in_sync alpha
for n in alpha beta gamma; do
    block_is $n 12288 s || fail "the write acknowledged after quorum came back is not on $n"
done
cmp "$tmpdir/alpha.img" "$tmpdir/beta.img" || fail "alpha and beta differ"
cmp "$tmpdir/gamma.img" "$tmpdir/beta.img" || fail "gamma and beta differ"
info "ok: without quorum a write in flight fails (io-error) or waits (suspend-io); never acknowledged early"
