#!/usr/bin/env bash
# The benchmark harness (scripts/bench, bench/harness/, bench/fio/) in
# its smallest run: nbdkit's file plugin and a 2-node repl resource, one
# 1 s fio point each and one resync of 64 MiB, into this test's
# temporary directory.  The run must end cleanly, its report must have
# every section, every point must be in points.tsv and points.json, the
# resync must have delivered the data, and the harness must leave
# nothing behind.  No number is checked: that is the benchmark's job.
source "$(dirname "$0")/functions.sh"
requires fio --version
requires nbdcopy --version
requires jq --version
requires /usr/bin/python3 -c 'import json, statistics'

top="$(cd "$(dirname "$0")/.." && pwd)"
out="$tmpdir/out"
work="$tmpdir/work"
mkdir -p "$work"

# Settings are checked before anything is built or started.
BENCH_PREBUILT=1 BENCH_ROWS="raw no-such-row" "$top/scripts/bench" --table \
    2>"$tmpdir/rows.err" && fail "an unknown BENCH_ROWS entry was accepted"
grep -q "no row 'no-such-row'" "$tmpdir/rows.err" ||
    fail "unknown row: $(cat "$tmpdir/rows.err")"
BENCH_PREBUILT=1 BENCH_TARGETS="file nope" "$top/scripts/bench" \
    2>"$tmpdir/targets.err" && fail "an unknown BENCH_TARGETS entry was accepted"
grep -q "unknown target 'nope'" "$tmpdir/targets.err" ||
    fail "unknown target: $(cat "$tmpdir/targets.err")"

info "one small run of scripts/bench"
BENCH_PREBUILT=1 BENCH_OUTDIR="$out" BENCH_TMPDIR="$work" BENCH_SIZE=64M \
    BENCH_RUNTIME=1 BENCH_RAMP=0 BENCH_QUIET_WAIT=0 BENCH_RETRY=0 \
    BENCH_TARGETS="file repl-2" BENCH_WORKLOADS="randwrite-qd1 resync" \
    timeout 300 "$top/scripts/bench" >"$tmpdir/stdout.md" 2>"$tmpdir/bench.err" ||
    fail "scripts/bench failed: $(tail -n 20 "$tmpdir/bench.err")"

reports=("$out"/results-*.md)
[ ${#reports[@]} -eq 1 ] && [ -f "${reports[0]}" ] || fail "no single report in $out"
cmp -s "${reports[0]}" "$tmpdir/stdout.md" || fail "the report on stdout is not the one saved"
run="$out/$(basename "${reports[0]}" .md | sed 's/^results-//')"
[ -d "$run" ] || fail "no run directory $run"
# Named by date and commit.
[[ $(basename "$run") =~ ^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{7,}(\+changes)?$|^[0-9]{8}T[0-9]{6}Z-unknown$ ]] ||
    fail "run not named by date and commit: $(basename "$run")"

for section in "## Machine" "## Results" "## Targets" "## Every point (noise)" \
               "## Errors in the node logs" "## Commands" \
               "| 4k randwrite QD1 | IOPS |" "| | p50 µs |" \
               "| resync 64 MiB (full, unthrottled) | MiB/s | n/a |" \
               "| workload | file front / all | repl-2 front / all |"; do
    grep -qF -- "$section" "${reports[0]}" || fail "the report has no '$section'"
done

# Every point: file and repl-2 at QD1, the resync on repl-2 only.
[ "$(wc -l < "$run/points.tsv")" -eq 4 ] || fail "points.tsv: $(cat "$run/points.tsv")"
[ "$(head -n 1 "$run/points.tsv" | tr '\t' '\n' | wc -l)" -eq 21 ] ||
    fail "points.tsv does not have the 21 columns"
jq -e 'length == 3 and all(.status == "ok")
       and ([.[] | .target + "/" + .workload] ==
            ["file/randwrite-qd1", "repl-2/randwrite-qd1", "repl-2/resync"])
       and (.[0].iops > 0) and (.[2].mibs > 0)' "$run/points.json" >/dev/null ||
    fail "points.json: $(cat "$run/points.json")"
jq -e '.[2].note | contains("secondary'"'"'s disk identical to the data")' \
    "$run/points.json" >/dev/null || fail "resync: $(jq -r '.[2].note' "$run/points.json")"

# fio ran on the job files in bench/fio/.
grep -q "^include $top/bench/fio/nbd.fio\$" "$run/fio/randwrite-qd1-file-r1.fio" ||
    fail "job file: $(cat "$run/fio/randwrite-qd1-file-r1.fio")"
jq -e '(.jobs[0]["job options"].rw // ."global options".rw) == "randwrite"' \
    "$run/fio/randwrite-qd1-file-r1.json" >/dev/null || fail "fio did not run randwrite"

# Nothing left behind: the harness's temporary directory and processes.
[ -z "$(ls -A "$work")" ] || fail "left in BENCH_TMPDIR: $(ls -A "$work")"
if pgrep -f "$work/" >/dev/null; then fail "processes left: $(pgrep -af "$work/")"; fi
info "ok: $(basename "${reports[0]}")"
