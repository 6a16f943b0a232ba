#!/usr/bin/env python3
"""Configure stratbench: find the compiler and libraries, then write build.ninja.

    ./configure.py [--debug] [--sanitize=address,undefined] [--no-cuda] ...
    ninja && ninja test
    ./configure.py --fetch-mnist [DIR]      # download and check MNIST (tools/fetch_mnist.py)

Python 3 standard library only. Everything to build is found by glob below, so a
new source file needs no edit here; build.ninja watches the source folders and
re-runs this script (with the arguments recorded in build.ninja) when a file is
added or removed, or when configure.py itself changes.
"""

import argparse
import glob
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

# ------------------------------------------------------------ what to build
ROOT = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIRS = ["src", "strategies", "workloads"]  # every *.c and *.cu below these
MAIN_SOURCE = "src/main.c"                        # the program's main(); the rest is the library
UNIT_TESTS = "tests/unit/test_*.c"                # each one becomes build/tests/test_<name>
NVTX_INJECT = "tests/nvtx_inject/nvtx_inject.c"  # NVTX tool of test_nvtx.py (with NVTX3 only)
FUZZ_TARGETS = "tests/fuzz/fuzz_*.c"              # each one becomes build/fuzz/fuzz_<name> (ninja fuzz)
FUZZ_DIR = "build/fuzz"                           # the library again, built by clang for libFuzzer
FUZZ_SANITIZE = "-fsanitize=fuzzer,address,undefined"
PROGRAM = "build/stratbench"
VERSION = "0.1.0"                                 # SB_VERSION of the build (stratbench --version)
BUILD_INFO_HEADER = "build/gen/build_info.h"      # tools/build_info.py: commit, dirty flag, what was found
BUILD_INFO_SOURCE = "src/core/build_info.c"       # the one source that includes it
MAN_PAGE = "build/stratbench.1"                   # tools/gen_man.py, from the program's --help texts
COMPLETION = "build/stratbench.bash"              # tools/gen_completion.py, from --help and the registries
DEFAULT_PREFIX = "/usr/local"                     # where `ninja install` puts things (--prefix)
LIBRARY = "build/libstratbench.a"
OBJ_DIR = "build/obj"
TEST_DIR = "build/tests"

# An undeclared function is an error, not a warning: its int return truncates
# pointers (a --no-cuda build once called sb_job_world undeclared).
# -fno-trapping-math (C only; nvcc has no such flag): lets gcc if-convert the
# selects of branch-free loops (src/backend/cpu_math.h's exp and GELU) into
# SIMD code; no value changes, only floating-point exception flags are not
# kept (nothing reads them). -fno-math-errno: sqrt and the like need not set
# errno, so gcc drops the branch to libm around its square-root instruction
# and can vectorise loops with one (the cpu's Adam); no value changes (the
# instruction's result is the correctly rounded root, as libm's), only errno
# is not set for a negative input (nothing reads it after math calls).
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror=implicit-function-declaration",
          "-fno-trapping-math", "-fno-math-errno", "-Isrc", "-I."]
# -O3: gcc 12 vectorises the elementwise and optimizer loops only from -O3.
OPTIMIZE = {False: ["-O3", "-g"], True: ["-O0", "-g"]}  # keyed by --debug
SYSTEM_LIBS = ["-lpthread", "-lm"]
NVCCFLAGS = ["-std=c++17", "-lineinfo", "-Isrc", "-I.", "-D_GNU_SOURCE", "-Xcompiler", "-Wall"]
SANITIZERS = ("address", "undefined", "leak", "thread")

# Open MPI allocates and never frees a little at start-up; without these the
# address sanitizer's leak check fails every MPI program (used by `ninja test`;
# src/main.c builds the same list into the program as its default, with the
# full unwinder that the suppressions need to match).
# Open MPI's start-up allocations, and glibc 2.36's pthread_getattr_np, which
# leaks the affinity copy it makes when ASan asks a new thread (OpenBLAS's
# workers) for its stack bounds: neither is ours.
LSAN_SUPPRESSIONS = ["libmpi.so", "libopen-pal.so", "libopen-rte.so", "libhwloc.so",
                     "libevent", "libpmix.so", "mca_", "libucp", "libucs", "libfabric",
                     "__pthread_getattr_np"]

# Environment variables that change the result; recorded so that ninja's re-run matches.
RECORDED_ENV = ["CC", "CFLAGS", "LDFLAGS", "MPICC", "CUDA_HOME", "CUDAHOSTCXX", "PKG_CONFIG_PATH", "FUZZ_CC"]


class Library:
    """A library looked up with pkg-config (then by plain header + -l), link-tested with `snippet`."""

    def __init__(self, name, pkgs, headers, lib, snippet, apt, version_macros, tests_only=False):
        self.name, self.pkgs, self.headers, self.lib = name, pkgs, headers, lib
        self.snippet, self.apt, self.version_macros = snippet, apt, version_macros
        self.tests_only = tests_only


# ------------------------------------------------------------ what to look for
LIBRARIES = [
    Library("OpenBLAS", ["openblas"], ["cblas.h"], "openblas",
            "float a = 1, b = 1, c = 0;\n"
            "cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.f, &a, 1, &b, 1, 0.f, &c, 1);",
            "libopenblas-dev", ["OPENBLAS_VERSION"]),
    Library("cJSON", ["libcjson"], ["cjson/cJSON.h"], "cjson",
            "cJSON_Delete(cJSON_CreateObject());",
            "libcjson-dev", ["CJSON_VERSION_MAJOR", "CJSON_VERSION_MINOR", "CJSON_VERSION_PATCH"]),
    Library("zlib", ["zlib"], ["zlib.h"], "z", "return zlibVersion() == 0;",
            "zlib1g-dev", ["ZLIB_VERSION"]),
    Library("OpenSSL libcrypto", ["libcrypto"], ["openssl/evp.h"], "crypto",
            "return EVP_sha256() == 0;", "libssl-dev", ["OPENSSL_VERSION_TEXT"]),
    Library("cmocka", ["cmocka"], ["stdarg.h", "stddef.h", "stdint.h", "setjmp.h", "cmocka.h"],
            "cmocka", "cmocka_set_message_output(CM_OUTPUT_STDOUT);",
            "libcmocka-dev", [], tests_only=True),
]
MPI_SNIPPET = "MPI_Init(0, 0); MPI_Finalize();"
MPI_APT = "libopenmpi-dev openmpi-bin"
CUDA_SNIPPET = "int n; cublasHandle_t h; cudaGetDeviceCount(&n); return cublasCreate(&h) != 0;"
NCCL_SNIPPET = "int v; return ncclGetVersion(&v) != 0;"
NVTX_SNIPPET = "nvtxRangePushA(\"probe\"); nvtxRangePop();"

MNIST_DEFAULT_DIR = "data/mnist"  # tools/fetch_mnist.py downloads and checks it


# ------------------------------------------------------------ small helpers
def say(ok, name, detail):
    """Prints one summary line: ✓ (found), ✗ (missing) or – (not looked for)."""
    mark = {True: "✓", False: "✗", None: "–"}[ok]
    print(f"  {mark} {name}: {detail}", flush=True)


def run(cmd, env=None):
    """Runs `cmd` (a list); returns (exit status, stdout, stderr), 127 if it cannot start."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, "", str(e)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def uniq(flags):
    """`flags` without repeats, first occurrence kept (order matters for -I and -l)."""
    seen, out = set(), []
    for f in flags:
        if f not in seen:
            seen.add(f)
            out.append(f)
    return out


def ninja_path(p):
    """A path escaped for a ninja build line."""
    return p.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def ninja_value(flags):
    """A list of arguments as one shell-quoted ninja variable value."""
    return " ".join(shlex.quote(f) for f in flags).replace("$", "$$")


def object_path(src):
    """build/obj/<src without .c>.o; CUDA sources keep their suffix (x.cu -> x.cu.o)."""
    stem = src[:-2] if src.endswith(".c") else src
    return f"{OBJ_DIR}/{stem}.o"


def find_sources(suffix):
    """Every file ending in `suffix` under SOURCE_DIRS, sorted, relative to ROOT."""
    found = []
    for d in SOURCE_DIRS:
        found += glob.glob(f"{d}/**/*{suffix}", recursive=True)
    return sorted(found)


def source_folders():
    """Every folder whose listing decides what is built (ninja re-runs configure when one changes)."""
    dirs = []
    for d in SOURCE_DIRS + ["tests/unit", "tests/fuzz", os.path.dirname(NVTX_INJECT)]:
        if os.path.isdir(d):
            dirs += [d] + sorted(p.rstrip("/") for p in glob.glob(f"{d}/**/", recursive=True) if p.rstrip("/") != d)
    return uniq(dirs)


# ------------------------------------------------------------ probes
class Probe:
    """The compiler and the flags found so far, used to link-test each library."""

    def __init__(self, cc, prefix):
        self.cc = cc
        self.tmp = tempfile.mkdtemp(prefix="stratbench-configure-")
        self.prefix = prefix
        self.cflags, self.ldflags = [], []  # the --prefix-deps folders, for every probe and the build
        self.pkg_envs = [os.environ.copy()]
        if prefix:
            multiarch = run(cc + ["-print-multiarch"])[1] or f"{platform.machine()}-linux-gnu"
            incs = [f"{prefix}/usr/include", f"{prefix}/usr/include/{multiarch}", f"{prefix}/usr/local/include"]
            libs = [f"{prefix}/usr/lib/{multiarch}", f"{prefix}/usr/lib", f"{prefix}/lib/{multiarch}",
                    f"{prefix}/usr/local/lib"]
            pcs = [f"{prefix}/usr/lib/{multiarch}/pkgconfig", f"{prefix}/usr/lib/pkgconfig",
                   f"{prefix}/usr/share/pkgconfig", f"{prefix}/usr/local/lib/pkgconfig"]
            self.cflags += [f"-isystem{d}" for d in filter(os.path.isdir, incs)]
            for d in filter(os.path.isdir, libs):
                self.ldflags += [f"-L{d}", f"-Wl,-rpath,{d}"]
            # The unpacked .pc files say prefix=/usr: look there first, with the sysroot
            # set so that -I/-L point into DIR, then in the system's own .pc files.
            env = os.environ.copy()
            env["PKG_CONFIG_LIBDIR"] = ":".join(filter(os.path.isdir, pcs))
            env["PKG_CONFIG_SYSROOT_DIR"] = prefix
            env.pop("PKG_CONFIG_PATH", None)
            self.pkg_envs.insert(0, env)

    def links(self, includes, body, cflags=(), libs=()):
        """Whether a program including `includes` and running `body` in main() compiles and links."""
        src = os.path.join(self.tmp, "probe.c")
        with open(src, "w") as f:
            f.write("".join(f"#include <{h}>\n" for h in includes))
            f.write(f"int main(void) {{ {body} return 0; }}\n")
        cmd = self.cc + ["-std=c11", "-D_GNU_SOURCE"] + self.cflags + list(cflags) + [src, "-o",
               os.path.join(self.tmp, "probe")] + self.ldflags + list(libs)
        return run(cmd)[0] == 0

    def macros(self, header, names, cflags=()):
        """The values of #define `names` after including `header` ({} if it does not preprocess)."""
        src = os.path.join(self.tmp, "macros.c")
        with open(src, "w") as f:
            f.write(f"#include <{header}>\n")
        rc, out, _ = run(self.cc + ["-E", "-dM"] + self.cflags + list(cflags) + [src])
        found = dict(re.findall(r"^#define (\w+) (.*)$", out, re.M)) if rc == 0 else {}
        return {n: found[n].strip('"') for n in names if n in found}

    def pkg_config(self, name):
        """(version, cflags, libs) of pkg-config package `name`, --prefix-deps first; None if absent."""
        for env in self.pkg_envs:
            rc, version, _ = run(["pkg-config", "--modversion", name], env)
            if rc == 0:
                cflags = shlex.split(run(["pkg-config", "--cflags", name], env)[1])
                libs = shlex.split(run(["pkg-config", "--libs", name], env)[1])
                if self.prefix:  # libraries unpacked under DIR must be found at run time too
                    libs += [f"-Wl,-rpath,{f[2:]}" for f in libs if f.startswith(f"-L{self.prefix}")]
                return version, cflags, libs
        return None


def probe_compiler(probe):
    """Checks that the C compiler builds C11; returns "gcc 12.2.0" (or the like) or None."""
    rc, out, _ = run(probe.cc + ["--version"])
    if rc != 0 or not probe.links(["stdio.h"], "puts(\"\");"):
        return None
    first = out.splitlines()[0]
    kind = "clang" if "clang" in first else "gcc" if "Free Software Foundation" in out else first.split()[0]
    m = re.search(r"\d+\.\d+(\.\d+)?", first)
    return f"{kind} {m.group(0) if m else '(version unknown)'}"


def probe_library(probe, lib):
    """(version, cflags, libs) of `lib`, or None when it cannot be linked."""
    for name in lib.pkgs:
        found = probe.pkg_config(name)
        if found and probe.links(lib.headers, lib.snippet, found[1], found[2]):
            return found
    if probe.links(lib.headers, lib.snippet, [], [f"-l{lib.lib}"]):  # no .pc file: plain -l
        m = probe.macros(lib.headers[-1], lib.version_macros)
        version = ".".join(m[k] for k in lib.version_macros if k in m) or "version unknown"
        return version + " (without pkg-config)", [], [f"-l{lib.lib}"]
    return None


def probe_mpi(probe):
    """(version, cflags, libs) of MPI: mpicc's wrapper flags, else pkg-config ompi-c; or None."""
    mpicc = shlex.split(os.environ.get("MPICC", "mpicc"))
    rc1, cflags, _ = run(mpicc + ["--showme:compile"])
    rc2, libs, _ = run(mpicc + ["--showme:link"])
    if rc1 == 0 and rc2 == 0:
        version = run(mpicc + ["--showme:version"])[1]
        m = re.search(r"(Open MPI [\w.]+)", version)
        found = (m.group(1) if m else version), shlex.split(cflags), shlex.split(libs)
    else:
        found = next(filter(None, (probe.pkg_config(n) for n in ("ompi-c", "mpi"))), None)
    if found and probe.links(["mpi.h"], MPI_SNIPPET, found[1], found[2]):
        return found
    return None


def probe_python():
    """(path, description) of a python3 that can import pytest (/usr/bin/python3 first), or None."""
    for py in uniq(filter(None, ["/usr/bin/python3", shutil.which("python3"), sys.executable])):
        rc, out, _ = run([py, "-c", "import sys, pytest\nmissing = []\n"
                          "for m in ('jsonschema', 'numpy', 'matplotlib'):\n"
                          "    try: __import__(m)\n    except ImportError: missing.append(m)\n"
                          "print(sys.version.split()[0], pytest.__version__, ' '.join(missing))"])
        if rc == 0:
            version, pytest_version, *missing = out.split()
            note = f"; no {', '.join(missing)} (some tests skip)" if missing else ""
            return py, f"{py} {version}, pytest {pytest_version}{note}"
    return None


def probe_cuda(probe, args):
    """Finds nvcc, cuBLAS, NCCL and NVTX3; returns a dict of what to add to the build."""
    cuda = {"enabled": False, "nccl": False, "nvtx": False, "cflags": [], "libs": [], "nvcc": None,
            "versions": {}}  # versions: name -> version found, for build_info.h
    on_path = shutil.which("nvcc")
    home = (args.cuda_home or os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
            or (os.path.dirname(os.path.dirname(os.path.realpath(on_path))) if on_path else "/usr/local/cuda"))
    inc = f"{home}/include"
    libdir = next((d for d in (f"{home}/lib64", f"{home}/lib") if os.path.isdir(d)), f"{home}/lib64")
    cuda_cflags = [f"-isystem{inc}"]  # one token, so that uniq() keeps pairs intact
    cuda_libs = [f"-L{libdir}", f"-Wl,-rpath,{libdir}"]

    # NVTX3 is header-only and also marks CPU phases, so it is used even with --no-cuda.
    if os.path.isfile(f"{inc}/nvtx3/nvToolsExt.h") and probe.links(
            ["nvtx3/nvToolsExt.h"], NVTX_SNIPPET, cuda_cflags, ["-ldl"]):
        v = probe.macros("nvtx3/nvToolsExt.h", ["NVTX_VERSION"], cuda_cflags).get("NVTX_VERSION", "?")
        say(True, "NVTX3", f"version {v}, header-only ({inc}/nvtx3)")
        cuda["versions"]["NVTX"] = v
        cuda.update(nvtx=True, cflags=["-DSB_HAVE_NVTX=1"] + cuda_cflags, libs=["-ldl"])
    else:
        say(False, "NVTX3", f"no {inc}/nvtx3/nvToolsExt.h (optional: ranges compile to no-ops)")

    if args.no_cuda:
        for name in ("CUDA", "cuBLAS", "NCCL"):
            say(None, name, "not used (--no-cuda)")
        return cuda
    nvcc = f"{home}/bin/nvcc"
    rc, out, _ = run([nvcc, "--version"])
    m = re.search(r"release [\d.]+, V([\d.]+)", out)
    if rc != 0 or not probe.links(["cuda_runtime_api.h", "cublas_v2.h"], CUDA_SNIPPET,
                                  cuda_cflags, cuda_libs + ["-lcublas", "-lcudart"]):
        say(False, "CUDA", f"no working {nvcc} (optional; --cuda-home DIR or $CUDA_HOME)" if rc != 0
            else f"nvcc found but cudart/cuBLAS do not link from {libdir} (optional)")
        for name in ("cuBLAS", "NCCL"):
            say(None, name, "not used (no CUDA)")
        return cuda
    say(True, "CUDA", f"nvcc {m.group(1) if m else '?'} ({home}), arch {args.cuda_arch}")
    v = probe.macros("cublas_api.h", ["CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH"], cuda_cflags)
    say(True, "cuBLAS", ".".join(v.values()) or "version unknown")
    cuda["versions"].update(CUDA=f"{m.group(1) if m else 'unknown'} (arch {args.cuda_arch})",
                            CUBLAS=".".join(v.values()) or "unknown")
    cuda.update(enabled=True, nvcc=nvcc)
    cuda["cflags"] += ["-DSB_HAVE_CUDA=1"] + cuda_cflags
    cuda["libs"] = cuda_libs + ["-lcublas", "-lcudart"] + cuda["libs"]
    if probe.links(["cuda_runtime_api.h", "nccl.h"], NCCL_SNIPPET, cuda_cflags, cuda_libs + ["-lnccl", "-lcudart"]):
        v = probe.macros("nccl.h", ["NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"], cuda_cflags)
        say(True, "NCCL", ".".join(v.values()) or "version unknown")
        cuda["versions"]["NCCL"] = ".".join(v.values()) or "unknown"
        cuda["nccl"] = True
        cuda["cflags"].append("-DSB_HAVE_NCCL=1")
        cuda["libs"].insert(len(cuda_libs), "-lnccl")
    else:
        say(False, "NCCL", "not found (optional: mirrored/ddp on GPUs fall back to MPI) — apt-get install libnccl-dev")
    return cuda


def probe_fuzzer(probe):
    """The compiler for `ninja fuzz` (clang with libFuzzer, ASan and UBSan) as a list, or None."""
    clang = shlex.split(os.environ.get("FUZZ_CC", "clang"))
    src = os.path.join(probe.tmp, "fuzz.c")
    with open(src, "w") as f:
        f.write("#include <stddef.h>\n#include <stdint.h>\n"
                "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
    rc, out, _ = run(clang + [FUZZ_SANITIZE, src, "-o", os.path.join(probe.tmp, "fuzz")])
    version = run(clang + ["--version"])[1].splitlines()
    if rc == 0:
        say(True, "libFuzzer", f"{version[0] if version else shlex.join(clang)} ({FUZZ_SANITIZE}; ninja fuzz)")
        return clang
    say(False, "libFuzzer", f"{shlex.join(clang)} {FUZZ_SANITIZE} does not link (optional: fuzz targets; "
        "apt-get install clang libclang-rt-14-dev)")
    return None


def gencode_flags(arch_list):
    """nvcc -gencode flags for "80,90": SASS for each, plus PTX of the newest for later GPUs."""
    archs = [a.strip() for a in arch_list.split(",") if a.strip()]
    flags = []
    for i, a in enumerate(archs):
        code = f"[sm_{a},compute_{a}]" if i == len(archs) - 1 else f"sm_{a}"
        flags += ["-gencode", f"arch=compute_{a},code={code}"]
    return flags


def nvcc_includes(cflags):
    """The -D, -I and -isystem flags of `cflags` in nvcc's spelling (-isystem DIR, two words)."""
    out = []
    for f in uniq(cflags):
        if f.startswith("-isystem"):
            out += ["-isystem", f[len("-isystem"):]]
        elif f.startswith(("-D", "-I")):
            out.append(f)
    return out


# ------------------------------------------------------------ MNIST download
def fetch_mnist(dest):
    """--fetch-mnist: runs tools/fetch_mnist.py DIR (the download lives there); its exit status."""
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools", "fetch_mnist.py")
    return subprocess.call([sys.executable, tool, dest])


# ------------------------------------------------------------ build.ninja
def build_info_defines(args, versions, cuda):
    """KEY=VALUE arguments of tools/build_info.py: the version, the install prefix and what this
    configure found (library versions at build time; "" for a backend that is not built), which
    `stratbench --version` and `stratbench info` print."""
    mode = ("debug" if args.debug else "release") + (f", -fsanitize={','.join(args.sanitizers)}"
                                                      if args.sanitizers else "")
    defines = {"SB_VERSION": VERSION, "SB_PREFIX": args.prefix, "SB_BUILD_TYPE": mode,
               "SB_CONFIGURE_ARGS": shlex.join(recorded_args(args))}
    for key in ("COMPILER", "MPI", "OPENBLAS", "CJSON", "ZLIB", "OPENSSL"):
        defines[f"SB_BUILD_{key}"] = versions.get(key, "")
    for key in ("CUDA", "CUBLAS", "NCCL", "NVTX"):
        defines[f"SB_BUILD_{key}"] = cuda["versions"].get(key, "")
    return [f"{k}={v}" for k, v in defines.items()]


def build_info_lines(cfg):
    """build.ninja lines of the generated files: build_info.h (re-made on every build, rewritten
    only when the commit, the dirty flag or configure's findings change: restat), the man page
    and bash completion (made by running the program), and `ninja install`."""
    man = f"{MAN_PAGE}: gen_man {PROGRAM} | tools/gen_man.py"
    return [
        "rule build_info",
        f"  command = $python tools/build_info.py $out . {ninja_value(cfg['build_info'])}",
        "  description = GEN $out",
        "  restat = 1",
        # these run the program: no leak report from a sanitizer build's exit (tests check that)
        "rule gen_man",
        "  command = ASAN_OPTIONS=detect_leaks=0 $python tools/gen_man.py $in $out",
        "  description = GEN $out",
        "rule gen_completion",
        "  command = ASAN_OPTIONS=detect_leaks=0 $python tools/gen_completion.py $in $out",
        "  description = GEN $out",
        "rule install",
        "  command = $python tools/install.py --prefix $prefix --build build",
        "  description = INSTALL $prefix",
        "  pool = console",
        f"prefix = {ninja_value([cfg['prefix']])}",
        # no inputs and never made: always out of date, so build_info.py runs on every build
        "build always: phony",
        f"build {BUILD_INFO_HEADER}: build_info | tools/build_info.py always",
        f"build {man}",
        f"build {COMPLETION}: gen_completion {PROGRAM} | tools/gen_completion.py",
        f"build install: install | all tools/install.py",
        "",
    ]


def write_ninja(cfg):
    """Writes build.ninja from `cfg` (the flags found) and the sources on disk, atomically."""
    c_sources = find_sources(".c")
    cu_sources = find_sources(".cu") if cfg["cuda"]["enabled"] else []
    lib_sources = [s for s in c_sources + cu_sources if s != MAIN_SOURCE]
    tests = sorted(glob.glob(UNIT_TESTS)) if cfg["cmocka"] else []
    out = [
        "# Generated by configure.py; edits are lost. Re-run ./configure.py to change options.",
        "ninja_required_version = 1.3",
        "",
        f"configure_args = {ninja_value(cfg['argv'])}",
        f"configure_env = {ninja_value(cfg['env'])}",
        f"configure_python = {ninja_value([sys.executable])}",
        f"cuda_arch = {cfg['cuda_arch']}",
        f"cc = {ninja_value(cfg['cc'])}",
        f"cflags = {ninja_value(cfg['cflags'])}",
        f"test_cflags = {ninja_value(cfg['test_cflags'])}",
        f"ldflags = {ninja_value(cfg['ldflags'])}",
        f"libs = {ninja_value(cfg['libs'])}",
        f"test_libs = {ninja_value(cfg['test_libs'])}",
        f"python = {ninja_value([cfg['python']])}",
    ]
    if cfg["cuda"]["enabled"]:
        out += [f"nvcc = {ninja_value([cfg['cuda']['nvcc']])}",
                f"nvccflags = {ninja_value(cfg['nvccflags'])}"]
    out += [
        "",
        "rule configure",
        "  command = $configure_env $configure_python configure.py $configure_args",
        "  description = CONFIGURE $configure_args",
        "  generator = 1",
        "  pool = console",
        "",
        "rule cc",
        "  command = $cc -MMD -MF $out.d $cflags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = CC $out",
        "",
        "rule ar",
        "  command = rm -f $out && ar crs $out $in",
        "  description = AR $out",
        "",
        "rule link",
        "  command = $cc $ldflags -o $out $in $libs",
        "  description = LINK $out",
        "",
        "rule shlib",
        "  command = $cc -MMD -MF $out.d $cflags -fPIC -shared -o $out $in -ldl",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = SHLIB $out",
        "",
        "rule pytest",
        f"  command = {cfg['test_env']}STRATBENCH_BUILD=build $python -m pytest -q --durations=25 tests",
        "  description = TEST",
        "  pool = console",
        "",
    ]
    if cfg["cuda"]["enabled"]:
        out += ["rule nvcc",
                "  command = $nvcc --generate-dependencies-with-compile --dependency-output $out.d "
                "$nvccflags -c $in -o $out",
                "  depfile = $out.d",
                "  deps = gcc",
                "  description = NVCC $out",
                ""]
    # Folders are inputs of build.ninja, so adding or removing a source re-runs configure;
    # each is also a phony target, so a deleted folder is not an error.
    folders = source_folders()
    out.append(f"build build.ninja: configure | configure.py {' '.join(map(ninja_path, folders))}")
    out += [f"build {ninja_path(d)}: phony" for d in folders]
    out.append("")

    out += build_info_lines(cfg)
    for src in c_sources + cu_sources:
        rule = "nvcc" if src.endswith(".cu") else "cc"
        generated = f" | {BUILD_INFO_HEADER}" if src == BUILD_INFO_SOURCE else ""
        out.append(f"build {ninja_path(object_path(src))}: {rule} {ninja_path(src)}{generated}")
    if lib_sources:
        out.append(f"build {LIBRARY}: ar {' '.join(ninja_path(object_path(s)) for s in lib_sources)}")
    lib_dep = [LIBRARY] if lib_sources else []
    targets = []
    if MAIN_SOURCE in c_sources:
        out.append(f"build {PROGRAM}: link {object_path(MAIN_SOURCE)} {' '.join(lib_dep)}")
        targets += [PROGRAM, MAN_PAGE, COMPLETION]
    for src in tests:
        name = os.path.basename(src)[:-2]
        obj = object_path(src)
        out += [f"build {ninja_path(obj)}: cc {ninja_path(src)}", "  cflags = $cflags $test_cflags",
                f"build {TEST_DIR}/{name}: link {ninja_path(obj)} {' '.join(lib_dep)}", "  libs = $test_libs $libs"]
        targets.append(f"{TEST_DIR}/{name}")
    if cfg["cuda"]["nvtx"] and os.path.isfile(NVTX_INJECT):  # NVTX_INJECTION64_PATH of test_nvtx.py
        lib = f"{TEST_DIR}/libnvtx_inject.so"
        out += [f"build {lib}: shlib {ninja_path(NVTX_INJECT)}"]
        targets.append(lib)
    out += fuzz_build_lines(cfg, [s for s in c_sources if s != MAIN_SOURCE])
    out += ["", f"build all: phony {' '.join(targets)}", "build test: pytest | all", "default all", ""]

    tmp = "build.ninja.tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out))
    os.replace(tmp, "build.ninja")
    return len(c_sources) + len(cu_sources), len(tests), MAIN_SOURCE in c_sources


def fuzz_build_lines(cfg, lib_sources):
    """build.ninja lines of `ninja fuzz`: the library's C sources compiled again by clang with
    -fsanitize=fuzzer-no-link,address,undefined into build/fuzz/, and one libFuzzer program per
    tests/fuzz/fuzz_*.c. Not part of `all`: only `ninja fuzz` builds them. [] without clang."""
    fuzz = cfg.get("fuzz")
    targets = sorted(glob.glob(FUZZ_TARGETS))
    if not fuzz or not targets:
        return []
    out = ["", f"fuzz_cc = {ninja_value(fuzz['cc'])}", f"fuzz_cflags = {ninja_value(fuzz['cflags'])}",
           f"fuzz_ldflags = {ninja_value(fuzz['ldflags'])}", f"fuzz_libs = {ninja_value(fuzz['libs'])}",
           "rule fuzz_cc", "  command = $fuzz_cc -MMD -MF $out.d $fuzz_cflags -c $in -o $out",
           "  depfile = $out.d", "  deps = gcc", "  description = FUZZ CC $out",
           "rule fuzz_link", "  command = $fuzz_cc $fuzz_ldflags -o $out $in $fuzz_libs",
           "  description = FUZZ LINK $out"]
    objs = []
    for src in lib_sources:
        obj = f"{FUZZ_DIR}/obj/{src[:-2]}.o"
        generated = f" | {BUILD_INFO_HEADER}" if src == BUILD_INFO_SOURCE else ""
        out.append(f"build {ninja_path(obj)}: fuzz_cc {ninja_path(src)}{generated}")
        objs.append(ninja_path(obj))
    out.append(f"build {FUZZ_DIR}/libstratbench.a: ar {' '.join(objs)}")
    programs = []
    for src in targets:
        name = os.path.basename(src)[:-2]
        obj = f"{FUZZ_DIR}/obj/{src[:-2]}.o"
        out += [f"build {ninja_path(obj)}: fuzz_cc {ninja_path(src)}",
                f"build {FUZZ_DIR}/{name}: fuzz_link {ninja_path(obj)} {FUZZ_DIR}/libstratbench.a"]
        programs.append(f"{FUZZ_DIR}/{name}")
    out.append(f"build fuzz: phony {' '.join(programs)}")
    return out


# ------------------------------------------------------------ main
def parse_args(argv):
    """The command line; see --help."""
    p = argparse.ArgumentParser(
        description="Find the compiler and libraries for stratbench and write build.ninja.",
        epilog="Then: ninja && ninja test (tests read MNIST from $STRATBENCH_DATA).")
    p.add_argument("--debug", action="store_true", help="build with -O0 -g instead of -O3 -g")
    p.add_argument("--sanitize", metavar="LIST", default="",
                   help="compile and link with -fsanitize=LIST, e.g. address,undefined")
    p.add_argument("--no-cuda", action="store_true", help="do not look for or use CUDA, cuBLAS or NCCL")
    p.add_argument("--cuda-home", metavar="DIR", help="CUDA toolkit folder (default $CUDA_HOME or /usr/local/cuda)")
    p.add_argument("--cuda-arch", metavar="LIST", default="80,90",
                   help="GPU architectures for nvcc, comma-separated (default 80,90)")
    p.add_argument("--prefix-deps", metavar="DIR",
                   help="also search DIR/usr/include, DIR/usr/lib/<multiarch> and their .pc files "
                        "(for .deb files unpacked with dpkg -x DEB DIR)")
    p.add_argument("--prefix", metavar="DIR", default=DEFAULT_PREFIX,
                   help=f"where `ninja install` installs (default {DEFAULT_PREFIX}; $DESTDIR is "
                        "prepended at install time): DIR/bin, DIR/share/stratbench, DIR/share/man")
    p.add_argument("--fetch-mnist", metavar="DIR", nargs="?", const=MNIST_DEFAULT_DIR,
                   help=f"download and check MNIST into DIR (default {MNIST_DEFAULT_DIR}), then exit")
    args = p.parse_args(argv)
    sanitizers = [s for s in args.sanitize.split(",") if s]
    for s in sanitizers:
        if s not in SANITIZERS:
            p.error(f"--sanitize: unknown sanitizer '{s}' (choose from {', '.join(SANITIZERS)})")
    if "thread" in sanitizers and ("address" in sanitizers or "leak" in sanitizers):
        p.error("--sanitize: thread cannot be combined with address or leak")
    args.sanitizers = sanitizers
    if not re.fullmatch(r"\d{2,3}[af]?(,\d{2,3}[af]?)*", args.cuda_arch):
        p.error(f"--cuda-arch: expected a list such as 80,90, got '{args.cuda_arch}'")
    if args.prefix_deps:
        if not os.path.isdir(args.prefix_deps):
            p.error(f"--prefix-deps: {args.prefix_deps} is not a folder")
        args.prefix_deps = os.path.abspath(args.prefix_deps)
    if args.cuda_home:
        args.cuda_home = os.path.abspath(args.cuda_home)
    if not args.prefix:
        p.error("--prefix: expected a folder")
    args.prefix = os.path.abspath(args.prefix)
    return args


def recorded_args(args):
    """The options in `args` as a canonical argument list (absolute paths) for ninja's re-run."""
    out = ["--debug"] if args.debug else []
    out += [f"--sanitize={','.join(args.sanitizers)}"] if args.sanitizers else []
    out += ["--no-cuda"] if args.no_cuda else []
    out += ["--cuda-home", args.cuda_home] if args.cuda_home else []
    out += ["--cuda-arch", args.cuda_arch] if args.cuda_arch != "80,90" else []
    out += ["--prefix-deps", args.prefix_deps] if args.prefix_deps else []
    out += ["--prefix", args.prefix] if args.prefix != DEFAULT_PREFIX else []
    return out


def main(argv):
    """Fetches MNIST, or probes and writes build.ninja; returns the exit status."""
    args = parse_args(argv)
    if args.fetch_mnist is not None:
        return fetch_mnist(args.fetch_mnist)
    os.chdir(ROOT)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")  # ✓ on a terminal that cannot show it
    probe = Probe(shlex.split(os.environ.get("CC", "cc")), args.prefix_deps)
    try:
        return configure(args, probe)
    finally:
        shutil.rmtree(probe.tmp, ignore_errors=True)


def configure(args, probe):
    """Probes everything, prints the summary and writes build.ninja; returns the exit status."""
    cc = probe.cc
    missing = []  # Debian packages of required items not found
    argv = recorded_args(args)
    print("stratbench configure" + (f" {shlex.join(argv)}" if argv else ""))

    version = probe_compiler(probe)
    say(bool(version), "C compiler", f"{version} ({shlex.join(cc)})" if version else
        f"{shlex.join(cc)} cannot build a C11 program — apt-get install build-essential")
    if not version:
        return 1
    if args.sanitizers:
        flag = "-fsanitize=" + ",".join(args.sanitizers)
        ok = probe.links(["stdio.h"], "puts(\"\");", [flag], [flag])
        say(ok, "sanitizers", flag if ok else f"{flag} does not link — install the compiler's "
            "sanitizer runtimes (e.g. apt-get install libasan8 libubsan1)")
        if not ok:
            missing.append("libasan8 libubsan1")
    if shutil.which("pkg-config"):
        say(True, "pkg-config", run(["pkg-config", "--version"])[1])
    else:
        say(False, "pkg-config", "not found; trying plain -l flags — apt-get install pkg-config")

    cflags, libs, test_cflags, test_libs = [], [], [], []
    found_versions = {"COMPILER": version}  # name -> version, for build_info.h (stratbench info)
    mpi = probe_mpi(probe)
    say(bool(mpi), "MPI", mpi[0] if mpi else f"not found (mpicc) — apt-get install {MPI_APT}")
    if mpi:
        found_versions["MPI"] = mpi[0]
        cflags += mpi[1]
        libs += mpi[2]
    else:
        missing.append(MPI_APT)
    mpirun = run(["mpirun", "--version"])
    say(mpirun[0] == 0, "mpirun", mpirun[1].splitlines()[0] if mpirun[0] == 0 else
        "not found (needed by tests of ddp and central) — apt-get install openmpi-bin")

    for lib in LIBRARIES:
        found = probe_library(probe, lib)
        if found:
            where = " (from --prefix-deps)" if probe.prefix and probe.prefix in " ".join(found[2]) else ""
            say(True, lib.name, found[0] + where + (" (tests)" if lib.tests_only else ""))
            found_versions[re.sub(r"\W", "", lib.name.split()[0]).upper()] = found[0]
            (test_cflags if lib.tests_only else cflags).extend(found[1])
            (test_libs if lib.tests_only else libs).extend(found[2])
        elif lib.tests_only:
            say(False, lib.name, f"not found (unit tests are not built) — apt-get install {lib.apt}")
        else:
            say(False, lib.name, f"not found — apt-get install {lib.apt}")
            missing.append(lib.apt)
    cmocka_found = bool(test_libs)

    cuda = probe_cuda(probe, args)
    python = probe_python()
    say(bool(python), "python", python[1] if python else
        "no python3 can import pytest (ninja test will fail) — apt-get install python3-pytest")
    ninja = run(["ninja", "--version"])
    say(ninja[0] == 0, "ninja", ninja[1] if ninja[0] == 0 else "not found — apt-get install ninja-build")

    if missing:
        print(f"configure: required libraries are missing — apt-get install {' '.join(uniq(missing))}",
              file=sys.stderr)
        return 1

    optimize = OPTIMIZE[args.debug]
    sanitize = ["-fsanitize=" + ",".join(args.sanitizers), "-fno-sanitize-recover=all",
                "-fno-omit-frame-pointer"] if args.sanitizers else []
    env_cflags = shlex.split(os.environ.get("CFLAGS", ""))
    env_ldflags = shlex.split(os.environ.get("LDFLAGS", ""))
    all_cflags = uniq(CFLAGS + optimize + sanitize + probe.cflags + cuda["cflags"] + cflags) + env_cflags
    has_cu = cuda["enabled"] and bool(find_sources(".cu"))
    test_env = ""
    if "address" in args.sanitizers or "leak" in args.sanitizers:
        os.makedirs("build", exist_ok=True)
        with open("build/lsan.supp", "w") as f:
            f.write("".join(f"leak:{s}\n" for s in LSAN_SUPPRESSIONS))
        test_env = ('LSAN_OPTIONS="$${LSAN_OPTIONS:-suppressions=$$PWD/build/lsan.supp:'
                    'print_suppressions=0:fast_unwind_on_malloc=0}" ')
    if args.sanitizers:
        test_env += 'UBSAN_OPTIONS="$${UBSAN_OPTIONS:-print_stacktrace=1}" '
    cfg = {
        "argv": argv,
        "prefix": args.prefix,
        "build_info": build_info_defines(args, found_versions, cuda),
        "env": ["env"] + [f"{k}={os.environ[k]}" for k in RECORDED_ENV if k in os.environ]
        if any(k in os.environ for k in RECORDED_ENV) else [],
        "cuda": cuda,
        "cuda_arch": args.cuda_arch,
        "cc": cc,
        "cflags": all_cflags,
        "test_cflags": uniq(test_cflags),
        "ldflags": uniq(sanitize[:1] + probe.ldflags) + env_ldflags,
        "libs": uniq(libs + cuda["libs"] + (["-lstdc++"] if has_cu else []) + SYSTEM_LIBS),
        "test_libs": uniq(test_libs),
        "python": python[0] if python else "/usr/bin/python3",
        "test_env": test_env,
        "cmocka": cmocka_found,
        "nvccflags": NVCCFLAGS + optimize + nvcc_includes(cuda["cflags"] + probe.cflags + cflags)
        + gencode_flags(args.cuda_arch),
    }
    fuzz_cc = probe_fuzzer(probe)
    if fuzz_cc:  # the library without CUDA or NVTX, instrumented for libFuzzer
        cfg["fuzz"] = {
            "cc": fuzz_cc,
            "cflags": uniq(CFLAGS + ["-O1", "-g", "-fno-omit-frame-pointer",
                                     "-fsanitize=fuzzer-no-link,address,undefined",
                                     "-fno-sanitize-recover=all"] + probe.cflags + cflags),
            "ldflags": uniq([FUZZ_SANITIZE] + probe.ldflags),
            "libs": uniq(libs + SYSTEM_LIBS),
        }
    if os.environ.get("CUDAHOSTCXX") and cuda["enabled"]:
        cfg["nvccflags"] += ["-ccbin", os.environ["CUDAHOSTCXX"]]
    nsources, ntests, has_main = write_ninja(cfg)
    mode = "debug" if args.debug else "release"
    print(f"wrote build.ninja: {nsources} sources, {ntests} unit tests, {mode}"
          + (f", -fsanitize={','.join(args.sanitizers)}" if args.sanitizers else "")
          + (", CUDA" if cuda["enabled"] else ", no CUDA")
          + ("" if has_main else f" (no {MAIN_SOURCE} yet: no program)"))
    print("next: ninja && ninja test")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
