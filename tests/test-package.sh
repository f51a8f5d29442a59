#!/usr/bin/env bash
# The Debian package: built with dpkg-buildpackage -us -uc -b in a copy
# of the tree by scripts/build-deb (nothing lands in the tree or beside it),
# its files where nbdkit, systemd, man and bash-completion look (no .la
# in nbdkit's plugin directory), then installed on this machine with
# apt-get (as root, when nbdrepl is not installed already) and removed
# again at the end: systemd-analyze verify accepts the unit
# (systemctl cat too, where systemd runs), man renders nbdrepl.yaml(5),
# the completion knows replctl's commands, and the unit's own command
# line runs the node of /etc/nbdrepl/RESOURCE.yaml that is named as
# this machine, which replctl -c finds without -n.
source "$(dirname "$0")/functions.sh"
requires dpkg-buildpackage --version
requires test -x /usr/bin/dh
requires systemd-analyze --version
requires man --version
requires jq --version
if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
    echo "$test_name: the package is built without sanitizers: skipped under them (scripts/check runs it in the plain build)"
    exit 77
fi

srcdir=$(cd "$(dirname "$0")/.." && pwd)
start=$SECONDS
if ! git -C "$srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "$test_name: scripts/build-deb packages git's files: skipped outside a git checkout ($srcdir)"
    exit 77
fi

# One package test at a time on a machine: they install the same package.
exec 9>/tmp/nbdrepl-test-package.lock
flock -w 600 9 || fail "another package test holds /tmp/nbdrepl-test-package.lock"

# ---- build, in a copy of the tree (scripts/build-deb) -------------------
DEB_BUILD_OPTIONS=nocheck timed 600 "$srcdir/scripts/build-deb" "$tmpdir/out" \
    >"$tmpdir/build.log" 2>&1 ||
    fail "scripts/build-deb failed: $(tail -n 20 "$tmpdir/build.log")"
deb=$(ls "$tmpdir"/out/nbdrepl_*_*.deb)
info "built $(basename "$deb") in $((SECONDS - start)) s"

# ---- what is in it -----------------------------------------------------
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|' >"$tmpdir/files"
plugindir=$(pkg-config --variable=plugindir nbdkit)
for f in "$plugindir/nbdkit-repl-plugin.so" /usr/sbin/replctl \
         /usr/sbin/repl-attach /lib/systemd/system/nbdrepl@.service \
         /usr/lib/tmpfiles.d/nbdrepl.conf \
         /usr/share/bash-completion/completions/replctl \
         /usr/share/man/man5/nbdrepl.yaml.5.gz \
         /usr/share/man/man1/nbdkit-repl-plugin.1.gz \
         /usr/share/man/man8/replctl.8.gz \
         /usr/lib/ocf/resource.d/nbdrepl/repl \
         /usr/lib/ocf/resource.d/nbdrepl/attach \
         /usr/share/doc/nbdrepl/examples/r0.yaml /etc/nbdrepl/; do
    grep -qxF "$f" "$tmpdir/files" || fail "the package has no $f"
done
grep -q '\.la$' "$tmpdir/files" && fail "the package has a .la: $(grep '\.la$' "$tmpdir/files")"
info "files in place, no .la ($(grep -cv '/$' "$tmpdir/files") files)"

# ---- install it --------------------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
    info "not root: the package is built and checked, not installed"
    exit 0
fi
if dpkg-query -W -f='${Status}' nbdrepl 2>/dev/null | grep -q 'ok installed'; then
    info "nbdrepl is installed on this machine already: not replaced by the test's package"
    exit 0
fi
# What postinst makes (systemd-tmpfiles: /run/nbdrepl) goes again too.
[ -d /run/nbdrepl ] || cleanup_fn "rmdir /run/nbdrepl 2>/dev/null"
cleanup_fn "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q -o DPkg::Lock::Timeout=120 nbdrepl >>'$tmpdir/apt.log' 2>&1; dpkg-query -W nbdrepl >/dev/null 2>&1 && dpkg-query -W -f='\${Status}' nbdrepl | grep -q installed && echo '$test_name: nbdrepl still installed' >&2"
DEBIAN_FRONTEND=noninteractive timed 300 apt-get install -y -q \
    -o DPkg::Lock::Timeout=120 "$deb" >"$tmpdir/apt.log" 2>&1 ||
    fail "apt-get install failed: $(tail -n 10 "$tmpdir/apt.log")"
dpkg-query -W -f='${Status}\n' nbdrepl | grep -q 'install ok installed' ||
    fail "nbdrepl is not installed after apt-get install"
info "installed with apt-get install $(basename "$deb")"

# The unit.
unit=/lib/systemd/system/nbdrepl@.service
systemd-analyze verify nbdrepl@r0.service >"$tmpdir/verify.out" 2>&1 ||
    fail "systemd-analyze verify nbdrepl@r0.service: $(cat "$tmpdir/verify.out")"
[ -s "$tmpdir/verify.out" ] && fail "systemd-analyze verify complains: $(cat "$tmpdir/verify.out")"
info "systemd-analyze verify nbdrepl@r0.service: no complaint"
if [ -d /run/systemd/system ]; then
    systemctl cat nbdrepl@r0.service >"$tmpdir/cat.out" ||
        fail "systemctl cat nbdrepl@r0.service failed"
    grep -q "config=/etc/nbdrepl/%i.yaml" "$tmpdir/cat.out" ||
        fail "systemctl cat: no config=/etc/nbdrepl/%i.yaml: $(cat "$tmpdir/cat.out")"
    info "systemctl cat nbdrepl@r0.service: the unit"
else
    info "systemd is not PID 1 here: systemctl cat cannot run (systemd-analyze verify did)"
fi

# The man pages, by name and by file.
MANPAGER=cat MANWIDTH=80 man nbdrepl.yaml >"$tmpdir/man.out" 2>"$tmpdir/man.err" ||
    fail "man nbdrepl.yaml: $(cat "$tmpdir/man.err")"
grep -q "nbdrepl.yaml - configuration file of an nbdrepl resource" "$tmpdir/man.out" ||
    fail "man nbdrepl.yaml: no NAME line: $(head -n 5 "$tmpdir/man.out")"
grep -q "ping-interval: SECONDS" "$tmpdir/man.out" ||
    fail "man nbdrepl.yaml: the keys are missing"
MANPAGER=cat man -l /usr/share/man/man5/nbdrepl.yaml.5.gz | grep -q "Which node this machine is" ||
    fail "man -l nbdrepl.yaml.5.gz does not render"
man -w replctl >/dev/null && man -w nbdkit-repl-plugin >/dev/null ||
    fail "man cannot find replctl(8) or nbdkit-repl-plugin(1)"
info "man nbdrepl.yaml: $(wc -l <"$tmpdir/man.out") lines"

# Bash completion: the commands and options from replctl --help.
comp=$(bash -c 'source /usr/share/bash-completion/bash_completion 2>/dev/null;
                source /usr/share/bash-completion/completions/replctl;
                complete -p replctl; echo "commands: $(_replctl_commands replctl | tr "\n" " ")";
                echo "create-md: $(_replctl_command_options replctl create-md | tr "\n" " ")"')
grep -q "complete -F _replctl replctl" <<<"$comp" || fail "completion not registered: $comp"
grep -q "commands: status .*create-md .*primary .*secondary" <<<"$comp" ||
    fail "completion: commands missing: $comp"
grep -q "create-md: --force --in-sync" <<<"$comp" || fail "completion: create-md options: $comp"
info "bash completion: $(grep '^commands' <<<"$comp")"

# ---- the unit's command line, on /etc/nbdrepl/RESOURCE.yaml -------------
host=$(uname -n)
res="pkgtest$$"
conf="/etc/nbdrepl/$res.yaml"
cleanup_fn "rm -f '$conf'"
truncate -s 16M "$tmpdir/local.img"
cat >"$conf" <<YAML
resource: $res
nodes:
  - name: $host
    id: 0
    address: 127.0.0.1:$(free_port)
    disk: $tmpdir/local.img
    control: $tmpdir/local.sock
  - name: peer
    id: 1
    address: 127.0.0.1:$(free_port)
    disk: $tmpdir/peer.img
YAML
port=$(free_port)
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
# As systemd runs it: %i is the instance, $VAR unquoted splits (empty: nothing).
exec_start=${exec_start//%i/$res}
exec_start=${exec_start//\$NBDKIT_OPTIONS/--exit-with-parent -p $port}
exec_start=${exec_start//\$PLUGIN_OPTIONS/}
info "ExecStart: $exec_start"
# shellcheck disable=SC2086 # split as systemd splits it
$exec_start >"$tmpdir/unit.log" 2>&1 &
upid=$!
cleanup_fn "kill $upid 2>/dev/null; wait $upid 2>/dev/null"
for (( i = 0; i < 100; i++ )); do
    /usr/sbin/replctl -c "$conf" status --json >"$tmpdir/st.json" 2>/dev/null && break
    kill -0 "$upid" 2>/dev/null || fail "the unit's nbdkit exited: $(tail -n 5 "$tmpdir/unit.log")"
    sleep 0.1
done
jq -e --arg h "$host" '.node == $h' "$tmpdir/st.json" >/dev/null ||
    fail "replctl -c (no -n) did not reach node $host: $(cat "$tmpdir/st.json")"
info "the unit's nbdkit runs node $host (the host name), replctl -c finds it without -n"
kill "$upid"
wait "$upid" || true
grep -q "stopping: received SIGTERM" "$tmpdir/unit.log" ||
    fail "no stop reason in the unit's log: $(tail -n 3 "$tmpdir/unit.log")"
info "done in $((SECONDS - start)) s"
