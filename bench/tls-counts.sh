#!/usr/bin/env bash
# nbdrepl: what a replicated 4k random write costs the primary and the
# secondary, counted rather than timed, so that other work on the
# machine does not move the figures: system calls by type, context
# switches and wake-ups (perf stat on every thread of each nbdkit), and
# with TLS the SSL_write_ex / SSL_read_ex calls and the records
# encrypted and decrypted (uprobes on libssl and libcrypto).
#
#   builddir=$PWD bench/tls-counts.sh plain|tls QD WRITES [BS]
#   TLS_PROBES=no builddir=$PWD bench/tls-counts.sh tls QD WRITES [BS]
#
# A 2-node mirror on loopback (the tests' configuration, protocol C,
# cork on, 256 MiB), fio's nbd engine against the primary: random
# writes of BS bytes (default 4k), 2,000 to warm up (200 if BS is 1M or
# more), then WRITES counted (fio's io_size lets it go round the disk
# more than once: without it, fio stops at 256 writes of 1M).  Prints
# one line per node and figure, per write.  Needs root (perf
# tracepoints and uprobes).  Also the CPU time of each node per write,
# which is timed, not counted (the load moves it), and which the
# uprobes inflate (a trap per SSL call and per record): with
# TLS_PROBES=no there are none.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
source "$(dirname "$0")/../tests/functions.sh"
source "$(dirname "$0")/tls-lib.sh"
mode=${1:?plain or tls} qd=${2:?queue depth} n=${3:?number of writes}
bs=${4:-4k}
warm=2000
case $bs in *M|*m) warm=200 ;; esac
requires fio --version
requires perf --version
requires jq --version

tls_pair_config "$mode"
start_node node0 role=primary
start_node node1
wait_uptodate node0 30

libssl=$(ldconfig -p | sed -n 's/.*libssl.so.3 (libc6,x86-64) => //p' | head -1)
libcrypto=$(ldconfig -p | sed -n 's/.*libcrypto.so.3 (libc6,x86-64) => //p' | head -1)
probes=()
if [ "$mode" = tls ] && [ "${TLS_PROBES:-yes}" != no ]; then
    # Records: tls13_enc ends each one with EVP_{En,De}cryptFinal_ex.
    # By address: by name perf also probes the PLT stub, which
    # libcrypto's own calls go through (each call counted twice).
    addr () { nm -D "$1" | sed -n "s/^0*\([0-9a-f]*\) T $2@@.*/0x\1/p"; }
    perf probe -q -d 'probe_tlscount:*' 2>/dev/null || true
    perf probe -q -x "$libssl" \
        -a "probe_tlscount:ssl_write=$(addr "$libssl" SSL_write_ex)" \
        -a "probe_tlscount:ssl_read=$(addr "$libssl" SSL_read_ex)"
    perf probe -q -x "$libcrypto" \
        -a "probe_tlscount:enc=$(addr "$libcrypto" EVP_EncryptFinal_ex)" \
        -a "probe_tlscount:dec=$(addr "$libcrypto" EVP_DecryptFinal_ex)"
    cleanup_fn "perf probe -q -d 'probe_tlscount:*'"
    probes=(-e probe_tlscount:ssl_write -e probe_tlscount:ssl_read
            -e probe_tlscount:enc -e probe_tlscount:dec)
fi

fio_run () {
    fio --name=w --ioengine=nbd --uri="$(uri node0)" --rw=randwrite --bs="$bs" \
        --iodepth="$qd" --size=256M --io_size=1T --number_ios="$1" \
        --norandommap --output="$tmpdir/fio-$1.txt" >/dev/null ||
        fail "fio: $(tail -5 "$tmpdir/fio-$1.txt")"
}
fio_run $warm

peer_stat () { status_json "$1" | jq -r ".peers[0] | \"\(.messages_sent) \(.bytes_sent) \(.sends)\""; }
# CPU time of every thread, user and system, in clock ticks (the one
# figure here that the machine's load moves: caches, steal).
cpu_ticks () { awk '{ print $14, $15 }' "/proc/$1/stat"; }
declare -A before perfpid cpu0
for node in node0 node1; do
    before[$node]=$(peer_stat $node)
    cpu0[$node]=$(cpu_ticks "${PID[$node]}")
    perf stat -x, -o "$tmpdir/perf-$node.csv" -p "${PID[$node]}" \
        -e context-switches -e sched:sched_wakeup -e raw_syscalls:sys_enter \
        -e syscalls:sys_enter_read -e syscalls:sys_enter_write \
        -e syscalls:sys_enter_recvfrom -e syscalls:sys_enter_sendto \
        -e syscalls:sys_enter_sendmsg -e syscalls:sys_enter_poll \
        -e syscalls:sys_enter_futex -e syscalls:sys_enter_pwrite64 \
        -e syscalls:sys_enter_ioctl "${probes[@]}" &
    perfpid[$node]=$!
done
sleep 1                         # perf has attached
fio_run "$n"
for node in node0 node1; do
    kill -INT "${perfpid[$node]}"
done
wait "${perfpid[node0]}" "${perfpid[node1]}" 2>/dev/null || true

for node in node0 node1; do
    role=secondary; [ $node = node0 ] && role=primary
    read -r m0 b0 s0 <<<"${before[$node]}"
    read -r m1 b1 s1 <<<"$(peer_stat $node)"
    read -r u0 k0 <<<"${cpu0[$node]}"
    read -r u1 k1 <<<"$(cpu_ticks "${PID[$node]}")"
    awk -F, -v n="$n" -v who="$mode $bs QD$qd $role" \
        -v msgs=$((m1 - m0)) -v bytes=$((b1 - b0)) -v sends=$((s1 - s0)) \
        -v utime=$((u1 - u0)) -v stime=$((k1 - k0)) -v hz="$(getconf CLK_TCK)" '
        $3 != "" && $1 ~ /^[0-9]+$/ {
            ev = $3; sub(/^(syscalls:sys_enter_|raw_syscalls:sys_enter$|probe_tlscount:|sched:)/, "", ev)
            if ($3 == "raw_syscalls:sys_enter") ev = "syscalls"
            v[ev] = $1; order[++k] = ev
        }
        END {
            printf "%s: %d writes; peer: %.3f messages, %.3f sends, %.0f bytes sent per write\n",
                   who, n, msgs / n, sends / n, bytes / n
            for (i = 1; i <= k; i++)
                printf "%s: %-16s %8.3f per write (%d)\n", who, order[i], v[order[i]] / n, v[order[i]]
            printf "%s: %-16s %8.1f user + %.1f system us per write (timed, not counted)\n", who, "cpu",
                   utime * 1e6 / hz / n, stime * 1e6 / hz / n
            if (v["enc"] > 0)
                printf "%s: %-16s %8.0f\n", who, "bytes/record out", bytes / v["enc"]
        }' "$tmpdir/perf-$node.csv"
done
