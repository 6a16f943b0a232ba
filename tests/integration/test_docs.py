"""Docs that run: every ```sh block of README.md and docs/*.md is executed, or says why not.

Each block runs with `bash -e` in a scratch folder that looks like a fresh checkout (a
symbolic link to each top-level entry of the repository, so `build/stratbench`,
`reports/plot.py` and `data/mnist` resolve, while new files land in the scratch folder),
with the build folder first on PATH. The blocks of one file share the folder and run in
order, as a reader would type them.

Markers: an HTML comment right above the fence, directives separated by ';':

    <!-- doc-test: skip KIND: why -->           not run; KIND is one of SKIP_KINDS
    <!-- doc-test: needs PATH -->               run only where PATH exists (else skipped)
    <!-- doc-test: before COMMAND -->           run COMMAND first (e.g. make the report it reads)
    <!-- doc-test: replace "FROM" "TO" -->      run with FROM replaced by TO (a smaller run;
                                                 replaces apply in order, after the befores)

and always, so that CI stays short: every `stratbench train` and `stratbench sweep` gets
`--max-steps 20` right after the command word (a later --max-steps in the doc still wins).
`-s` prints each command as run. Runs in `ninja test`; all blocks take well under 2 minutes.
"""

import os
import pathlib
import re
import shlex
import subprocess
import time

import pytest

from conftest import REPO_ROOT, build_path, child_env

DOCS = ["README.md"] + sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "docs").glob("*.md"))
SKIP_KINDS = {
    "gpu": "needs an NVIDIA GPU",
    "cluster": "needs several hosts (a hostfile of real machines)",
    "root": "needs root and network namespaces (tests/cluster runs the same as tests)",
    "slurm": "needs a Slurm cluster",
    "network": "downloads packages or data",
    "build": "configures or builds the tree itself (CI's own steps: .ci/run)",
    "bench": "a timing benchmark of minutes",
}
FENCE = re.compile(r"(?:^<!--\s*doc-test:(?P<marker>.*?)-->\s*\n)?^```(?P<lang>\w*)[^\n]*\n"
                   r"(?P<body>.*?)^```\s*$", re.M | re.S)
STEP_LIMIT = "--max-steps 20"
# A block's training run scores 1,000 test images, not 10,000: the block checks that the
# command runs (exit 0), not its accuracy; the vit's full evaluation took 2.5 of its 3.3 s
# (2026-11-29). Accuracy is test_train's, test_cnn's and test_vit's.
EVAL_LIMIT = "--eval-samples 1000"
BLOCK_TIMEOUT_S = 120


def blocks(doc):
    """[(line, body, directives)] of the ```sh blocks of `doc` (a path relative to the repo)."""
    text = (REPO_ROOT / doc).read_text()
    out = []
    for m in FENCE.finditer(text):
        if m.group("lang") not in ("sh", "bash", "shell"):
            continue
        line = text[:m.start("lang")].count("\n") + 1
        out.append((line, m.group("body"), parse_marker(m.group("marker") or "", doc, line)))
    return out


def parse_marker(marker, doc, line):
    """The directives of one marker comment as a list of (verb, args)."""
    directives = []
    parts = re.split(r";\s*(?=(?:skip|needs|before|replace)\s)", marker)  # ';' may be in a reason
    for part in filter(None, (p.strip() for p in parts)):
        verb, _, rest = part.partition(" ")
        if verb == "skip":
            kind = rest.split(":")[0].strip()
            assert kind in SKIP_KINDS, f"{doc}:{line}: unknown skip kind '{kind}' ({', '.join(SKIP_KINDS)})"
            directives.append(("skip", rest))
        elif verb == "replace":
            pair = shlex.split(rest)
            assert len(pair) == 2, f"{doc}:{line}: replace takes \"FROM\" \"TO\""
            directives.append(("replace", pair))
        elif verb in ("before", "needs"):
            directives.append((verb, rest.strip()))
        else:
            raise AssertionError(f"{doc}:{line}: unknown doc-test directive '{verb}'")
    return directives


def tiny(body):
    """`body` with --max-steps 20 after every `stratbench train|sweep`, and --eval-samples
    1000 after every `stratbench train`."""
    body = re.sub(r"(\bstratbench train)(?=\s)", rf"\1 {EVAL_LIMIT}", body)
    return re.sub(r"(\bstratbench (?:train|sweep))(?=\s)", rf"\1 {STEP_LIMIT}", body)


def scratch_checkout(folder):
    """Makes `folder` look like the repository: a link to each top-level entry but runs/."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in REPO_ROOT.iterdir():
        if entry.name not in ("runs", ".git", ".pytest_cache") and not (folder / entry.name).exists():
            (folder / entry.name).symlink_to(entry)
    build = build_path()
    if build != REPO_ROOT / "build":  # STRATBENCH_BUILD elsewhere: build/stratbench is that one
        (folder / "build").unlink()
        (folder / "build").symlink_to(build)


def run_block(body, cwd, env):
    """Runs `body` under bash -e in `cwd`; returns (exit status, output, seconds)."""
    start = time.monotonic()
    p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


def test_every_block_is_marked_or_runs():
    """Every block parses (markers are known); prints the skipped ones with their reasons."""
    total = 0
    for doc in DOCS:
        for line, _, directives in blocks(doc):
            total += 1
            for verb, args in directives:
                if verb == "skip":
                    print(f"{doc}:{line}: skipped: {args} ({SKIP_KINDS[args.split(':')[0].strip()]})")
    assert total > 10


@pytest.mark.parametrize("doc", DOCS)
def test_doc_blocks_run(doc, stratbench, tmp_path):
    found = blocks(doc)
    runnable = [b for b in found if not any(v == "skip" for v, _ in b[2])]
    if not runnable:
        pytest.skip(f"{doc}: no runnable ```sh block ({len(found)} marked skip)")
    env = child_env()
    env["PATH"] = f"{build_path()}{os.pathsep}{env.get('PATH', '')}"
    env.pop("STRATBENCH_DATA", None)  # the docs' defaults: the program finds data/mnist itself
    env["MPLBACKEND"] = "Agg"
    cwd = tmp_path / "checkout"
    scratch_checkout(cwd)
    failures = []
    for line, body, directives in runnable:
        missing = [a for v, a in directives if v == "needs" and not pathlib.Path(a).exists()]
        if missing:
            print(f"{doc}:{line}: skipped: needs {missing[0]}")
            continue
        for verb, args in directives:
            if verb == "replace":
                assert args[0] in body, f"{doc}:{line}: replace: '{args[0]}' is not in the block"
                body = body.replace(*args)
        script = tiny("\n".join([a for v, a in directives if v == "before"] + [body]))
        print(f"--- {doc}:{line}\n{script}")
        try:
            rc, output, seconds = run_block(script, cwd, env)
        except subprocess.TimeoutExpired:
            failures.append(f"{doc}:{line}: still running after {BLOCK_TIMEOUT_S} s")
            continue
        print(f"    exit {rc} in {seconds:.1f} s")
        if rc != 0:
            failures.append(f"{doc}:{line}: exit status {rc}\n$ {script}\n{output[-3000:]}")
    assert not failures, "\n\n".join(failures)


def help_block(readme, cmd):
    """The ``` block that follows the heading or sentence naming `stratbench CMD --help`."""
    m = re.search(rf"`stratbench {cmd} --help`[^\n]*\n(?:[^\n]*\n){{0,3}}?```\n(.*?)^```", readme,
                  re.S | re.M)
    assert m, f"README.md: no flag block after `stratbench {cmd} --help`"
    return m.group(1)


@pytest.mark.parametrize("cmd", ["train", "sweep", "compare"])
def test_readme_flag_blocks_equal_help(cmd, stratbench):
    """README's flag block of CMD is `stratbench CMD --help`'s output from its first line on."""
    block = help_block((REPO_ROOT / "README.md").read_text(), cmd)
    proc = subprocess.run([str(stratbench), cmd, "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    first = block.splitlines()[0]
    assert first in proc.stdout, f"README.md's {cmd} flag block starts with a line --help lacks: {first}"
    shown = proc.stdout[proc.stdout.index(first):]
    assert block == shown, f"README.md's `stratbench {cmd} --help` block differs from the program's; " \
                           f"paste this:\n{shown}"
