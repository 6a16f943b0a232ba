"""NVTX ranges as Nsight Systems sees them, observed through NVTX's own injection
interface: NVTX_INJECTION64_PATH names build/tests/libnvtx_inject.so
(tests/nvtx_inject/nvtx_inject.c), which NVTX3 loads at the program's first NVTX call
and whose InitializeInjectionNvtx2 fills NVTX's callback tables with functions that log
every domain, category, thread name, push and pop to one file per process. The same
library, preloaded, logs the MPI calls that move data (MPI_Iallreduce, MPI_Isend, ...).

For a short run of every strategy (6 steps, warm-up included) it checks what
docs/profiling.md promises: ranges nest (every pop closes the thread's innermost push
of the same domain, nothing is left open); every step of every thread that trains
(mirrored's replica threads included, named by nvtxNameOsThread) is a `step` range with
the step as payload, holding each of its phases (data, forward, backward, optimizer;
a central server: optimizer) with the same payload, and a communication range where
the strategy communicates; communication ranges carry their byte count; and every MPI
call made inside a step or an evaluation is inside a communication range."""

import collections
import pathlib

import pytest

from conftest import build_path, child_env, cuda_devices, describe, run

STEPS = 6
INJECT = build_path() / "tests" / "libnvtx_inject.so"
CATEGORIES = {1: "epoch", 2: "step", 3: "data", 4: "forward", 5: "backward", 6: "comm",
              7: "optimizer", 8: "eval"}
PHASES = ("data", "forward", "backward", "optimizer")

# (id, flags, processes, training threads per process, phases of a worker's step)
CASES = [
    ("single", ["--strategy", "single"], 1, 1, {"data", "forward", "backward", "optimizer"}),
    ("mirrored", ["--strategy", "mirrored", "--replicas", "2"], 1, 2,
     {"data", "forward", "backward", "optimizer", "comm"}),
    ("ddp", ["--strategy", "ddp", "--replicas", "2"], 2, 1,
     {"data", "forward", "backward", "optimizer", "comm"}),
    ("central", ["--strategy", "central", "--replicas", "2", "--servers", "1"], 3, 1,
     {"data", "forward", "backward", "comm"}),
    ("zero-1", ["--strategy", "zero", "--replicas", "2", "--zero-stage", "1"], 2, 1,
     {"data", "forward", "backward", "optimizer", "comm"}),
    ("zero-3", ["--strategy", "zero", "--replicas", "2", "--zero-stage", "3"], 2, 1,
     {"data", "forward", "backward", "optimizer", "comm"}),
    ("hierarchical", ["--strategy", "hierarchical", "--replicas", "2", "--ranks-per-host", "1"],
     2, 1, {"data", "forward", "backward", "optimizer", "comm"}),
    # Many small buckets: the polls during backward post a ring's next step and a
    # hierarchical all-reduce's next stage (each poll is an `*.test` comm range);
    # before it was, these two runs put 1-59 MPI calls outside any comm range.
    ("ddp-small-buckets", ["--strategy", "ddp", "--replicas", "3", "--bucket-mb", "0.01"], 3, 1,
     {"data", "forward", "backward", "optimizer", "comm"}),
    ("hierarchical-small-buckets", ["--strategy", "hierarchical", "--replicas", "4",
                                    "--ranks-per-host", "2", "--bucket-mb", "0.01"],
     4, 1, {"data", "forward", "backward", "optimizer", "comm"}),
    # The device path (a GPU machine only): the same ranges around asynchronous work.
    ("cuda-single", ["--strategy", "single", "--device", "cuda"], 1, 1,
     {"data", "forward", "backward", "optimizer"}),
    ("cuda-mirrored", ["--strategy", "mirrored", "--replicas", "2", "--device", "cuda"], 1, 2,
     {"data", "forward", "backward", "optimizer", "comm"}),
    ("cuda-ddp-mpi", ["--strategy", "ddp", "--replicas", "2", "--device", "cuda", "--comm",
                      "mpi"], 2, 1, {"data", "forward", "backward", "optimizer", "comm"}),
]


def parse(path):
    """One process's log: (domains {id: name}, categories {(domain, id): name},
    thread names {tid: name}, events [(kind, tid, fields...)] in order)."""
    domains, categories, names, events = {}, {}, {}, []
    for line in pathlib.Path(path).read_text().splitlines():
        f = line.split("\t")
        if f[0] == "domain":
            domains[int(f[1])] = f[2]
        elif f[0] == "category":
            categories[(int(f[1]), int(f[2]))] = f[3]
        elif f[0] == "thread":
            names[int(f[1])] = f[2]
        elif f[0] == "push":
            events.append(("push", int(f[1]), int(f[2]), int(f[3]), int(f[4]), int(f[5]), f[6]))
        elif f[0] == "pop":
            events.append(("pop", int(f[1]), int(f[2])))
        elif f[0] == "mpi":
            events.append(("mpi", int(f[1]), f[2]))
    return domains, categories, names, events


def ranges(events, where):
    """Per thread, the closed ranges as dicts (name, cat, payload, type, parent index,
    children), in push order, and the MPI calls as (function, open ranges); asserts that
    ranges nest and that none is left open."""
    stacks = collections.defaultdict(list)
    out = collections.defaultdict(list)
    mpi = collections.defaultdict(list)
    for e in events:
        tid = e[1]
        st = stacks[tid]
        if e[0] == "push":
            r = {"domain": e[2], "cat": CATEGORIES.get(e[3], e[3]), "type": e[4], "payload": e[5],
                 "name": e[6], "parent": st[-1] if st else None, "children": []}
            if st:
                out[tid][st[-1]]["children"].append(len(out[tid]))
            out[tid].append(r)
            st.append(len(out[tid]) - 1)
        elif e[0] == "pop":
            assert st, f"{where}: thread {tid} pops with no range open"
            assert out[tid][st[-1]]["domain"] == e[2], \
                f"{where}: thread {tid} pops domain {e[2]} over an open range of another domain"
            st.pop()
        else:
            mpi[tid].append((e[2], [out[tid][i] for i in st]))
    for tid, st in stacks.items():
        assert not st, f"{where}: thread {tid} ends with ranges open: " \
                       f"{[out[tid][i]['name'] for i in st]}"
    return out, mpi


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_nvtx_ranges_as_a_tool_sees_them(case, stratbench, mnist_dir, tmp_path):
    if not INJECT.is_file():
        pytest.skip(f"{INJECT} not built (./configure.py found no NVTX3 headers: the ranges "
                    "compile to nothing)")
    name, flags, processes, threads, worker_phases = case
    if "cuda" in flags and cuda_devices(stratbench) == 0:
        pytest.skip("skipped: no CUDA device")
    logs = tmp_path / "nvtx"
    logs.mkdir()
    env = {**child_env(), "NVTX_INJECTION64_PATH": str(INJECT),
           "LD_PRELOAD": str(INJECT), "NVTX_INJECT_DIR": str(logs)}
    proc = run([stratbench, "train", "--data", mnist_dir, *flags, "--max-steps", str(STEPS),
                "--warmup-steps", "2", "--batch", "32"], env=env, timeout=600)
    assert proc.returncode == 0, describe(proc)

    files = sorted(logs.glob("nvtx.*.log"))
    trainers = []  # (file, tid, steps) of every thread with step ranges
    for path in files:
        where = f"{name}: {path.name}"
        domains, categories, names, events = parse(path)
        if not any(e[0] == "push" for e in events):
            continue  # a process that opened no range (e.g. a launcher)
        assert list(domains.values()) == ["stratbench"], f"{where}: domains {domains}"
        dom = next(iter(domains))
        for cid, cname in CATEGORIES.items():
            assert categories.get((dom, cid)) == cname, f"{where}: category {cid} not named {cname}"
        per_thread, mpi = ranges(events, where)
        for tid, rs in per_thread.items():
            for r in rs:
                assert r["domain"] == dom and r["type"] == 1, f"{where}: {r['name']}: {r}"
                if r["cat"] == "comm":
                    assert r["payload"] > 0, f"{where}: comm range {r['name']} without bytes"
            steps = [r for r in rs if r["cat"] == "step"]
            if steps:
                trainers.append((path, tid, names.get(tid), steps, rs))
        # Every MPI call that moves data, inside a step or an evaluation, is communication.
        for tid, calls in mpi.items():
            for fn, open_ranges in calls:
                if any(r["cat"] in ("step", "eval") for r in open_ranges):
                    assert any(r["cat"] == "comm" for r in open_ranges), \
                        f"{where}: thread {tid}: {fn} inside " \
                        f"{[r['name'] for r in open_ranges]} is in no communication range"

    per_process = collections.Counter(str(t[0]) for t in trainers)
    assert len(per_process) == processes, f"{name}: training processes {dict(per_process)}"
    assert set(per_process.values()) == {threads}, f"{name}: threads {dict(per_process)}"
    if threads > 1:  # mirrored: the replica threads are named for Nsight
        named = sorted(t[2] for t in trainers if t[2])
        assert named == [f"replica {i}" for i in range(1, threads)], f"{name}: names {named}"

    for path, tid, _, steps, rs in trainers:
        where = f"{name}: {path.name} thread {tid}"
        assert [s["payload"] for s in steps] == list(range(STEPS)), \
            f"{where}: step payloads {[s['payload'] for s in steps]}"
        for s in steps:
            inside = [rs[i] for i in s["children"]]
            cats = {r["cat"] for r in inside}
            worker = "forward" in cats
            expected = worker_phases if worker else {"optimizer", "comm"}
            assert cats == expected, f"{where}: step {s['payload']} holds {sorted(cats)}, " \
                                     f"expected {sorted(expected)}"
            for r in inside:
                if r["cat"] in PHASES:
                    assert r["payload"] == s["payload"], \
                        f"{where}: {r['name']} of step {s['payload']} has payload {r['payload']}"
