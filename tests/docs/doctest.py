#!/usr/bin/python3
"""tests/docs/doctest.py - runs the fenced code blocks of README.md and docs/*.md,
so that the manual stays true (issue 27).

A block's info string is its language, then optional words for this test:

  ```sh                     run with bash -e -o pipefail in the page's work folder
  ```c np=4                 compiled against the library (a complete program:
                            main), run under mpiexec -n 4 (np absent: 1 process)
  ```python np=2            run with the build's python3 and python package
  ```json file=cfg.json     checked to be JSON; file=NAME also writes the block
  ```txt file=my_hosts.txt  as NAME in the work folder, for the blocks after it
  ```sh max-steps=2         every dtrain-train command of the block gets
                            --max-steps 2 appended (the command as written, made short)
  ```sh env=K=V             the block runs with K=V in its environment
  ```txt output             what the block before it printed on stdout, exactly
                            (checked; skipped when that block was)
  ```sh skip=gpu            not run here, reported with its reason: gpu (needs a
                            GPU), hosts (several machines), network (a registry or
                            another host), root, slurm, torchrun (launchers not
                            installed here), long (minutes: make run, make test,
                            benchmarks), fragment (part of a program), output (what a
                            program prints), recursive (runs this test suite)

A block that exits 77 says it cannot run here (no root, no network namespaces):
it is reported as skipped. Blocks without a language, and txt/text blocks without
file= or output, are text (shown output, diagrams): not counted. Every other block must run or say why not: a c
or python block without main or with an unknown language fails the test until
it is marked. The blocks of one page run in order in one work folder: a copy of
the source tree's top level as links, with build/ linking the build being tested,
PATH starting with a python3 that has numpy, and Open MPI allowed to run as root
and oversubscribe. Blocks that need MPI are skipped in a build without it.

  doctest.py --src DIR --build DIR --python PY --cc CC [--cflags F] [--have-mpi 0|1]
             [--list] [FILE.md ...]
Also checks every page's relative links (the file, and the heading of a #anchor).
Prints one line per block and "N passed, N failed, N skipped"; exit 1 on a failure.
"""
import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

SKIP_REASONS = {
    "gpu": "needs a GPU", "hosts": "needs several machines", "network": "needs the network",
    "root": "needs root", "slurm": "needs Slurm", "torchrun": "needs torchrun",
    "long": "takes minutes", "fragment": "part of a program", "output": "what a program prints",
    "recursive": "runs the test suite itself",
}
RUN_LANGS = {"sh", "bash", "c", "python", "json"}
TAGS = {"skip", "np", "file", "max-steps", "env", "output"}
TEXT_LANGS = {"", "txt", "text"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")


def blocks(path):
    """(line, lang, tags, text) of every fenced block of a markdown file."""
    out = []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        start, body = i + 1, []
        i += 1
        while i < len(lines):
            c = FENCE.match(lines[i])
            if c and c.group(2)[0] == fence[0] and len(c.group(2)) >= len(fence) and not c.group(3).strip():
                break
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        words = info.split()
        lang = words[0] if words else ""
        tags = {}
        for w in words[1:]:
            k, _, v = w.partition("=")
            tags[k] = v
        out.append((start, lang, tags, "\n".join(body) + "\n"))
    return out


def shorten(script, steps):
    """--max-steps N appended to every dtrain-train command (continuation lines joined)."""
    out, cur = [], ""
    for line in script.split("\n"):
        cur += line
        if line.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        if "dtrain-train" in cur and not cur.lstrip().startswith("#"):
            code, sep, comment = cur.partition(" #")
            cur = code.rstrip() + " --max-steps " + steps + (sep + comment if sep else "")
        out.append(cur)
        cur = ""
    if cur:
        out.append(cur)
    return "\n".join(out)


def _anchors(path):
    """GitHub's anchors of a page's headings"""
    out = set()
    for h in re.findall(r"^#+ (.*)$", re.sub(r"```.*?```", "", open(path, encoding="utf-8").read(), flags=re.S),
                        re.M):
        out.add(re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-"))
    return out


def broken_links(md):
    """relative links of a page whose file or heading does not exist"""
    text = re.sub(r"```.*?```", "", open(md, encoding="utf-8").read(), flags=re.S)
    bad = []
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if not os.path.exists(target):
            bad.append(link + " (no such file)")
        elif anchor and target.endswith(".md") and anchor not in _anchors(target):
            bad.append(link + " (no such heading)")
    return bad


def uses_mpi(lang, tags, text):
    return "np" in tags or re.search(r"\b(mpirun|mpiexec|dtrain-hosts)\b", text) is not None


class Runner:
    def __init__(self, a):
        self.a = a
        self.passed = self.failed = self.skipped = 0
        self.skips = {}
        self.last_out = None

    def workdir(self):
        d = tempfile.mkdtemp(prefix="dtrain-doctest-")
        for e in os.listdir(self.a.src):
            if e in ("build", ".git") or e.startswith("build-"):
                continue
            os.symlink(os.path.join(self.a.src, e), os.path.join(d, e))
        os.symlink(self.a.build, os.path.join(d, "build"))
        pybin = os.path.join(d, ".doctest-bin")
        os.mkdir(pybin)
        os.symlink(self.a.python, os.path.join(pybin, "python3"))
        return d, pybin

    def env(self, pybin):
        e = dict(os.environ)
        e["PATH"] = pybin + ":" + e.get("PATH", "")
        e["PYTHONPATH"] = os.path.join(self.a.src, "python")
        e["DTRAIN_LIBRARY"] = os.path.join(self.a.build, "lib", "libdtrain.so")
        e["PYTHONDONTWRITEBYTECODE"] = "1"
        e.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                  "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
                  "OMPI_MCA_mpi_yield_when_idle": "1"})
        e.setdefault("DTRAIN_TIMEOUT", "120")
        return e

    def launch(self, tags, cmd):
        np_ = tags.get("np")
        if np_:
            return ["mpiexec", "-n", np_] + cmd
        return cmd

    def run_block(self, where, lang, tags, text, wd, env):
        """None (passed), "SKIP" (exit 77) or what went wrong; self.last_out: its stdout"""
        self.last_out = None
        if "env" in tags:
            env = dict(env)
            k, _, v = tags["env"].partition("=")
            env[k] = v
        if lang in ("sh", "bash"):
            if "max-steps" in tags:
                text = shorten(text, tags["max-steps"])
            path = os.path.join(wd, ".doctest-block.sh")
            open(path, "w").write(text)
            cmd = ["bash", "-e", "-o", "pipefail", path]
        elif lang == "c":
            if not re.search(r"\bint\s+main\s*\(", text):
                return "a C block without main: make it a whole program or mark it skip=fragment"
            src, exe = os.path.join(wd, ".doctest-block.c"), os.path.join(wd, ".doctest-block")
            open(src, "w").write(text)
            cc = [self.a.cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-D_POSIX_C_SOURCE=200809L"] + \
                shlex.split(self.a.cflags) + ["-I", os.path.join(self.a.src, "include"), src, "-o", exe,
                                               "-L", os.path.join(self.a.build, "lib"), "-ldtrain",
                                               "-Wl,-rpath," + os.path.join(self.a.build, "lib"), "-lm"]
            r = subprocess.run(cc, cwd=wd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode:
                return "does not compile:\n" + r.stdout
            cmd = self.launch(tags, [exe])
        elif lang == "python":
            if "np" not in tags and "import" not in text:
                return "a python block that imports nothing: mark it skip=fragment"
            path = os.path.join(wd, ".doctest-block.py")
            open(path, "w").write(text)
            cmd = self.launch(tags, [self.a.python, path])
        elif lang == "json":
            try:
                json.loads(text)
            except ValueError as e:
                return "not JSON: %s" % e
            return None
        else:
            return "language '%s' is not run here: mark it skip=REASON" % lang
        try:
            r = subprocess.run(cmd, cwd=wd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, errors="replace", timeout=self.a.timeout)
        except subprocess.TimeoutExpired:
            return "timed out after %d s" % self.a.timeout
        if r.returncode == 77:
            return "SKIP"
        if r.returncode:
            return "exit status %d:\n%s\n%s" % (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
        self.last_out = r.stdout
        return None

    def page(self, md):
        rel = os.path.relpath(md, self.a.src)
        bad = broken_links(md)
        if bad:
            self.fail(rel, "links to nothing: " + ", ".join(bad))
        wd, pybin = self.workdir()
        env = self.env(pybin)
        try:
            self.last_out = None
            for line, lang, tags, text in blocks(md):
                where = "%s:%d" % (rel, line)
                bad = sorted(set(tags) - TAGS)
                if bad:
                    self.fail(where, "unknown word(s) in the info string: %s (known: %s)" % (bad, sorted(TAGS)))
                    continue
                if "file" in tags:
                    open(os.path.join(wd, tags["file"]), "w").write(text)
                if "output" in tags:
                    if self.a.list:
                        continue
                    if self.last_out is None:
                        self.skipped += 1
                        self.skips["output"] = self.skips.get("output", 0) + 1
                        print("SKIP %s output (the block before it did not run)" % where)
                    elif self.last_out.rstrip() == text.rstrip():
                        self.passed += 1
                        print("ok   %s output (equal to what the block before printed)" % where)
                    else:
                        self.fail(where, "the block before printed something else:\n" + self.last_out[-3000:])
                    continue
                if lang in TEXT_LANGS and "skip" not in tags:
                    continue
                reason = tags.get("skip")
                if reason is not None and reason not in SKIP_REASONS:
                    self.fail(where, "unknown skip reason '%s' (one of %s)" % (reason, ", ".join(SKIP_REASONS)))
                    continue
                if reason is None and lang not in RUN_LANGS:
                    self.fail(where, "language '%s' is not run here: mark it skip=REASON" % lang)
                    continue
                if reason is None and not self.a.have_mpi and lang != "json" and uses_mpi(lang, tags, text):
                    reason = "no-mpi"
                if reason is not None:
                    self.last_out = None
                    self.skipped += 1
                    self.skips[reason] = self.skips.get(reason, 0) + 1
                    print("SKIP %s %s (%s)" % (where, lang, SKIP_REASONS.get(reason, "this build has no MPI")))
                    continue
                if self.a.list:
                    print("RUN  %s %s %s" % (where, lang, " ".join("%s=%s" % kv for kv in tags.items())))
                    continue
                t0 = time.time()
                err = self.run_block(where, lang, tags, text, wd, env)
                if err == "SKIP":
                    self.skipped += 1
                    self.skips["exit-77"] = self.skips.get("exit-77", 0) + 1
                    print("SKIP %s %s (it exited 77: cannot run here)" % (where, lang))
                elif err:
                    self.fail(where, err)
                else:
                    self.passed += 1
                    print("ok   %s %s (%.1f s)" % (where, lang, time.time() - t0))
                sys.stdout.flush()
        finally:
            shutil.rmtree(wd, ignore_errors=True)

    def fail(self, where, why):
        self.failed += 1
        print("FAIL %s: %s" % (where, why))


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--cflags", default="")
    ap.add_argument("--have-mpi", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--list", action="store_true", help="say what would run, run nothing")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args(argv[1:])
    a.src, a.build = os.path.realpath(a.src), os.path.realpath(a.build)
    files = a.files or [os.path.join(a.src, "README.md")] + sorted(glob.glob(os.path.join(a.src, "docs", "*.md")))
    r = Runner(a)
    t0 = time.time()
    for md in files:
        r.page(os.path.realpath(md))
    print("doctest: %d pages, %.0f s; skipped by reason: %s" % (
        len(files), time.time() - t0, ", ".join("%s %d" % kv for kv in sorted(r.skips.items())) or "none"))
    print("%d passed, %d failed, %d skipped" % (r.passed, r.failed, r.skipped))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
