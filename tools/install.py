#!/usr/bin/env python3
"""Installs a built stratbench under a prefix: what `ninja install` runs.

    tools/install.py --prefix DIR [--build build]       ($DESTDIR, when set, is prepended)

    DIR/bin/stratbench                                  the program
    DIR/bin/stratbench-plot -> ../share/stratbench/reports/plot.py
    DIR/share/stratbench/reports/                       plot.py, the JSON schemas, README.md
    DIR/share/stratbench/data/mnist/                    the shipped MNIST files and SHA256SUMS
    DIR/share/man/man1/stratbench.1                     man page (tools/gen_man.py)
    DIR/share/bash-completion/completions/stratbench    bash completion (tools/gen_completion.py)

The program finds its data in DIR/share/stratbench/data/mnist by its own location, so an
installed tree can be moved. Each file is copied to a temporary name and renamed into place.
Python 3 standard library only.
"""

import argparse
import glob
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def install(src, dest, mode):
    """Copies file `src` to `dest` (creating folders) with permissions `mode`, atomically."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = dest + ".tmp-install"
    shutil.copyfile(src, tmp)
    os.chmod(tmp, mode)
    os.replace(tmp, dest)
    print(f"  {dest}")


def main(argv):
    """Installs everything; returns the exit status (1 when something is missing)."""
    p = argparse.ArgumentParser(description="Install stratbench under --prefix ($DESTDIR first).")
    p.add_argument("--prefix", required=True, help="install prefix, e.g. /usr/local")
    p.add_argument("--build", default="build", help="the build folder (default build)")
    args = p.parse_args(argv)
    build = os.path.join(ROOT, args.build)
    destdir = os.environ.get("DESTDIR", "")
    prefix = destdir + os.path.abspath(args.prefix) if destdir else os.path.abspath(args.prefix)
    share = os.path.join(prefix, "share", "stratbench")
    files = [(os.path.join(build, "stratbench"), os.path.join(prefix, "bin", "stratbench"), 0o755),
             (os.path.join(ROOT, "reports", "plot.py"), os.path.join(share, "reports", "plot.py"), 0o755),
             (os.path.join(ROOT, "reports", "README.md"), os.path.join(share, "reports", "README.md"), 0o644),
             (os.path.join(build, "stratbench.1"), os.path.join(prefix, "share", "man", "man1", "stratbench.1"), 0o644),
             (os.path.join(build, "stratbench.bash"),
              os.path.join(prefix, "share", "bash-completion", "completions", "stratbench"), 0o644)]
    files += [(s, os.path.join(share, "reports", os.path.basename(s)), 0o644)
              for s in sorted(glob.glob(os.path.join(ROOT, "reports", "*.schema.json")))]
    files += [(s, os.path.join(share, "data", "mnist", os.path.basename(s)), 0o644)
              for s in sorted(glob.glob(os.path.join(ROOT, "data", "mnist", "*")))
              if os.path.isfile(s) and not s.endswith((".part", ".tmp"))]
    missing = [s for s, _, _ in files if not os.path.isfile(s)]
    if missing:
        print(f"install: {missing[0]} is missing (run ninja first)", file=sys.stderr)
        return 1
    print(f"installing stratbench into {prefix}")
    for src, dest, mode in files:
        install(src, dest, mode)
    link = os.path.join(prefix, "bin", "stratbench-plot")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.join("..", "share", "stratbench", "reports", "plot.py"), link)
    print(f"  {link} -> ../share/stratbench/reports/plot.py")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
