#!/usr/bin/env bash
# A cluster of N hosts on one Linux machine: each host is a network namespace
# with one link (a veth named eth0 inside it) to a bridge in the root
# namespace, on a private /24 that exists only inside the namespaces. Open MPI
# reaches the hosts through an rsh agent (tests/cluster/agent) that enters the
# namespace and a UTS namespace carrying the host's name, and uses its TCP
# transport between them; an HTB tree that sends small packets first (as a
# fair-queued host would) shapes the links. Needs root and iproute2 only (no netem: no added delay, rate only).
#
#   cluster.sh [-p PREFIX] up N          hosts PREFIX0..PREFIX<N-1> (2..250), their TCP
#                                        congestion control $STRATBENCH_CLUSTER_CC
#                                        (default cubic; see host_cc below)
#   cluster.sh [-p PREFIX] down          remove everything (idempotent)
#   cluster.sh [-p PREFIX] exec HOST CMD...   run CMD in HOST (hostname = HOST)
#   cluster.sh [-p PREFIX] mpirun        print the launcher words for STRATBENCH_MPIRUN
#   cluster.sh [-p PREFIX] hostfile      print the path of the Open MPI hostfile
#   cluster.sh [-p PREFIX] shape RATE    limit every link to RATE each way (tc units:
#                                        100mbit, 1gbit): HTB at RATE less Ethernet's wire
#                                        overhead, packets < 256 bytes first, burst
#                                        max(1600 bytes, RATE x 32 us)
#   cluster.sh [-p PREFIX] unshape       remove the rate limits
#   cluster.sh [-p PREFIX] bytes         per host "HOST rx_bytes tx_bytes" (the host's view)
#   cluster.sh [-p PREFIX] packets       per host "HOST rx_packets tx_packets" (frames, ACKs too)
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

# The hosts' TCP congestion control (Open MPI's connections take the host's
# default): $STRATBENCH_CLUSTER_CC, default cubic, the default of the kernels
# Debian, Ubuntu and RHEL ship (CONFIG_DEFAULT_TCP_CONG), so an emulated host
# is a stock one whatever this machine's kernel defaults to (this machine's,
# 6.18.44-fc, defaults to bbr). Measured on 4 hosts at 100 Mbit/s (wide mlp,
# 2026-11-27): ddp's step 1000 ms under cubic against 1100 under bbr, zero
# stage 3's 1529-1535 against 1555-1660; docs/multinode.md, "Congestion
# control". A namespace may only take an algorithm the machine allows
# (net.ipv4.tcp_allowed_congestion_control): it is added to that list when
# missing (machine-wide and kept: it only lets unprivileged sockets choose it
# too). An algorithm that cannot be allowed (the kernel lacks it, or the
# machine's settings are not ours to change) ends `up` with exit 2.
host_cc() {
    local cc="${STRATBENCH_CLUSTER_CC:-cubic}" allowed
    [[ "$cc" =~ ^[a-z0-9_]{1,15}$ ]] ||
        die "STRATBENCH_CLUSTER_CC: expected a congestion control name like cubic or bbr, got '$cc'"
    allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
    case " $allowed " in
    *" $cc "*) ;;
    *) sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed $cc" 2>/dev/null ||
        die "STRATBENCH_CLUSTER_CC: cannot give the hosts TCP congestion control '$cc'" \
            "(the kernel lacks it or net.ipv4.tcp_allowed_congestion_control is read-only;" \
            "available: $(sysctl -n net.ipv4.tcp_available_congestion_control))" ;;
    esac
    echo "$cc"
}

cmd_up() {
    need_root
    local n="${1:-}"
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] ||
        die "up: expected a host count in 1..250, got '$n'"
    local cc
    cc=$(host_cc) || exit 2
    cmd_down
    trap 'cmd_down; echo "cluster.sh: up failed; removed what it had made" >&2' ERR
    local net i ns
    net=$(subnet)
    mkdir -p "$state"
    echo "$cc" >"$state/cc"
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
        ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$cc"
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
# spaces) or for a plain mpirun started inside the first host. Only what a
# real cluster needs or what simulating it on one machine needs; nothing that
# tunes stratbench (it chooses its own transport settings, e.g. two TCP
# connections per pair of ranks, and records them in the report's
# environment.mpi_transport):
#  - --hostfile: the hosts, rank r on host r mod N (as on a real cluster);
#  - plm_rsh_agent: how mpirun reaches the other hosts (ssh on a real cluster,
#    here the agent that enters their namespaces);
#  - btl_tcp_if_include / oob_tcp_if_include eth0: the interface the hosts
#    reach each other on (a real cluster names its fabric's likewise; here it
#    keeps Open MPI off lo and the machine's own interfaces);
#  - --bind-to none: simulation only. Every simulated host would bind its
#    first rank to core 0 of the same machine;
#  - mpi_yield_when_idle 1: simulation only. The hosts share this machine's
#    cores, so a rank waiting for a message must yield the core to the one it
#    waits for (one rank per host: stratbench cannot see it oversubscribes).
cmd_mpirun() {
    require_up
    echo "mpirun --hostfile $state/hostfile --mca plm_rsh_agent $here/agent" \
        "--mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0" \
        "--bind-to none --mca mpi_yield_when_idle 1"
}

# An HTB tree on both ends of every link: the root-side veth's egress limits
# what the host receives, the host's eth0 egress what it sends. Honest to a
# real Ethernet link of RATE (tests/cluster/test_shaping.py holds every
# transfer of 1 s or more to <= 1.02x RATE; docs/multinode.md has the figures):
#  - the link is class 1:1 at RATE x 1514/1538 (rate = ceil). The shaper
#    counts a frame from its Ethernet header (with TSO, every segment's
#    headers); a real link also spends 24 bytes per frame (preamble,
#    delimiter, FCS, inter-frame gap), 1.6% of a full 1514-byte frame, so
#    full frames pass at the real link's pace. (A size table, `stab overhead
#    24`, would add the 24 bytes once per TSO super-packet: measured
#    1.04-1.06x RATE with tbf);
#  - two leaves under it, as a stock host's fq_codel (Debian's
#    net.core.default_qdisc) treats a sparse flow: IPv4 packets under 256
#    bytes (u32 on the IP total length: TCP ACKs, Open MPI's rendezvous
#    handshake, 32-64 bytes of payload) in class 1:10 at priority 0, every
#    other packet in 1:20 at priority 1; 1:10 is assured RATE/10, 1:20 the
#    rest, both may borrow up to RATE, so a small packet goes ahead of the
#    host's queued bulk data instead of waiting behind it, and bulk data has
#    the whole link when nothing small is queued. This kernel has no fq_codel,
#    fq, sfq or prio; HTB and u32 are built in. (Unlike fq_codel, a small
#    packet of a connection that has bulk data queued also goes first: a few
#    reordered segments, an occasional spurious retransmission);
#  - burst = cburst = max(1600 bytes, RATE x 32 us): after an idle moment a
#    class sends what its bucket holds plus one packet (HTB charges after
#    sending), so a message after a short compute gap gets at most that
#    ahead of the line rate (tbf's burst of max(64 KiB, RATE x 1 ms) let a
#    139 kB exchange after 0.3 ms of compute at 1 Gbit/s take a median 0.89 ms
#    against the line rate's 1.18; this, 1.14-1.33 ms in 7 of 8 loaded runs).
#    1600 bytes at 1 Gbit/s cost bulk transfers 3% of the rate on the loaded
#    machine (0.965-0.971x; timer lateness past a bucket of 13 us is lost),
#    4000 bytes 0.5% (0.994-0.996x);
#    at 100 Mbit/s 1600 bytes keeps 0.998-1.001x (2026-11-28, loaded;
#    docs/multinode.md, "Fair-queued shaping");
#  - a 4 MiB queue (bfifo) per leaf, so that TCP, not drops, paces the sender;
#  - packets of at most 16 KiB (gso_max_size on both ends): with segment
#    offload the kernel hands the shaper super-packets of up to 64 KiB, and
#    HTB sends a packet while its bucket is not empty and charges it after,
#    so a 32 KiB message after 50 ms of quiet took 0.58-0.60x its frames'
#    time at 100 Mbit/s (a pipeline's first activation of a step arrived in
#    1.49 ms where the line takes 2.67); with 16 KiB packets 0.97x. One-frame
#    packets (1514) do it too but cost the 2-core machine half of 1 Gbit/s
#    both ways at once (0.47-0.57x); 16 KiB costs it 2-8 % (0.92-0.98x)
#    (2026-11-29, docs/multinode.md, "Packets of at most 16 KiB"). Unshape
#    restores the veth default, 65536.
# Before 2026-11-28 the shaper was one tbf (one FIFO per host egress, burst
# max(64 KiB, RATE x 1 ms)): a host's ACKs and rendezvous handshake waited
# behind its queued data (a 139 kB tp exchange at 100 Mbit/s took the line
# rate or twice it), and the burst let short messages beat the line.
cmd_shape() {
    need_root
    require_up
    local rate="${1:?shape: which rate? e.g. 1gbit, 100mbit}"
    [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$ ]] ||
        die "shape: rate '$rate': expected e.g. 100mbit or 1gbit"
    local link_bps small_bps burst
    read -r link_bps small_bps burst < <(echo "$rate" | awk '{
        n = $0 + 0; u = substr($0, length(n "") + 1)
        m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : 1
        r = n * m * 1514 / 1538; b = n * m / 8 * 32e-6; if (b < 1600) b = 1600
        printf "%d %d %d\n", r, r / 10, b }')
    local h i
    for h in $(hosts); do
        i=$(host_index "$h")
        shape_dev "$link_bps" "$small_bps" "$burst" dev "${prefix}v$i"
        shape_dev "$link_bps" "$small_bps" "$burst" -n "$h" dev eth0
        ip link set dev "${prefix}v$i" gso_max_size 16384
        ip -n "$h" link set dev eth0 gso_max_size 16384
    done
    echo "$rate" >"$state/rate"
}

# shape_dev LINK_BPS SMALL_BPS BURST_BYTES [-n NS] dev DEV: the HTB tree above
# on DEV's egress (in namespace NS when given), replacing what was there.
shape_dev() {
    local link="$1bit" small="$2bit" bulk="$(($1 - $2))bit" burst="$3"
    shift 3
    local tc=(tc) where=()
    if [ "$1" = "-n" ]; then
        tc=(tc -n "$2")
        shift 2
    fi
    where=("$@")
    local cls=(htb burst "$burst" cburst "$burst" quantum 65536)
    "${tc[@]}" qdisc del "${where[@]}" root 2>/dev/null || true
    "${tc[@]}" qdisc add "${where[@]}" root handle 1: htb default 20
    "${tc[@]}" class add "${where[@]}" parent 1: classid 1:1 "${cls[@]}" rate "$link" ceil "$link"
    "${tc[@]}" class add "${where[@]}" parent 1:1 classid 1:10 "${cls[@]}" rate "$small" ceil "$link" prio 0
    "${tc[@]}" class add "${where[@]}" parent 1:1 classid 1:20 "${cls[@]}" rate "$bulk" ceil "$link" prio 1
    "${tc[@]}" qdisc add "${where[@]}" parent 1:10 handle 10: bfifo limit 4mb
    "${tc[@]}" qdisc add "${where[@]}" parent 1:20 handle 20: bfifo limit 4mb
    # IPv4 total length (bytes 2-3 of the header) under 256: its high byte 0
    "${tc[@]}" filter add "${where[@]}" parent 1: protocol ip prio 1 u32 \
        match u16 0x0000 0xff00 at 2 flowid 1:10
}

cmd_unshape() {
    need_root
    require_up
    local h i
    for h in $(hosts); do
        i=$(host_index "$h")
        tc qdisc del dev "${prefix}v$i" root 2>/dev/null || true
        tc -n "$h" qdisc del dev eth0 root 2>/dev/null || true
        ip link set dev "${prefix}v$i" gso_max_size 65536 2>/dev/null || true
        ip -n "$h" link set dev eth0 gso_max_size 65536 2>/dev/null || true
    done
    rm -f "$state/rate"
}

# The host's own view: rx = bytes into the host, tx = bytes out of it (read
# from the root-side veth, whose rx is the host's tx). Counters include every
# header (Ethernet, IP, TCP) and every packet (ACKs, Open MPI's wire-up).
# Per host "HOST rx_<what> tx_<what>" of its link, as the host sees it (the
# root-side veth's tx is the host's rx); <what>: bytes or packets.
link_stats() {
    require_up
    local h i d
    for h in $(hosts); do
        i=$(host_index "$h")
        d="/sys/class/net/${prefix}v$i/statistics"
        echo "$h $(cat "$d/tx_$1") $(cat "$d/rx_$1")"
    done
}

cmd_status() {
    require_up
    local h
    echo "cluster $prefix, subnet $(subnet).0/24, rate $(cat "$state/rate" 2>/dev/null || echo unshaped)," \
        "TCP congestion control $(cat "$state/cc" 2>/dev/null || echo unknown)"
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
bytes) link_stats bytes ;;
packets) link_stats packets ;;
status) cmd_status ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
