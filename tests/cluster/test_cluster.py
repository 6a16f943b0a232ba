"""The one-machine cluster itself (tests/cluster/cluster.sh, the `cluster` fixture):
hosts, names, links, shaping, counters and a teardown that leaves nothing behind.
Needs root; skipped otherwise (the fixture says why)."""

import os
import pathlib
import subprocess
import time

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parent / "cluster.sh"


def leftovers(prefix):
    """Everything of cluster `prefix` still on the machine: namespaces, links,
    /etc/netns entries, state (an empty list when it is gone)."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found = [n.split()[0] for n in names.splitlines() if n.startswith(prefix)]
    found += [d for d in os.listdir("/sys/class/net") if d.startswith(prefix)]
    netns = pathlib.Path("/etc/netns")
    if netns.is_dir():
        found += [str(p) for p in netns.iterdir() if p.name.startswith(prefix)]
    state = pathlib.Path("/run/stratbench-cluster") / prefix
    if state.exists():
        found.append(str(state))
    return found


def test_hosts_names_and_links(cluster):
    c = cluster(3)
    assert c.hosts == [f"{c.prefix}{i}" for i in range(3)]
    for host in c.hosts:
        # Own hostname (UTS namespace), one link named eth0, peers resolved by name.
        proc = c.run(host, "sh", "-c", "hostname; ls /sys/class/net; getent hosts "
                     + " ".join(c.hosts))
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.split("\n")
        assert lines[0] == host
        assert sorted(lines[1:3]) == ["eth0", "lo"]
        addrs = [ln.split()[0] for ln in lines[3:] if ln]
        assert len(set(addrs)) == 3 and all(a.startswith("10.") for a in addrs)
    # A host outside the cluster is refused.
    proc = subprocess.run([str(SCRIPT), "-p", c.prefix, "exec", c.prefix + "7", "true"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "not in cluster" in proc.stderr
    # The machine's own hostname and /etc/hosts are untouched.
    assert c.hosts[0] not in pathlib.Path("/etc/hosts").read_text()
    assert os.uname().nodename not in c.hosts


def test_traffic_crosses_the_link_and_is_counted(cluster):
    c = cluster(2)
    before = c.bytes()
    payload = 3_000_000
    # A TCP stream from host 1 to host 0 through bash's /dev/tcp (no extra tools).
    server = subprocess.Popen(c.exec_argv(c.hosts[0], "python3", "-c",
                              "import socket; s = socket.create_server(('', 5999)); "
                              "conn, _ = s.accept(); n = 0\n"
                              "while (b := conn.recv(1 << 16)): n += len(b)\n"
                              "print(n)"), stdout=subprocess.PIPE, text=True)
    try:
        send = c.run(c.hosts[1], "python3", "-c",
                     "import socket, time\n"
                     "for _ in range(100):\n"
                     "    try: s = socket.create_connection(('" + c.hosts[0] + "', 5999)); break\n"
                     "    except OSError: time.sleep(0.05)\n"
                     f"s.sendall(bytes({payload})); s.close()", timeout=60)
        assert send.returncode == 0, send.stderr
        assert int(server.communicate(timeout=60)[0]) == payload
    finally:
        server.kill()
        server.wait()
    moved = c.bytes_since(before)
    rx0, tx0 = moved[c.hosts[0]]
    rx1, tx1 = moved[c.hosts[1]]
    # Payload plus headers (< 5% with 64 KiB segments) one way, ACKs back.
    assert payload <= rx0 < 1.05 * payload and payload <= tx1 < 1.05 * payload
    assert tx0 < 0.05 * payload and rx1 < 0.05 * payload


def link_rate_bits(tc_output):
    """The rate of the link class 1:1 in `tc class show` output, bit/s (None without it)."""
    import re
    m = re.search(r"class htb 1:1 root .*?rate (\d+(?:\.\d+)?)([KMG]?)bit", tc_output)
    return float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)] if m else None


def test_shape_sets_htb_on_both_ends(cluster):
    c = cluster(2)
    c.shape("100mbit")
    # RATE less Ethernet's 24 bytes of wire overhead per full frame (cluster.sh)
    want = 100e6 * 1514 / 1538
    for host in c.hosts:
        i = host[len(c.prefix):]
        for ns, dev in ((["-n", host], "eth0"), ([], f"{c.prefix}v{i}")):
            out = subprocess.run(["tc", *ns, "class", "show", "dev", dev],
                                 capture_output=True, text=True).stdout
            assert abs(link_rate_bits(out) / want - 1) < 0.001, out
            # small packets (IPv4 total length < 256) to the priority class 1:10
            out = subprocess.run(["tc", *ns, "filter", "show", "dev", dev],
                                 capture_output=True, text=True).stdout
            assert "flowid 1:10" in out and "00000000/0000ff00 at 0" in out, out
    c.unshape()
    out = subprocess.run(["tc", "-n", c.hosts[0], "qdisc", "show", "dev", "eth0"],
                         capture_output=True, text=True).stdout
    assert "htb" not in out


def test_hosts_take_the_chosen_tcp_congestion_control(cluster, monkeypatch):
    """cubic (a stock Linux host's default) on every host whatever this machine's
    kernel defaults to, or STRATBENCH_CLUSTER_CC; a name the kernel lacks: exit 2."""
    def host_cc(c):
        return {c.run(h, "sysctl", "-n", "net.ipv4.tcp_congestion_control").stdout.strip()
                for h in c.hosts}
    c = cluster(2)
    assert host_cc(c) == {"cubic"}
    monkeypatch.setenv("STRATBENCH_CLUSTER_CC", "reno")
    c.up(2)
    assert host_cc(c) == {"reno"}
    monkeypatch.setenv("STRATBENCH_CLUSTER_CC", "nosuchcc")
    proc = subprocess.run([str(SCRIPT), "-p", c.prefix, "up", "2"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "nosuchcc" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_down_leaves_nothing_even_with_processes_running(cluster):
    c = cluster(2)
    sleeper = subprocess.Popen(c.exec_argv(c.hosts[1], "sleep", "600"))
    try:
        assert leftovers(c.prefix)
        # down only ends what runs in a host: wait until the sleeper is in it (a down
        # racing `ip netns exec` can leave it in the deleted namespace; CI, 2026-11-29)
        deadline = time.monotonic() + 10
        while not subprocess.run(["ip", "netns", "pids", c.hosts[1]], capture_output=True,
                                 text=True).stdout.strip():
            assert time.monotonic() < deadline, "the sleeper never entered its host"
            time.sleep(0.05)
        c.down()
        assert sleeper.wait(timeout=10) != 0  # ended by the teardown
        assert leftovers(c.prefix) == []
        c.down()  # idempotent
        assert leftovers(c.prefix) == []
    finally:
        sleeper.kill()


def test_two_prefixes_do_not_collide(cluster):
    a = cluster(2)
    b = type(a).for_this_process().up(2)
    try:
        assert set(a.hosts).isdisjoint(b.hosts)
        # a's host 0 resolves only a's names; b's subnet differs.
        out = a.run(a.hosts[0], "getent", "hosts", b.hosts[1])
        assert out.returncode != 0
        addr_a = a.run(a.hosts[0], "getent", "hosts", a.hosts[0]).stdout.split()[0]
        addr_b = b.run(b.hosts[0], "getent", "hosts", b.hosts[0]).stdout.split()[0]
        assert addr_a.rsplit(".", 1)[0] != addr_b.rsplit(".", 1)[0]
    finally:
        b.down()
    assert leftovers(b.prefix) == [] and leftovers(a.prefix)


@pytest.mark.parametrize("args, message", [
    (["-p", "stbad", "up", "0"], "host count"),
    (["-p", "Bad!", "up", "2"], "prefix"),
    (["-p", "stbad", "shape", "fast"], "no cluster"),
    (["-p", "stbad", "exec", "stbad0", "true"], "no cluster"),
])
def test_bad_arguments_exit_2_with_one_line(args, message):
    if os.geteuid() != 0:
        pytest.skip("cluster.sh needs root")
    proc = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
