#!/usr/bin/env python3
"""Writes the man page stratbench(1) from the program's own --help texts.

    tools/gen_man.py build/stratbench build/stratbench.1

Runs `stratbench --help`, `--version` and `COMMAND --help` for each command that --help lists,
and sets each text verbatim (.nf) in a section of its own, so the page says exactly what the
program says. Python 3 standard library only (no help2man needed). Run by ninja after each link.
"""

import os
import re
import subprocess
import sys
import time

from help_text import commands  # tools/help_text.py: shared with the other generator


def help_text(program, *args):
    """stdout of `program args` (exit status 0 expected); raises on failure."""
    p = subprocess.run([program, *args], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, STRATBENCH_DATA=os.environ.get("STRATBENCH_DATA", "")))
    if p.returncode != 0:
        raise SystemExit(f"gen_man.py: {program} {' '.join(args)} exited {p.returncode}: "
                         f"{p.stderr.strip()}")
    return p.stdout


def roff(text):
    """`text` escaped for troff and set verbatim."""
    out = []
    for line in text.rstrip("\n").splitlines():
        line = line.replace("\\", "\\e")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return ".nf\n" + "\n".join(out) + "\n.fi\n"


def main(argv):
    """Writes the page; returns the exit status."""
    if len(argv) != 2:
        print("usage: gen_man.py PROGRAM OUT", file=sys.stderr)
        return 2
    program, out = os.path.abspath(argv[0]), argv[1]
    main_help = help_text(program, "--help")
    version = help_text(program, "--version").splitlines()[0]
    m = re.match(r"stratbench (\S+)", version)
    date = time.strftime("%Y-%m-%d", time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))))
    page = [f'.TH STRATBENCH 1 "{date}" "stratbench {m.group(1) if m else ""}" "User Commands"',
            ".SH NAME", "stratbench \\- benchmark distributed data-parallel training strategies on MNIST",
            ".SH SYNOPSIS", ".B stratbench", ".I COMMAND", "[flags]", ".br",
            ".B stratbench --version", ".SH DESCRIPTION", roff(main_help)]
    for cmd in commands(main_help):
        page += [f".SH {cmd.upper()}", f"\\fBstratbench {cmd} --help\\fR:", roff(help_text(program, cmd, "--help"))]
    page += [".SH VERSION", roff(version),
             ".SH FILES", "MNIST is looked for in \\fB--data\\fR DIR, then $STRATBENCH_DATA, then the",
             "installed share/stratbench/data/mnist, the source tree the program was built from",
             "and ./data/mnist. Schemas and reports/plot.py are in share/stratbench/reports.",
             ".SH SEE ALSO", "README.md and docs/ of the source tree.", ""]
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(page))
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
