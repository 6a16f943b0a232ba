"""The test helpers keep CPU tests on the CPU (tests/conftest.py, cpu_by_default):
`--device` defaults to cuda where a GPU is visible, so a `stratbench train` or
`sweep` that names no --device gets `--device cpu`, and one that names it is left
alone. Pure argument handling: runs everywhere."""

from conftest import cpu_by_default

SB = "/x/build/stratbench"


def test_train_gets_device_cpu_after_the_command():
    assert cpu_by_default([SB, "train", "--data", "d"]) == \
        [SB, "train", "--device", "cpu", "--data", "d"]


def test_train_under_mpirun_gets_device_cpu():
    args = ["mpirun", "-n", "2", "--bind-to", "none", SB, "train", "--strategy", "ddp"]
    assert cpu_by_default(args) == args[:7] + ["--device", "cpu", "--strategy", "ddp"]


def test_a_named_device_is_kept():
    for args in ([SB, "train", "--device", "cuda"], [SB, "train", "--device=cuda"],
                 [SB, "sweep", "--data", "d", "--", "--device", "cuda"]):
        assert cpu_by_default(list(args)) == list(args)


def test_sweep_passes_device_cpu_to_every_run():
    assert cpu_by_default([SB, "sweep", "--data", "d", "--", "--warmup-steps", "2"]) == \
        [SB, "sweep", "--data", "d", "--", "--device", "cpu", "--warmup-steps", "2"]
    assert cpu_by_default([SB, "sweep", "--data", "d"]) == \
        [SB, "sweep", "--data", "d", "--", "--device", "cpu"]


def test_other_commands_are_untouched():
    for args in ([SB, "info"], [SB, "compare", "a", "b"], [SB, "sweep", "--repeats", "0"],
                 ["python3", "plot.py", "train"]):
        assert cpu_by_default(list(args)) == list(args)
