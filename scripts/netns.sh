# nbdrepl: a small network of namespaces for the demos and benchmarks.
# Sourced, not run.  Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause.
#
#   netns_setup PREFIX NET HOST...
# makes a bridge in namespace PREFIX-sw and, for each HOST, a namespace
# PREFIX-HOST with eth0 = NET.1, NET.2, ... on that bridge; sets
# use_netns=yes and addr[HOST].  Without root or namespaces: use_netns=no
# and every addr[HOST]=127.0.0.1.  The caller deletes the namespaces
# (ip netns del PREFIX-HOST, PREFIX-sw) when it is done.

declare -gA addr
use_netns=no

_netns_try ()
{
    local prefix=$1 net=$2 i=1 h; shift 2
    ip netns add "$prefix-sw" || return 1
    ip -n "$prefix-sw" link add br0 type bridge || return 1
    ip -n "$prefix-sw" link set br0 up || return 1
    for h in "$@"; do
        ip netns add "$prefix-$h" || return 1
        ip link add "v$i-$$" netns "$prefix-$h" type veth peer name "p-$h" netns "$prefix-sw" || return 1
        ip -n "$prefix-sw" link set "p-$h" master br0 up || return 1
        ip -n "$prefix-$h" link set "v$i-$$" name eth0 || return 1
        ip -n "$prefix-$h" addr add "$net.$i/24" dev eth0 || return 1
        ip -n "$prefix-$h" link set eth0 up || return 1
        ip -n "$prefix-$h" link set lo up || return 1
        addr[$h]=$net.$i
        i=$((i + 1))
    done
}

netns_setup ()
{
    local prefix=$1 net=$2 h; shift 2
    if [ "$(id -u)" -eq 0 ] && _netns_try "$prefix" "$net" "$@" 2>/dev/null; then
        use_netns=yes
    else
        for h in "$@" sw; do ip netns del "$prefix-$h" 2>/dev/null || true; done
        use_netns=no
        for h in "$@"; do addr[$h]=127.0.0.1; done
    fi
}
