#!/usr/bin/python3
# nbdrepl benchmark harness: the entry point behind scripts/bench.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
"""scripts/bench [--quick]   nbdrepl against nbdkit's file plugin, fio's
                            nbd engine (bench/harness/targets.py)
scripts/bench --table       the seed table: raw file, nbdkit file, repl
                            2/3 nodes, the diskless transport, tgt iSCSI
                            on a file and on the repl volume, with
                            replbench; charts (bench/harness/table.py)
scripts/bench --scale       1..4 storage nodes, 1..8 connections
scripts/bench --table-vm    the rows against LIO (the kernel's iSCSI
                            target) and on /dev/nbd0, in a guest kernel
                            under qemu's TCG (scripts/bench-vm)

Python 3 standard library only.  Installs the dependencies and builds
the tree first (scripts/install-deps, scripts/build) unless
BENCH_PREBUILT is set.  `scripts/bench --help` and `scripts/bench
--table --help` describe each mode, its environment and its output.
"""

import os
import signal
import subprocess
import sys

sys.dont_write_bytecode = True     # nothing written into the tree
import common as c                 # noqa: E402


def on_signal(signum, frame):
    # Unwinds through every finally: the run's clean-up stops what it
    # started and removes what it made.
    c.say(f"stopped by signal {signal.Signals(signum).name}; cleaning up")
    raise SystemExit(128 + signum)


def build():
    if os.environ.get("BENCH_PREBUILT"):
        return
    for script in ("scripts/install-deps", "scripts/build"):
        # Progress and build output go to stderr; stdout is the report.
        r = subprocess.run([os.path.join(c.TOP, script)], stdout=sys.stderr,
                           cwd=c.TOP, timeout=3600)
        if r.returncode != 0:
            c.die(f"{script} failed (exit {r.returncode})")


def main():
    args = sys.argv[1:]
    # SIGINT too, even where the shell that started us ignores it (a
    # background job).
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    table = bool(args) and args[0] in ("--table", "--scale")
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
    import table as t
    import targets
    mode = t if table else targets
    try:
        return mode.main(args, build)
    except c.BenchError as e:
        c.say(str(e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
