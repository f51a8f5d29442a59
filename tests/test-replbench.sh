#!/usr/bin/env bash
# replbench (client/replbench.c) against a real two-node resource: a
# random-write load with --verify finds every block as last written;
# --json reports the counts; a sequential --verify write is found again
# by --verify-only with the same seed and refused with another; the
# secondary ends identical.
source "$(dirname "$0")/functions.sh"
requires jq --version

RB="$builddir/client/replbench"
make_config 2 C 32M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
uri=$(uri node0)

out=$("$RB" --uri "$uri" --rw randwrite --bs 4k --qd 16 --runtime 2 --verify) ||
    fail "randwrite --verify failed: $out"
grep -q "verify ok" <<<"$out" || fail "randwrite --verify: $out"
info "$out"

json=$("$RB" --uri "$uri" --rw randrw --rwmixread 70 --qd 8 --runtime 1 --verify --json) ||
    fail "randrw --json failed: $json"
jq -e '.errors == 0 and .verify_bad_blocks == 0 and .reads > 0 and .writes > 0 and .iops > 0 and .p99_us >= .p50_us' \
    >/dev/null <<<"$json" || fail "randrw --json: $json"

"$RB" --uri "$uri" --rw write --bs 64k --qd 4 --size 8M --runtime 30 --verify --seed 7 >/dev/null ||
    fail "sequential --verify write failed"
"$RB" --uri "$uri" --verify-only --bs 64k --size 8M --seed 7 >/dev/null ||
    fail "--verify-only with the same seed failed"
if "$RB" --uri "$uri" --verify-only --bs 64k --size 8M --seed 8 >/dev/null 2>&1; then
    fail "--verify-only with another seed passed"
fi
info "verify-only: the same seed passes, another fails"

wait_uptodate node0 30
same_disks node0 node1
info "ok"
