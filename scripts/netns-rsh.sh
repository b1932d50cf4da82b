#!/usr/bin/env bash
# An rsh agent for Open MPI (mpirun --mca plm_rsh_agent scripts/netns-rsh.sh)
# whose hosts are network namespaces on this machine: "logging in" to HOST
# runs COMMAND in HOST's namespace, under HOST as hostname, with the host's
# own scratch directory bind-mounted in a mount namespace of its own, so
# that every host has a private disk at the same path. The multi-host test
# (cmd/gnn-spmd/hosts_test.go) makes the namespaces and the link between
# them; this script only enters them. Needs root.
#
#   NETNS_RSH_HOSTS=FILE scripts/netns-rsh.sh [ssh options] HOST COMMAND...
#
# FILE has a line per host: HOST NETNS SOURCE SCRATCH [HIDE]. SOURCE is
# mounted on SCRATCH (the path every host shares); HIDE, a directory that
# holds every host's SOURCE, is covered by an empty tmpfs, so that no host
# sees another's files. COMMAND is run by sh -c, as ssh runs it.
# NETNS_RSH_MNT is the mount namespace the hosts are made from (default
# /proc/1/ns/mnt): the agent runs on a host, where HIDE is covered.
set -euo pipefail
conf=${NETNS_RSH_HOSTS:?netns-rsh: set NETNS_RSH_HOSTS to the hosts file}
# Options mpirun passes as it would to ssh (none by default).
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
[ $# -ge 2 ] || { echo "usage: netns-rsh.sh [options] HOST COMMAND..." >&2; exit 255; }
host=$1
shift
line=$(awk -v h="$host" '$1 == h' "$conf")
[ -n "$line" ] || { echo "netns-rsh: host $host is not in $conf" >&2; exit 255; }
read -r _ ns src scratch hide <<<"$line"
# shellcheck disable=SC2016 # the inner script's variables are its own
exec nsenter --mount="${NETNS_RSH_MNT:-/proc/1/ns/mnt}" ip netns exec "$ns" \
  unshare --mount --uts --propagation private sh -c '
    mount --bind "$1" "$2" || exit 255
    if [ -n "$3" ]; then mount -t tmpfs -o size=1m,mode=0755 netns-rsh-hidden "$3" || exit 255; fi
    hostname "$4" || exit 255
    shift 4
    exec sh -c "$*"' netns-rsh "$src" "$scratch" "${hide:-}" "$host" "$@"
