"""The environment that caps a Python process's BLAS and OpenMP pools at N threads.

torch.set_num_threads does not cap the OpenBLAS pool under Debian's PyTorch (1.13,
libblas.so.3 = openblas-pthread), which takes every core; the pools read these variables
once, when they load, so they must be set before numpy or torch is imported, in the
process itself or in the environment of a child (docs/workloads.md, "PyTorch's '1 thread'
was two cores"). Used by torch_reference.py and vit_vs_torch.py.
"""

THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def blas_env(threads):
    """{variable: str(threads)} for every pool variable."""
    return {var: str(threads) for var in THREAD_VARS}
