# nbdrepl: the 2-node mirror that bench/tls-counts.sh and
# bench/tls-callgrind.sh measure (sourced, after tests/functions.sh).
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.

# tls_pair_config MODE: $CONFIG for node0 and node1, protocol C, 256M,
# with `tls: true` and a secret if MODE is tls; both disks in sync.
tls_pair_config ()
{
    local node
    make_config 2 C 256M
    if [ "$1" = tls ]; then
        sed -i 's|^protocol: C|&\nsecret: "0123456789abcdef0123456789abcdef"\ntls: true|' "$CONFIG"
        chmod 600 "$CONFIG"
    fi
    for node in node0 node1; do
        "$REPLCTL" -c "$CONFIG" -n $node create-md --in-sync >/dev/null
    done
}
