"""Process grids across hosts (src/comm/grid.c): the unit test binary
build/tests/test_grid (every dp x tp x pp grid of 1..8 ranks in both rank orders:
coordinates, axis communicators' sizes, roles and members as Megatron-LM lays them out,
and point-to-point between pipeline neighbours with its sendrecv bytes counted exactly)
run with 8 ranks over 4 hosts of the one-machine cluster (tests/cluster), rank r on
host r mod 4, Open MPI over TCP: so every axis communicator of more than one rank spans
hosts. Skips without root or network namespaces (the `cluster` fixture).
"""

import os

HOSTS, RANKS = 4, 8


def test_grid_across_hosts(cluster, build_dir, repo_root):
    exe = build_dir / "tests" / "test_grid"
    assert os.access(exe, os.X_OK), f"{exe} was not built"
    c = cluster(HOSTS)
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1",
                "STRATBENCH_GRID_MPIRUN": f"{c.mpirun_words()} -n {RANKS} --oversubscribe "
                                          "--map-by node"})
    proc = c.run(c.hosts[0], str(exe.resolve()), env=env, timeout=600, cwd=repo_root)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{out}"
    assert f"{RANKS} ranks: 76 grids checked on rank 0, ok" in out, out
