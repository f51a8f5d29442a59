#!/usr/bin/env bash
# Handlers run with a fixed environment: PATH and the documented
# NBDREPL_* variables, nothing of nbdkit's own (here a variable set for
# the node, and HOME).  A plain command is executed directly with its
# words as argv; a command with shell syntax runs under /bin/sh -c with
# the same environment.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
out="$tmpdir/out"
mkdir "$out"
# The script records the environment it was executed with (as execve
# gave it, /proc/self/environ, not what a shell would add) and its argv.
cat > "$tmpdir/dump-env" <<'EOF'
#!/bin/sh
tr '\0' '\n' < /proc/$$/environ | sort > "$1/env.$NBDREPL_EVENT.tmp"
printf '%s\n' "$@" > "$1/argv.$NBDREPL_EVENT"
mv "$1/env.$NBDREPL_EVENT.tmp" "$1/env.$NBDREPL_EVENT"
EOF
chmod 755 "$tmpdir/dump-env"
cat >>"$CONFIG" <<EOT
handlers:
  role-change: $tmpdir/dump-env $out second-word
  fence-peer: 'tr "\\0" "\\n" < /proc/\$\$/environ | sort > $out/shell.tmp; mv $out/shell.tmp $out/env.shell'
EOT
# wait_file FILE: bounded wait until it exists.
wait_file () {
    for (( i=0; i<100; i++ )); do
        [ -f "$1" ] && return 0
        sleep 0.1
    done
    fail "no $1 within 10 s: $(ls "$out")"
}

export NBDREPL_TEST_PRIVATE=must-not-leak
start_node node0 role=primary
start_node node1
wait_uptodate node0 30

# fence-peer (shell syntax): node0, Primary, loses node1.
kill_node node1
wait_file "$out/env.shell"
want_peer="NBDREPL_EVENT=fence-peer
NBDREPL_NODE=node0
NBDREPL_PEER=node1
NBDREPL_PEER_ADDRESS=$(status_json node0 | jq -r '.peers[0].address')
NBDREPL_RESOURCE=r0
NBDREPL_ROLE=Primary
PATH=/usr/sbin:/usr/bin:/sbin:/bin"
# sh adds its own PWD (it is the process whose environ is read).
got=$(grep -v '^PWD=' "$out/env.shell")
[ "$got" = "$want_peer" ] ||
    fail "a shell handler's environment is not the documented one:
$(diff <(echo "$want_peer") <(echo "$got"))"
info "shell handler: exactly the documented environment"

# role-change (plain words): executed directly.
"$REPLCTL" -s "$(sock node0)" secondary >/dev/null || fail "demote failed"
wait_file "$out/env.role-change"
want="NBDREPL_EVENT=role-change
NBDREPL_NODE=node0
NBDREPL_RESOURCE=r0
NBDREPL_ROLE=Secondary
PATH=/usr/sbin:/usr/bin:/sbin:/bin"
got=$(cat "$out/env.role-change")
[ "$got" = "$want" ] ||
    fail "a plain handler's environment is not the documented one:
$(diff <(echo "$want") <(echo "$got"))"
[ "$(cat "$out/argv.role-change")" = "$out
second-word" ] || fail "the plain handler's argv: $(cat "$out/argv.role-change")"
grep -q "handler role-change (pid [0-9]*): exited with status 0" "$tmpdir/node0.log" ||
    wait_log node0 "handler role-change (pid [0-9]*): exited with status 0"

# A plain command whose program does not exist: one clear line.
stop_node node0
sed -i "s|role-change: .*|role-change: no-such-handler-program arg|" "$CONFIG"
start_node node0 role=primary
"$REPLCTL" -s "$(sock node0)" secondary >/dev/null || fail "demote failed"
wait_log node0 "handler role-change: cannot run 'no-such-handler-program arg': no-such-handler-program: not found in /usr/sbin:/usr/bin:/sbin:/bin"
info "ok: plain handler executed directly with exactly the documented environment"
