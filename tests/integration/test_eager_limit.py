"""The TCP eager limit stratbench chooses from the run's largest point-to-point message
(src/job/eager_limit.h, src/job/launcher.h; docs/layouts.md, "Rendezvous boundary sends").

- A pipeline of the mlp --hidden 1024 with --batch 64 in 2 micro-batches sends boundary
  messages of 32 x 1024 x 4 = 131,072 bytes: the report's environment states them
  (p2p_max_message_bytes) and the limit stratbench set for them (131,072 + 64 bytes of
  header room rounded up to 4 KiB: 135,168), which MPI runs with (in_effect, MPI_T).
- The user's own OMPI_MCA_btl_tcp_eager_limit is kept and recorded as the user's.
- ddp sends no point-to-point message: no limit set, p2p_max_message_bytes null.
The warning when the limit in effect is too small is tests/unit/test_run_warnings.c's
(it needs two hosts). No test depends on how fast anything is.
"""

from conftest import child_env, describe, run, validate_report


def train(stratbench, mnist_dir, tmp_path, tag, flags, env=None):
    rep = tmp_path / f"{tag}.json"
    proc = run([stratbench, "train", "--data", mnist_dir, "--threads", "1", "--max-steps", "2",
                "--epochs", "1", "--warmup-steps", "1", "--eval-samples", "100",
                "--workload", "mlp", "--hidden", "1024", "--batch", "64", "--report", rep,
                *flags], timeout=120, env=env or child_env())
    assert proc.returncode == 0, describe(proc)
    return validate_report(rep)["environment"]


PIPELINE = ["--strategy", "pipeline", "--stages", "2", "--microbatches", "2"]


def test_pipeline_sets_the_limit_above_its_boundary(stratbench, mnist_dir, tmp_path):
    env = train(stratbench, mnist_dir, tmp_path, "pp", PIPELINE)
    assert env["p2p_max_message_bytes"] == 32 * 1024 * 4
    assert env["mpi_transport"]["btl_tcp_eager_limit"] == {
        "value": "135168", "set_by": "stratbench", "in_effect": "135168"}


def test_the_users_limit_is_kept(stratbench, mnist_dir, tmp_path):
    mine = dict(child_env(), OMPI_MCA_btl_tcp_eager_limit="65536")
    env = train(stratbench, mnist_dir, tmp_path, "user", PIPELINE, env=mine)
    assert env["p2p_max_message_bytes"] == 131072
    assert env["mpi_transport"]["btl_tcp_eager_limit"] == {
        "value": "65536", "set_by": "user", "in_effect": "65536"}


def test_ddp_sets_none(stratbench, mnist_dir, tmp_path):
    env = train(stratbench, mnist_dir, tmp_path, "ddp", ["--strategy", "ddp", "--replicas", "2"])
    assert env["p2p_max_message_bytes"] is None
    assert env["mpi_transport"]["btl_tcp_eager_limit"]["set_by"] == "none"
    assert env["mpi_transport"]["btl_tcp_eager_limit"]["value"] is None
