"""The TCP eager limit stratbench chooses from the run's largest point-to-point message
and its collectives' pieces (src/job/eager_limit.h, src/job/launcher.h; docs/layouts.md,
"Rendezvous boundary sends" and "Both directions at once").

- Every launched job of several ranks gets a limit that sends the collectives' 1 MiB
  pieces eagerly: 1,048,576 + 64 bytes of header room rounded up to 4 KiB = 1,052,672,
  which MPI runs with (in_effect, MPI_T).
- A pipeline of the mlp --hidden 1024 with --batch 64 in 2 micro-batches sends boundary
  messages of 32 x 1024 x 4 = 131,072 bytes: the report states them
  (p2p_max_message_bytes); they are under the same limit. A boundary above the piece
  sets its own (sb_eager_limit_for: tests/unit).
- The user's own OMPI_MCA_btl_tcp_eager_limit is kept and recorded as the user's.
- ddp sends no point-to-point message of its own: p2p_max_message_bytes null, the
  collectives' limit set; its ring's largest message, measured
  (collective_max_message_bytes), is the 1 MiB piece. A single process (no launcher) gets
  none, and posts no collective message.
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
        "value": "1052672", "set_by": "stratbench", "in_effect": "1052672"}


def test_the_users_limit_is_kept(stratbench, mnist_dir, tmp_path):
    mine = dict(child_env(), OMPI_MCA_btl_tcp_eager_limit="65536")
    env = train(stratbench, mnist_dir, tmp_path, "user", PIPELINE, env=mine)
    assert env["p2p_max_message_bytes"] == 131072
    assert env["mpi_transport"]["btl_tcp_eager_limit"] == {
        "value": "65536", "set_by": "user", "in_effect": "65536"}


def test_ddp_sets_the_collectives_limit(stratbench, mnist_dir, tmp_path):
    env = train(stratbench, mnist_dir, tmp_path, "ddp", ["--strategy", "ddp", "--replicas", "2"])
    assert env["p2p_max_message_bytes"] is None
    # 784-1024-10: 814,090 parameters, the ring's chunks of 407,045 floats (1.6 MB) go in
    # pieces of 1 MiB: the largest message measured is the piece (report 1.17)
    assert env["collective_max_message_bytes"] == 1048576
    assert env["mpi_transport"]["btl_tcp_eager_limit"] == {
        "value": "1052672", "set_by": "stratbench", "in_effect": "1052672"}


def test_a_single_process_sets_none(stratbench, mnist_dir, tmp_path):
    env = train(stratbench, mnist_dir, tmp_path, "single", ["--strategy", "single"])
    assert env["mpi_transport"]["btl_tcp_eager_limit"]["set_by"] == "none"
    assert env["collective_max_message_bytes"] is None
    assert env["mpi_transport"]["btl_tcp_eager_limit"]["value"] is None
