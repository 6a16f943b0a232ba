"""The two link classes across 2 hosts of the one-machine cluster (tests/cluster; root
only, skipped otherwise): with 2 ranks per host the start-up probe measures the
cross-host link and, beside it, the link between rank 0 and the other rank of its host;
the report's comm.model.links holds both (inter = the top-level alpha_s and
bandwidth_Bps, which keep their meaning), the shaped cross-host link is the slower, and
`predict --layouts` takes both from the report and prices tp inside a host on the
within-host link."""

import json

from conftest import run

RATE_BPS = 100e6 / 8  # 100 Mbit/s


def test_probe_measures_both_classes(cluster, stratbench, mnist_dir, tmp_path):
    c = cluster(2)
    c.shape("100mbit")
    report = tmp_path / "r.json"
    proc = c.stratbench(stratbench, "train", "--data", mnist_dir, "--device", "cpu",
                        "--strategy", "ddp", "--replicas", 4, "--threads", 1, "--max-steps", 20,
                        "--report", report)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text())
    assert len(set(doc["environment"]["hosts"])) == 2
    model = doc["comm"]["model"]
    links = model["links"]
    assert model["probe_cross_host"] is True
    assert {k: links["inter"][k] for k in ("alpha_s", "bandwidth_Bps")} == \
        {"alpha_s": model["alpha_s"], "bandwidth_Bps": model["bandwidth_Bps"]}
    # (1.14) both links sized, with the machine's gamma: the within-host ladder climbs to
    # 16 MiB (5 classes, unless a loaded machine stretched a rung past 40 ms); the 100
    # Mbit/s one stops once its next rung would pass 40 ms (256 KiB: 21 ms, so 1 MiB is
    # never sent): at most 2 classes, from 0 and 64 KiB (1 where load slowed the 64 KiB rung)
    assert [c["from_bytes"] for c in links["inter"]["sizes"]] in ([0], [0, 65536])
    assert 2 <= len(links["intra"]["sizes"]) <= 5
    assert links["inter"]["gamma_s_per_byte"] == links["intra"]["gamma_s_per_byte"] == \
        model["gamma_s_per_byte"] > 0
    # (1.18) the same rungs timed as exchanges, both ends sending at once: a class per
    # one-way class, each at most the line's rate each way (plus the burst's slack)
    for k in ("inter", "intra"):
        assert [c["from_bytes"] for c in links[k]["exchange_sizes"]] == \
            [c["from_bytes"] for c in links[k]["sizes"]]
    assert all(0 < c["bandwidth_Bps"] < 1.2 * RATE_BPS for c in links["inter"]["exchange_sizes"])
    # the shaped link: at most its rate (plus the token bucket's burst slack), and
    # below the within-host link, which is not shaped (about 10 GB/s on a quiet
    # machine; the test asserts only the order, since a loaded machine measured
    # 35 MB/s: speeds belong to the benches)
    assert links["inter"]["bandwidth_Bps"] < 1.2 * RATE_BPS
    assert links["intra"]["bandwidth_Bps"] > links["inter"]["bandwidth_Bps"]
    pred = run([stratbench, "predict", report, "--layouts", "--hosts", 2, "--ranks-per-host",
                2, "--json"], check=True)
    layouts = json.loads(pred.stdout)
    assert layouts["links"]["intra"]["source"] == layouts["links"]["inter"]["source"] == "probe"
    assert layouts["links"]["inter"]["sizes"] == links["inter"]["sizes"]
    assert layouts["links"]["inter"]["exchange_sizes"] == links["inter"]["exchange_sizes"]
    tp = [r for r in layouts["layouts"] if r["tp"] == 2]
    assert tp and all(r["comm"]["tp"]["link"] == "intra" for r in tp)
