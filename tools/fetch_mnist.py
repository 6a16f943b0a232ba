#!/usr/bin/env python3
"""Downloads the four MNIST files stratbench reads into DIR (default data/mnist), checks
each against its known SHA-256 and writes DIR/SHA256SUMS, which stratbench checks when it
loads them (src/data/sha256sums.h). Files already present and valid are kept (no
download). Python 3 standard library only.

    tools/fetch_mnist.py [DIR]          # or: ./configure.py --fetch-mnist [DIR]

Exit status 0 when all four are valid, 1 otherwise (one line per file says why).
"""
import argparse
import gzip
import hashlib
import os
import shutil
import sys
import urllib.request

# MNIST: the four files the program reads, and the SHA-256 of their *uncompressed* contents.
MNIST_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
MNIST_MIRRORS = [
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
]
MNIST_DEFAULT_DIR = "data/mnist"


def say(ok, name, detail):
    """Prints one line: ✓ (present or fetched) or ✗ (failed)."""
    print(f"  {'✓' if ok else '✗'} {name}: {detail}", flush=True)


def sha256_uncompressed(path):
    """SHA-256 (hex) of the uncompressed contents of gzip file `path`; None if unreadable."""
    h = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    return h.hexdigest()


def mnist_file_valid(path, name):
    """Whether `path` is gzip of the MNIST file `name` with its known digest."""
    return sha256_uncompressed(path) == MNIST_SHA256[name]


def write_sha256sums(dest, names):
    """Writes dest/SHA256SUMS (sha256sum's format) for the files `names`, atomically.

    stratbench checks each file it loads against this list (src/data/sha256sums.h)."""
    lines = []
    for name in names:
        with open(os.path.join(dest, name), "rb") as f:
            lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {name}\n")
    tmp = os.path.join(dest, "SHA256SUMS.tmp")
    with open(tmp, "w") as f:
        f.writelines(lines)
    os.replace(tmp, os.path.join(dest, "SHA256SUMS"))


def fetch_mnist(dest):
    """Downloads each missing or corrupt MNIST .gz into `dest` from the first mirror that works.

    Files already present and valid are kept. Returns the exit status (0 all valid, 1 otherwise)."""
    os.makedirs(dest, exist_ok=True)
    failed = 0
    for name in MNIST_SHA256:
        path = os.path.join(dest, name + ".gz")
        if mnist_file_valid(path, name):
            say(True, name + ".gz", "present, checksum ok")
            continue
        part = path + ".part"
        for mirror in MNIST_MIRRORS:
            try:
                with urllib.request.urlopen(mirror + name + ".gz", timeout=60) as r, open(part, "wb") as f:
                    shutil.copyfileobj(r, f)
            except OSError as e:
                say(False, name + ".gz", f"{mirror}: {e}")
                continue
            if mnist_file_valid(part, name):
                os.replace(part, path)
                say(True, name + ".gz", f"downloaded from {mirror}, checksum ok")
                break
            say(False, name + ".gz", f"{mirror}: checksum mismatch")
        else:
            failed += 1
        if os.path.exists(part):
            os.remove(part)
    if failed:
        print(f"fetch_mnist: {failed} MNIST file(s) could not be fetched into {dest}", file=sys.stderr)
        return 1
    write_sha256sums(dest, [name + ".gz" for name in MNIST_SHA256])
    print(f"MNIST is in {dest}: pass --data {dest} (or set STRATBENCH_DATA={os.path.abspath(dest)} for tests)")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description="Download and check MNIST for stratbench.")
    p.add_argument("dest", metavar="DIR", nargs="?", default=MNIST_DEFAULT_DIR,
                   help=f"where the .gz files go (default {MNIST_DEFAULT_DIR})")
    return fetch_mnist(p.parse_args(argv).dest)


if __name__ == "__main__":
    sys.exit(main())
