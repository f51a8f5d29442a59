# nbdrepl benchmark harness: what the modes share.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
#
# Processes (started, stopped by pid only, however the run ends), CPU
# accounting from /proc, the machine's description, medians and the
# formatting of numbers, fio runs on the job files in bench/fio/, and the
# name of a run (its UTC date and the commit measured).

import json
import os
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIO_DIR = os.path.join(TOP, "bench", "fio")
CLK_TCK = os.sysconf("SC_CLK_TCK")
NPROC = os.cpu_count() or 1

NAME = "bench"      # the prefix of messages; each mode sets its own


class BenchError(Exception):
    """Something broke (not a number): the run stops and exits 1."""


def say(msg):
    print(f"{NAME}: {msg}", file=sys.stderr, flush=True)


def die(msg):
    raise BenchError(msg)


def qcmd(argv):
    return " ".join(shlex.quote(str(a)) for a in argv)


# ---- settings from the environment ---------------------------------------

def env_int(name, default, minimum=0):
    v = os.environ.get(name, "")
    v = v if v != "" else str(default)
    if not re.fullmatch(r"[0-9]+", v) or int(v) < minimum:
        die(f"{name} must be a whole number >= {minimum}, not '{v}'")
    return int(v)


def env_float(name, default):
    v = os.environ.get(name, "") or str(default)
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", v):
        die(f"{name} must be a number, not '{v}'")
    return float(v)


def env_words(name, default):
    v = os.environ.get(name, "")
    return v.split() if v.strip() else list(default)


# ---- the run's name ------------------------------------------------------

def git(*args, cwd=TOP):
    try:
        r = subprocess.run(["git", "-C", cwd, *args], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def git_head(cwd=TOP):
    return git("rev-parse", "--short", "HEAD", cwd=cwd) or "unknown"


def git_dirty(cwd=TOP):
    out = git("status", "--porcelain", "--untracked-files=no", cwd=cwd)
    return len(out.splitlines()) if out else 0


def out_dir():
    """Where reports and the run directories go: bench/out/, or
    BENCH_OUTDIR (the harness's own test)."""
    return os.path.abspath(os.environ.get("BENCH_OUTDIR")
                           or os.path.join(TOP, "bench", "out"))


def out_name(path):
    """path for the report: relative to the tree when under it."""
    rel = os.path.relpath(path, TOP)
    return path if rel.startswith("..") else rel


def run_stamp():
    """A run is named by its UTC date and time and the commit measured
    (with +changes when tracked files differ from it)."""
    head = git_head()
    return (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + head
            + ("+changes" if git_dirty() else ""))


# ---- processes -----------------------------------------------------------

class Procs:
    """The processes this run started.  Only these are ever signalled,
    by pid: SIGTERM, a bounded wait (10 s), then SIGKILL."""

    def __init__(self):
        self.procs = {}         # pid -> Popen
        self.logs = []

    def start(self, argv, log, netns=None, env=None):
        if netns:
            argv = ["nsenter", f"--net=/run/netns/{netns}", "--", *argv]
        f = open(log, "ab")
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                 stderr=subprocess.STDOUT, env=env)
        finally:
            f.close()
        self.procs[p.pid] = p
        return p.pid

    def alive(self, pid):
        p = self.procs.get(pid)
        return p is not None and p.poll() is None

    def stop(self, pids):
        pids = [p for p in pids if p in self.procs]
        for pid in pids:
            if self.procs[pid].poll() is None:
                try:
                    self.procs[pid].send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for pid in pids:
            p = self.procs.pop(pid)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                say(f"pid {pid} ignored SIGTERM for 10 s: SIGKILL")
                p.kill()
                p.wait(timeout=10)

    def stop_all(self):
        self.stop(list(self.procs))


def free_port():
    """A TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(argv, timeout, **kw):
    """subprocess.run, bounded; a timeout is an exit status of 124."""
    try:
        return subprocess.run(argv, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", "timed out")


def bounded_poll(cond, secs, interval, alive=None):
    """Poll cond() every interval for at most secs; False if it never
    held or alive() said no."""
    deadline = time.monotonic() + secs
    while True:
        if cond():
            return True
        if alive is not None and not alive():
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def nbd_answers(uri, netns=None):
    argv = ["nbdinfo", "--size", uri]
    if netns:
        argv = ["nsenter", f"--net=/run/netns/{netns}", "--", *argv]
    return run(argv, 5, capture_output=True).returncode == 0


# ---- replctl -------------------------------------------------------------

def status_json(replctl, sock):
    """A node's status as a dict, or None (bounded)."""
    r = run([replctl, "-s", sock, "status", "--json"], 10,
            capture_output=True, text=True)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def peers_in_sync(st, strict=True):
    """Every peer Connected and UpToDate (strict: also Established and
    nothing out of sync)."""
    if not st or "peers" not in st:
        return False
    for p in st["peers"]:
        if p.get("connection") != "Connected" or p.get("disk") != "UpToDate":
            return False
        if strict and (p.get("replication") != "Established"
                       or p.get("out_of_sync_bytes") != 0):
            return False
    return True


def peers_brief(st):
    if not st:
        return "no status"
    return json.dumps([{k: p.get(k) for k in ("name", "connection", "disk",
                        "replication", "out_of_sync_bytes")}
                       for p in st.get("peers", [])], separators=(",", ":"))


# ---- CPU accounting ------------------------------------------------------

def proc_stat(pid):
    """The fields of /proc/PID/stat after the command name, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            line = f.read()
    except OSError:
        return None
    return line[line.rindex(")") + 2:].split()


def proc_ticks(pids, children=False):
    """{pid: utime + stime (+ waited-for children's)} for each pid that
    still exists."""
    out = {}
    for pid in pids:
        f = proc_stat(pid)
        if f is not None:
            # f[0] is field 3 (state): utime is field 14, stime 15.
            out[pid] = int(f[11]) + int(f[12])
            if children:
                out[pid] += int(f[13]) + int(f[14])
    return out


def ticks_delta(a, b):
    """Summed growth of the processes present in both samples."""
    return sum(b[p] - a[p] for p in b if p in a)


def machine_ticks():
    """(busy, steal, total) over all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = v
    return (user + nice + system + irq + softirq, steal,
            user + nice + system + idle + iowait + irq + softirq + steal)


def busy_pct(secs):
    """% of all CPUs busy (steal included) over the next secs."""
    a = machine_ticks()
    time.sleep(secs)
    b = machine_ticks()
    t = b[2] - a[2]
    return round(100 * ((b[0] - a[0]) + (b[1] - a[1])) / t) if t > 0 else 0


def descendants(pid):
    """pid's child processes, recursively (a scan of /proc)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            f = proc_stat(d)
            if f is not None:
                children.setdefault(int(f[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def pids_named(*names):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm") as f:
                    if f.read().strip() in names:
                        out.append(int(d))
            except OSError:
                pass
    return out


def foreign_procs(ours):
    """nbdkit/fio processes on this machine that are not ours."""
    return sum(1 for p in pids_named("nbdkit", "fio") if p not in ours)


def vmstat(key):
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k == key:
                return int(v)
    return 0


def loadavg(n=3):
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:n])


# ---- the machine ---------------------------------------------------------

def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def mem_gib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                return f"{int(line.split()[1]) / 1048576:.1f} GiB"
    return "?"


def kernel():
    u = os.uname()
    return f"{u.sysname} {u.release}"


def os_name():
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "unknown OS"


def version_of(argv):
    r = run(argv, 10, capture_output=True, text=True)
    out = (r.stdout or "") + (r.stderr or "")
    return out.splitlines()[0].strip() if out.strip() else "?"


# ---- numbers -------------------------------------------------------------

def median(values):
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


def fmt(v, d):
    return "n/a" if v is None else f"{v:.{d}f}"


def ratio(a, b):
    """a / b, or None."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def fratio(a, b):
    r = ratio(a, b)
    return "n/a" if r is None else f"{r:.2f}"


# ---- fio -----------------------------------------------------------------

def fio_job(path, name, engine, workload):
    """Write the job file of one fio point: bench/fio/ENGINE.fio and
    bench/fio/WORKLOAD.fio under [global], one job NAME."""
    with open(path, "w") as f:
        f.write(f"; nbdrepl benchmark: {engine} x {workload}\n[global]\n"
                f"include {FIO_DIR}/{engine}.fio\n"
                f"include {FIO_DIR}/{workload}.fio\n[{name}]\n")


def fio_argv(job, json_out, netns=None):
    argv = ["fio", "--output-format=json", f"--output={json_out}", job]
    if netns:
        argv = ["nsenter", f"--net=/run/netns/{netns}", "--", *argv]
    return argv


def fio_env(**kv):
    env = dict(os.environ)
    for k, v in kv.items():
        env["BENCH_" + k.upper()] = str(v)
    return env


def fio_env_words(**kv):
    return " ".join(f"BENCH_{k.upper()}={shlex.quote(str(v))}"
                    for k, v in kv.items())


def clat_us(side, pct):
    p = side.get("clat_ns", {}).get("percentile", {}) or {}
    return p.get(pct, 0) / 1000


# ---- results -------------------------------------------------------------

def read_json(path):
    """A JSON file's content, or None."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_points(outdir, cols, points):
    """Every point, as points.tsv (one line each) and points.json."""
    with open(os.path.join(outdir, "points.tsv"), "w") as f:
        f.write("\t".join(cols) + "\n")
        for p in points:
            f.write("\t".join(str(p[k]).replace("\t", " ").replace("\r", "")
                              for k in cols) + "\n")
    with open(os.path.join(outdir, "points.json"), "w") as f:
        json.dump(points, f, indent=1)
        f.write("\n")
