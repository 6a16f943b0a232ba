#!/usr/bin/env bash
# A cluster of N hosts on one Linux machine: each host is a network namespace
# with one link (a veth named eth0 inside it) to a bridge in the root
# namespace, on a private /24 that exists only inside the namespaces. Open MPI
# reaches the hosts through an rsh agent (tests/cluster/agent) that enters the
# namespace and a UTS namespace carrying the host's name, and uses its TCP
# transport between them; the kernel's token-bucket filter (tbf) shapes the
# links. Needs root and iproute2 only (no netem: no added delay, rate only).
#
#   cluster.sh [-p PREFIX] up N          hosts PREFIX0..PREFIX<N-1> (2..250)
#   cluster.sh [-p PREFIX] down          remove everything (idempotent)
#   cluster.sh [-p PREFIX] exec HOST CMD...   run CMD in HOST (hostname = HOST)
#   cluster.sh [-p PREFIX] mpirun        print the launcher words for STRATBENCH_MPIRUN
#   cluster.sh [-p PREFIX] hostfile      print the path of the Open MPI hostfile
#   cluster.sh [-p PREFIX] shape RATE    limit every link to RATE each way (tc units:
#                                        100mbit, 1gbit), tbf, burst max(64 KiB, RATE x 4 ms)
#   cluster.sh [-p PREFIX] unshape       remove the rate limits
#   cluster.sh [-p PREFIX] bytes         per host "HOST rx_bytes tx_bytes" (the host's view)
#   cluster.sh [-p PREFIX] status        hosts, addresses, qdiscs
#
# PREFIX ([a-z][a-z0-9]{0,7}, default $STRATBENCH_CLUSTER_PREFIX or "sbn") names
# every resource: namespaces PREFIX0.., bridge PREFIXbr, root-side veths
# PREFIXv0.., /etc/netns/PREFIX<i>/, state in /run/stratbench-cluster/PREFIX/;
# the subnet 10.X.Y.0/24 is derived from it. Two users with different
# prefixes get two clusters that never see each other.
#
# Example (2 hosts, ddp across them at 1 Gbit/s):
#   tests/cluster/cluster.sh up 2 && tests/cluster/cluster.sh shape 1gbit
#   tests/cluster/cluster.sh exec sbn0 env STRATBENCH_MPIRUN="$(tests/cluster/cluster.sh mpirun)" \
#       build/stratbench train --strategy ddp --replicas 2 --max-steps 50
#   tests/cluster/cluster.sh down
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix="${STRATBENCH_CLUSTER_PREFIX:-sbn}"
if [ "${1:-}" = "-p" ]; then
    prefix="${2:?-p needs a prefix}"
    shift 2
fi

die() {
    echo "cluster.sh: $*" >&2
    exit 2
}

[[ "$prefix" =~ ^[a-z][a-z0-9]{0,7}$ ]] ||
    die "prefix '$prefix': expected a lower-case letter then up to 7 letters or digits"
state="/run/stratbench-cluster/$prefix"
bridge="${prefix}br"

need_root() {
    [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veths, tc)"
    command -v ip >/dev/null && command -v tc >/dev/null ||
        die "needs iproute2 (apt-get install iproute2)"
}

# The /24 of this prefix: 10.A.B.0/24 with A.B from the prefix's CRC (cksum),
# so clusters of different prefixes also differ in addresses (they are on
# separate bridges anyway, so equal subnets would not collide either).
subnet() {
    local h
    h=$(printf '%s' "$prefix" | cksum | cut -d' ' -f1)
    echo "10.$(((h >> 8) % 254 + 1)).$((h % 256))"
}

require_up() {
    [ -f "$state/hosts" ] || die "no cluster '$prefix' is up (run: cluster.sh -p $prefix up N)"
}

# Hosts of the running cluster, in order (from the state written by `up`).
hosts() {
    cat "$state/hosts"
}

host_index() {
    local h="$1"
    [[ "$h" =~ ^${prefix}([0-9]+)$ ]] || die "host '$h' is not in cluster '$prefix'"
    grep -qx "$h" "$state/hosts" 2>/dev/null || die "host '$h' is not in cluster '$prefix'"
    echo "${BASH_REMATCH[1]}"
}

cmd_down() {
    need_root
    local ns
    # Namespaces of this prefix, whether or not `up` finished.
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}[0-9]+$" || true); do
        # End the processes still running in the host (a failed run's ranks).
        local pids
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        if [ -n "$pids" ]; then
            kill -TERM $pids 2>/dev/null || true
            sleep 0.2
            pids=$(ip netns pids "$ns" 2>/dev/null || true)
            [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
        fi
        ip netns delete "$ns" 2>/dev/null || true
    done
    # Deleting a namespace deletes its eth0 and so the veth pair; remove any
    # root-side veth left by a half-finished `up`.
    local dev
    for dev in $(ls /sys/class/net 2>/dev/null | grep -E "^${prefix}v[0-9]+$" || true); do
        ip link delete "$dev" 2>/dev/null || true
    done
    ip link delete "$bridge" 2>/dev/null || true
    rm -rf /etc/netns/"${prefix}"[0-9]* "$state"
    rmdir "$(dirname "$state")" 2>/dev/null || true # when no other cluster is up
}

cmd_up() {
    need_root
    local n="${1:-}"
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] ||
        die "up: expected a host count in 1..250, got '$n'"
    cmd_down
    trap 'cmd_down; echo "cluster.sh: up failed; removed what it had made" >&2' ERR
    local net i ns
    net=$(subnet)
    mkdir -p "$state"
    : >"$state/hosts.tmp"
    ip link add "$bridge" type bridge
    ip link set "$bridge" up
    # /etc/hosts of every host: its peers' names (ip netns exec mounts
    # /etc/netns/<ns>/hosts over /etc/hosts; the machine's own is untouched).
    local etc_hosts="127.0.0.1 localhost"$'\n'
    for ((i = 0; i < n; i++)); do
        etc_hosts+="$net.$((i + 1)) ${prefix}$i"$'\n'
    done
    for ((i = 0; i < n; i++)); do
        ns="${prefix}$i"
        ip netns add "$ns"
        ip link add "${prefix}v$i" type veth peer name eth0 netns "$ns"
        ip link set "${prefix}v$i" master "$bridge" up
        ip -n "$ns" addr add "$net.$((i + 1))/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        mkdir -p "/etc/netns/$ns"
        printf '%s' "$etc_hosts" >"/etc/netns/$ns/hosts"
        echo "$ns" >>"$state/hosts.tmp"
    done
    # One slot per host: ranks go round-robin over the hosts, rank r on host
    # r mod N (mpirun --oversubscribe places the ones past N).
    sed 's/$/ slots=1/' "$state/hosts.tmp" >"$state/hostfile"
    mv "$state/hosts.tmp" "$state/hosts"
    trap - ERR
}

# Runs "$@" inside host $1 with its own UTS namespace whose hostname is $1, so
# gethostname() and MPI_Get_processor_name() name the simulated host.
cmd_exec() {
    need_root
    local host="${1:?exec: which host?}"
    shift
    [ $# -gt 0 ] || die "exec: no command given"
    require_up
    host_index "$host" >/dev/null
    exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

# The launcher for stratbench's self-launch (STRATBENCH_MPIRUN, split on
# spaces) or for a plain mpirun started inside the first host.
#  - the hostfile maps rank r to host r mod N;
#  - the rsh agent enters the other hosts' namespaces;
#  - --bind-to none: every simulated host would bind its first rank to core 0;
#  - mpi_yield_when_idle: ranks outnumber the cores of this machine, so a rank
#    waiting for a message must yield the core to the one it waits for;
#  - TCP between hosts over eth0 only (every host has one rank: no shared memory);
#  - btl_tcp_links 2: two sockets per pair of ranks. With Open MPI 4.1's one
#    socket, a pair sending to each other at once (a ring's or recursive
#    doubling's exchange) got half the link each way after the first few MB
#    (15 MB each way at 100 Mbit/s: 1.29 s, then 2.5 s; two sockets: 1.26-1.29 s
#    every time), so ddp's ring at n = 2 ran at 2M/B instead of M/B.
cmd_mpirun() {
    require_up
    echo "mpirun --hostfile $state/hostfile --mca plm_rsh_agent $here/agent" \
        "--bind-to none --mca mpi_yield_when_idle 1" \
        "--mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --mca btl_tcp_links 2"
}

# tbf on both ends of every link: the root-side veth's egress limits what the
# host receives, the host's eth0 egress what it sends. The burst is 64 KiB at
# least (a TSO segment must fit) and RATE x 4 ms (the bytes of one timer tick
# at HZ=250, as tc-tbf(8) advises): with 64 KiB at 1 Gbit/s (0.5 ms of tokens)
# two ranks sending to each other at once got 430-610 Mbit/s each way, with
# 500 KiB 900-970 (7.5 and 30 MB each way). A 4 MiB queue so that TCP, not
# drops, paces the sender.
cmd_shape() {
    need_root
    require_up
    local rate="${1:?shape: which rate? e.g. 1gbit, 100mbit}"
    [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$ ]] ||
        die "shape: rate '$rate': expected e.g. 100mbit or 1gbit"
    local burst
    burst=$(echo "$rate" | awk '{
        n = $0 + 0; u = substr($0, length(n "") + 1)
        m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : 1
        b = n * m / 8 * 0.004; if (b < 65536) b = 65536; printf "%d", b }')
    local h i
    for h in $(hosts); do
        i=$(host_index "$h")
        tc qdisc replace dev "${prefix}v$i" root tbf rate "$rate" burst "$burst" limit 4mb
        tc -n "$h" qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" limit 4mb
    done
    echo "$rate" >"$state/rate"
}

cmd_unshape() {
    need_root
    require_up
    local h i
    for h in $(hosts); do
        i=$(host_index "$h")
        tc qdisc del dev "${prefix}v$i" root 2>/dev/null || true
        tc -n "$h" qdisc del dev eth0 root 2>/dev/null || true
    done
    rm -f "$state/rate"
}

# The host's own view: rx = bytes into the host, tx = bytes out of it (read
# from the root-side veth, whose rx is the host's tx). Counters include every
# header (Ethernet, IP, TCP) and every packet (ACKs, Open MPI's wire-up).
cmd_bytes() {
    require_up
    local h i d
    for h in $(hosts); do
        i=$(host_index "$h")
        d="/sys/class/net/${prefix}v$i/statistics"
        echo "$h $(cat "$d/tx_bytes") $(cat "$d/rx_bytes")"
    done
}

cmd_status() {
    require_up
    local h
    echo "cluster $prefix, subnet $(subnet).0/24, rate $(cat "$state/rate" 2>/dev/null || echo unshaped)"
    for h in $(hosts); do
        echo "$h $(ip -n "$h" -brief addr show dev eth0 | awk '{print $3}')" \
            "$(tc -n "$h" qdisc show dev eth0 | head -1)"
    done
}

case "${1:-}" in
up) cmd_up "${2:-}" ;;
down) cmd_down ;;
exec) shift; cmd_exec "$@" ;;
mpirun) cmd_mpirun ;;
hostfile) require_up; echo "$state/hostfile" ;;
shape) cmd_shape "${2:-}" ;;
unshape) cmd_unshape ;;
bytes) cmd_bytes ;;
status) cmd_status ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
