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
installed tree can be moved. All or nothing (docs/faults.md): every file is first written to
a fresh temporary name in its target folder (tempfile.mkstemp: O_CREAT|O_EXCL|O_NOFOLLOW, so
never through a path that exists, a planted link included), then all are renamed into
place; a failure removes the temporary files and the folders it made. Errors are one line
naming the path and the cause: exit 2 for a prefix that cannot be installed into (not a
folder, read-only, not writable), 1 for a failure midway (a full disk). Python 3 standard
library only.
"""

import argparse
import glob
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class InstallError(Exception):
    """A failure to report as one line, with the exit status (2: bad prefix, 1: midway)."""

    def __init__(self, path, cause, status):
        super().__init__(f"install: {path}: {cause}")
        self.status = status


def cause_of(err):
    """The OSError's reason without Python's decorations ("No space left on device")."""
    return err.strerror or str(err)


def check_prefix(prefix):
    """Raises InstallError(status 2) unless `prefix`, or its nearest existing ancestor
    when it does not exist yet, is a folder this process can write into."""
    path = prefix
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    if not os.path.isdir(path):
        raise InstallError(path, "not a folder (--prefix)", 2)
    vfs = os.statvfs(path)
    if vfs.f_flag & os.ST_RDONLY:
        raise InstallError(path, "read-only file system (--prefix)", 2)
    if not os.access(path, os.W_OK | os.X_OK):
        raise InstallError(path, "permission denied (--prefix)", 2)


class Transaction:
    """The folders made and temporary files written so far, to undo on failure."""

    def __init__(self):
        self.made_dirs = []   # in the order made (parents first)
        self.temps = []       # (temporary path, final path)

    def makedirs(self, folder):
        """Makes `folder` and its missing parents, remembering each one made."""
        missing = []
        while not os.path.isdir(folder):
            if os.path.lexists(folder):
                raise InstallError(folder, "exists and is not a folder", 1)
            missing.append(folder)
            folder = os.path.dirname(folder)
        for d in reversed(missing):
            try:
                os.mkdir(d, 0o755)
            except OSError as e:
                raise InstallError(d, cause_of(e), 1) from None
            self.made_dirs.append(d)

    def write(self, src, dest, mode):
        """Copies file `src` to a new temporary file beside `dest` (created exclusively,
        never through an existing path) with permissions `mode`."""
        folder = os.path.dirname(dest)
        self.makedirs(folder)
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(dest)}.", suffix=".tmp-install",
                                       dir=folder)
        except OSError as e:
            raise InstallError(folder, cause_of(e), 1) from None
        self.temps.append((tmp, dest))
        try:
            with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
                while True:
                    chunk = inp.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
                out.flush()
                os.fchmod(out.fileno(), mode)
        except OSError as e:
            raise InstallError(dest, cause_of(e), 1) from None

    def link(self, target, dest):
        """A symbolic link `dest` -> `target`, made under a temporary name first."""
        folder = os.path.dirname(dest)
        self.makedirs(folder)
        for _ in range(100):
            tmp = os.path.join(folder, f".{os.path.basename(dest)}.{os.urandom(6).hex()}.tmp-install")
            try:
                os.symlink(target, tmp)  # fails with EEXIST on any existing path
                break
            except FileExistsError:
                continue
            except OSError as e:
                raise InstallError(dest, cause_of(e), 1) from None
        else:
            raise InstallError(folder, "no free temporary name", 1)
        self.temps.append((tmp, dest))

    def commit(self):
        """Renames every temporary file into place."""
        while self.temps:
            tmp, dest = self.temps[0]
            if os.path.isdir(dest) and not os.path.islink(dest):
                raise InstallError(dest, "is a folder", 1)
            try:
                os.replace(tmp, dest)
            except OSError as e:
                raise InstallError(dest, cause_of(e), 1) from None
            self.temps.pop(0)
            print(f"  {dest}")

    def undo(self):
        """Removes the temporary files left and the folders made (deepest first)."""
        for tmp, _ in self.temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        for d in reversed(self.made_dirs):
            try:
                os.rmdir(d)
            except OSError:
                pass


def main(argv):
    """Installs everything; returns the exit status (1: a file is missing or the install
    failed midway, 2: a bad prefix), printing one line on failure."""
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
    t = Transaction()
    try:
        check_prefix(prefix)
        for src, dest, mode in files:
            t.write(src, dest, mode)
        t.link(os.path.join("..", "share", "stratbench", "reports", "plot.py"),
               os.path.join(prefix, "bin", "stratbench-plot"))
        t.commit()
    except InstallError as e:
        t.undo()
        print(e, file=sys.stderr)
        return e.status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
