#!/usr/bin/env bash
# nbdrepl: user-space instructions per replicated random write (4k
# unless BS says) on one node (callgrind, instrumentation switched on
# for the counted writes only), plain TCP or TLS.  The other node runs
# natively.
#
#   builddir=$PWD bench/tls-callgrind.sh plain|tls QD WRITES node0|node1 OUT [BS]
#
# node0 is the primary.  Prints the instructions per write; OUT is the
# callgrind file (callgrind_annotate OUT for where they go).  Callgrind
# runs the node's threads one at a time, which changes how writes
# batch at QD > 1: compare runs, not single figures.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
source "$(dirname "$0")/../tests/functions.sh"
source "$(dirname "$0")/tls-lib.sh"
mode=${1:?plain or tls} qd=${2:?queue depth} n=${3:?writes}
who=${4:?node0 or node1} out=${5:?callgrind output file}
bs=${6:-4k}
warm=500
case $bs in *M|*m) warm=50 ;; esac
requires valgrind --version
requires fio --version

tls_pair_config "$mode"
args_node0="role=primary"
args_node1=""
start_valgrind () {
    local name=$1 i; shift
    rm -f "$(sock "$name")"
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
        nbdkit -f --exit-with-parent -p "${NBD_PORT[$name]}" "$PLUGIN" \
        config="$CONFIG" node="$name" "$@" >>"$tmpdir/$name.log" 2>&1 &
    PID[$name]=$!
    cleanup_fn "stop_node $name"
    for (( i=0; i<600; i++ )); do
        "$REPLCTL" -s "$(sock "$name")" status >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "node $name under valgrind did not start"
}
for node in node1 node0; do
    a=args_$node
    if [ $node = "$who" ]; then
        start_valgrind $node ${!a}
    else
        start_node $node ${!a}
    fi
done
wait_uptodate node0 120

fio_run () {
    fio --name=w --ioengine=nbd --uri="$(uri node0)" --rw=randwrite --bs="$bs" \
        --iodepth="$qd" --size=256M --io_size=1T --number_ios="$1" \
        --norandommap --output="$tmpdir/fio-$1.txt" >/dev/null ||
        fail "fio: $(tail -5 "$tmpdir/fio-$1.txt")"
}
fio_run $warm
sends () { status_json node0 | jq '.peers[0].sends'; }
s0=$(sends)
callgrind_control -i on "${PID[$who]}" >/dev/null 2>&1
fio_run "$n"
callgrind_control -i off "${PID[$who]}" >/dev/null 2>&1
s1=$(sends)
stop_node "$who"
ir=$(callgrind_annotate "$out" 2>/dev/null | sed -n 's/^ *\([0-9,]*\).*PROGRAM TOTALS.*/\1/p' | tr -d ,)
echo "$mode $bs QD$qd $who: $ir instructions for $n writes: $((ir / n)) per write;" \
     "$(( (s1 - s0) )) batches ($(( n * 10 / (s1 - s0) )) tenths of a write each)"
