"""Communication per communicator role (the report's comm.by_role, schema 1.11).

Every strategy's replicas synchronise over a communicator of role dp (a 1-deep grid's
dp axis; src/comm/grid.h). by_role regroups the same counters as the report's kinds,
so for ddp on 2 and 3 ranks role dp is the only role, its ranks are the replicas, and
its calls and bytes per kind equal comm's; its busbw uses its own ranks (here the same
as comm.ranks). single has no communicator and no role.
"""

import pytest

from conftest import train, validate_report


@pytest.mark.parametrize("replicas", [2, 3])
def test_ddp_reports_role_dp(replicas, stratbench, mnist_dir, tmp_path):
    report_path = tmp_path / "report.json"
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", str(replicas),
          "--batch", "32", "--max-steps", "12", "--warmup-steps", "2",
          "--report", report_path)
    comm = validate_report(report_path)["comm"]
    by_role = comm["by_role"]
    assert list(by_role) == ["dp"], by_role
    dp = by_role["dp"]
    assert dp["ranks"] == replicas == comm["ranks"]
    kinds = [k for k in comm if isinstance(comm[k], dict) and "busbw_factor" in comm[k]]
    assert "allreduce" in kinds
    called = [k for k in kinds if comm[k]["calls"] > 0]
    assert sorted(k for k in dp if k not in ("ranks", "total")) == sorted(called)
    for k in called:
        for field in ("calls", "bytes", "time_s", "busbw_factor"):
            assert dp[k][field] == comm[k][field], (k, field, dp[k], comm[k])
        assert dp[k]["busbw_GBps"] == pytest.approx(dp[k]["algbw_GBps"] * dp[k]["busbw_factor"])
    assert dp["allreduce"]["busbw_factor"] == pytest.approx(2 * (replicas - 1) / replicas)
    assert dp["total"]["bytes"] == comm["total"]["bytes"]
    assert dp["total"]["calls"] == comm["total"]["calls"]


def test_single_has_no_role(stratbench, mnist_dir, tmp_path):
    report_path = tmp_path / "report.json"
    train(stratbench, mnist_dir, "--strategy", "single", "--max-steps", "4", "--warmup-steps", "2",
          "--report", report_path)
    assert validate_report(report_path)["comm"]["by_role"] == {}
