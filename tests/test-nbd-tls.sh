#!/usr/bin/env bash
# The NBD client link with TLS: nbdkit's own --tls=require
# --tls-psk=FILE in front of the repl plugin.  A client without TLS or
# with the wrong key is refused; nbdcopy and nbdsh with nbds:// URIs, and
# fio's nbd engine through a local TLS proxy (nbdkit's nbd plugin), write
# and read; the secondary gets the data.  The
# same for a diskless node's unix socket (nbds+unix).
source "$(dirname "$0")/functions.sh"
requires jq --version
requires fio --version
requires openssl version

psk="$tmpdir/keys.psk"
echo "alice:$(openssl rand -hex 32)" > "$psk"
echo "alice:$(openssl rand -hex 32)" > "$tmpdir/wrong.psk"
chmod 600 "$psk" "$tmpdir/wrong.psk"

make_diskless_config 32M

# node0: the NBD export over TLS only.
port0=${NBD_PORT[node0]}
nbdkit -f --exit-with-parent -p "$port0" --tls=require --tls-psk="$psk" \
    "$PLUGIN" config="$CONFIG" node=node0 >>"$tmpdir/node0.log" 2>&1 &
pid0=$!
cleanup_fn "kill $pid0 2>/dev/null; wait $pid0 2>/dev/null"
start_node node1
wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected"] | all' 30

tls_uri="nbds://alice@127.0.0.1:$port0/?tls-psk-file=$psk"
if timeout 30 nbdinfo --size "nbd://127.0.0.1:$port0" >/dev/null 2>&1; then
    fail "a client without TLS was served"
fi
if timeout 30 nbdinfo --size "nbds://alice@127.0.0.1:$port0/?tls-psk-file=$tmpdir/wrong.psk" >/dev/null 2>&1; then
    fail "a client with the wrong key was served"
fi
head -c 16M /dev/urandom > "$tmpdir/data"
timed 60 nbdcopy "$tmpdir/data" "$tls_uri" || fail "nbdcopy over TLS failed"
# nbdsh -u refuses URIs that name local files; the handle allows it.
# It disconnects cleanly (NBD_CMD_DISC): in one sanitizer run, right
# after a client here dropped its TLS connection without it, nbdkit
# 1.32 itself (no plugin code on the stacks) reported a use-after-free
# in its GnuTLS send path; see SECURITY.md.
timed 60 nbdsh -c "
import sys
h.set_uri_allow_local_file(True)
h.connect_uri('$tls_uri')
same = h.pread(4096, 0) == open('$tmpdir/data', 'rb').read(4096)
h.shutdown()
sys.exit(0 if same else 1)" ||
    fail "nbdsh over TLS read something else"
# fio 3.33's nbd engine cannot open URIs that name local files (the PSK
# file), so it goes through a local nbdkit nbd plugin that speaks TLS.
nbdkit -f --exit-with-parent -U "$tmpdir/proxy.sock" nbd hostname=127.0.0.1 \
    port="$port0" tls=require tls-psk="$psk" tls-username=alice \
    >>"$tmpdir/proxy.log" 2>&1 &
proxy=$!
cleanup_fn "kill $proxy 2>/dev/null; wait $proxy 2>/dev/null"
for (( i=0; i<100; i++ )); do [ -S "$tmpdir/proxy.sock" ] && break; sleep 0.1; done
timeout 60 fio --name=tls --ioengine=nbd --uri="nbd+unix:///?socket=$tmpdir/proxy.sock" \
    --rw=randwrite --bs=4k --iodepth=8 --size=16M --offset=16M --time_based=1 \
    --runtime=2 --output=/dev/null || fail "fio through the TLS proxy failed"
wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected" and .out_of_sync_bytes == 0] | all' 30
cmp -n $((16 << 20)) "$tmpdir/data" "$(disk node1)" || fail "the secondary does not hold what was written over TLS"
info "TCP: no TLS and the wrong key refused; nbdcopy, nbdsh and fio over TLS"

# The diskless node's unix socket, TLS too.
sock2="$tmpdir/node2.nbd"
nbdkit -f --exit-with-parent -U "$sock2" --tls=require --tls-psk="$psk" \
    "$PLUGIN" config="$CONFIG" node=node2 >>"$tmpdir/node2.log" 2>&1 &
pid2=$!
cleanup_fn "kill $pid2 2>/dev/null; wait $pid2 2>/dev/null"
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
if timeout 30 nbdinfo --size "nbd+unix:///?socket=$sock2" >/dev/null 2>&1; then
    fail "the diskless node served a client without TLS"
fi
timed 60 nbdcopy "nbds+unix://alice@/?socket=$sock2&tls-psk-file=$psk" "$tmpdir/back" ||
    fail "reading the diskless node over TLS failed"
cmp -n $((16 << 20)) "$tmpdir/data" "$tmpdir/back" || fail "the diskless node read back something else"
info "ok: TLS on the NBD links of a storage node and of a diskless node"
