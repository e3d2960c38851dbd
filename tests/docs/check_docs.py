#!/usr/bin/env python3
"""Keeps the documentation true to the code.

  check_docs.py names SOURCE_DIR TARANTELLA
      Every TNT_* name in README.md, docs/*.md and sbatch-templates/ exists in
      the code (the settings table, CMake, the launcher, the plugin or the
      Python package); every option given to the `tarantella` launcher in
      them is one `tarantella --help` lists; every `--tarantella=KEY=...`
      sub-option is one the SPANK plugin parses.

  check_docs.py python SOURCE_DIR
      Every Python name `tnt.a.b` in README.md, docs/*.md and
      sbatch-templates/ is one the `tarantella` package has (imported from
      PYTHONPATH, i.e. the build tree); every `sampler.NAME` there is a
      member of tnt.data.DistributedSampler and is listed in the one
      reference of the sampler, the "Sharding" section of
      docs/python-api.md.

  check_docs.py run SOURCE_DIR BUILD_DIR
      Runs every shell block marked runnable: a fenced ```sh block right after
      a line `<!-- runnable -->`. Each runs with bash -eu, in a scratch
      directory that looks like the source tree with `build` pointing at
      BUILD_DIR, HOME inside it, no PYTHONPATH and no launcher variables,
      under a time limit.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile


def doc_files(src):
    files = [os.path.join(src, "README.md")]
    files += sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    files += sorted(glob.glob(os.path.join(src, "sbatch-templates", "*")))
    return [f for f in files if os.path.isfile(f)]


def code_text(src):
    """All source the docs may name (the docs themselves excluded)."""
    parts = []
    for pattern in ("CMakeLists.txt", "Makefile", "cmake/*", "*/CMakeLists.txt",
                    "libtnt/src/**/*.[ch]", "libtnt/include/**/*.h", "pmix/**/*.[ch]",
                    "spank/*.[ch]", "python/**/*.py", "python/**/*.c", "python/*.cmake",
                    "scripts/*", "tests/**/*.sh", "tests/**/*.py", "tests/**/*.cmake",
                    "tests/**/*.c", "tests/**/CMakeLists.txt"):
        for path in glob.glob(os.path.join(src, pattern), recursive=True):
            if os.path.isfile(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    parts.append(f.read())
    return "\n".join(parts)


LAUNCH_RE = re.compile(r"(?:^|[\s`(/])tarantella((?: +(?:-[^\s`]*)(?: +[^-\s`][^\s`]*)?)+)")


def launcher_options(line):
    """The option names on a `tarantella ...` command line (not srun's
    --tarantella), up to the program or `--`."""
    names = []
    for m in LAUNCH_RE.finditer(line):
        start = m.start(1) - len("tarantella")
        if line[max(0, start - 2):start] == "--":
            continue
        for tok in m.group(1).split():
            if tok == "--":
                break
            if tok.startswith("-"):
                names.append(tok.split("=", 1)[0])
    return names


def check_names(src, tarantella):
    code = code_text(src)
    help_text = subprocess.run([tarantella, "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    valid_opts = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", help_text))
    with open(os.path.join(src, "spank", "args.c"), encoding="utf-8") as f:
        spank_keys = set(re.findall(r'strcmp\(key, "([\w-]+)"\)', f.read()))
    with open(os.path.join(src, "spank", "args.c"), encoding="utf-8") as f:
        spank_keys |= set(re.findall(r'"([\w-]+)"', f.read()))
    problems = []
    for path in doc_files(src):
        rel = os.path.relpath(path, src)
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        for no, line in enumerate(lines, 1):
            where = "%s:%d" % (rel, no)
            for name in set(re.findall(r"\bTNT_[A-Z0-9_]*[A-Z0-9]\b", line)):
                if not re.search(r"\b%s\b" % re.escape(name), code):
                    problems.append("%s: %s is not defined anywhere in the code" % (where, name))
            for opt in launcher_options(line):
                if opt not in valid_opts:
                    problems.append("%s: `tarantella %s` is not an option of the launcher "
                                    "(tarantella --help)" % (where, opt))
            for arg in re.findall(r"--tarantella=([\w=,.:-]+)", line):
                for item in arg.split(","):
                    key = item.split("=", 1)[0]
                    if key and key.upper() != key and key not in spank_keys:
                        problems.append("%s: --tarantella sub-option '%s' is not one the plugin "
                                        "parses (spank/args.c)" % (where, key))
    for p in problems:
        print("check_docs: " + p)
    print("check_docs: %d file(s) checked, %d problem(s)" % (len(doc_files(src)), len(problems)))
    return 1 if problems else 0


# `tnt.` followed by a name, not inside a path or a longer name (libtnt.so,
# tnt/tnt.h).
TNT_NAME_RE = re.compile(r"(?<![\w./-])tnt\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")
# tnt.h, tnt.pc: file names, not Python.
TNT_FILE_SUFFIXES = {"h", "pc", "so"}
# Names the docs quote on purpose although the package does not have them,
# with the reason. Keep this short.
TNT_NAMES_NOT_API = {
    ("docs/gpu.md", "rank"): "the GPU run's history quotes a test bug (tnt.rank())",
    ("docs/gpu.md", "size"): "the GPU run's history quotes a test bug (tnt.size())",
}
SAMPLER_RE = re.compile(r"\bsampler\.([A-Za-z_]\w*)")
SAMPLER_REFERENCE = ("docs/python-api.md", "## Sharding")


def resolve(module, dotted):
    obj = module
    for part in dotted.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return False
    return True


def reference_section(src, path, heading):
    with open(os.path.join(src, path), encoding="utf-8") as f:
        text = f.read()
    start = text.find("\n" + heading)
    if start < 0:
        return None
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def check_python_names(src):
    import tarantella as tnt
    sampler = tnt.data.DistributedSampler(10, 2, rank=0, size=1)
    reference = reference_section(src, *SAMPLER_REFERENCE)
    problems = []
    if reference is None:
        problems.append("%s: no section '%s' (the sampler's reference)" % SAMPLER_REFERENCE)
        reference = ""
    names = 0
    for path in doc_files(src):
        rel = os.path.relpath(path, src)
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        for no, line in enumerate(lines, 1):
            where = "%s:%d" % (rel, no)
            for dotted in sorted(set(TNT_NAME_RE.findall(line))):
                names += 1
                if dotted.split(".")[0] in TNT_FILE_SUFFIXES or (rel, dotted) in TNT_NAMES_NOT_API:
                    continue
                if not resolve(tnt, dotted):
                    problems.append("%s: tnt.%s does not exist in the tarantella package"
                                    % (where, dotted))
            for member in sorted(set(SAMPLER_RE.findall(line))):
                names += 1
                if not hasattr(sampler, member):
                    problems.append("%s: sampler.%s is not a member of "
                                    "tnt.data.DistributedSampler" % (where, member))
                elif not re.search(r"`(?:sampler\.)?%s\b" % re.escape(member), reference):
                    problems.append("%s: sampler.%s is not in the sampler's reference (%s, "
                                    "'%s'); document it there" % ((where, member) + SAMPLER_REFERENCE))
    for p in problems:
        print("check_docs: " + p)
    print("check_docs: %d file(s), %d Python name(s) checked, %d problem(s)"
          % (len(doc_files(src)), names, len(problems)))
    return 1 if problems else 0


def runnable_blocks(src):
    blocks = []
    for path in doc_files(src):
        if not path.endswith(".md"):
            continue
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "<!-- runnable -->" and i + 1 < len(lines) \
                    and lines[i + 1].strip() in ("```sh", "```bash"):
                j = i + 2
                body = []
                while j < len(lines) and lines[j].strip() != "```":
                    body.append(lines[j])
                    j += 1
                blocks.append(("%s:%d" % (os.path.relpath(path, src), i + 2), "\n".join(body)))
                i = j
            i += 1
    return blocks


def run_blocks(src, build):
    blocks = runnable_blocks(src)
    if not blocks:
        print("check_docs: no runnable blocks found")
        return 1
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("PMIX_", "SLURM_", "OMPI_", "TNT_"))
             and k not in ("PYTHONPATH", "WORLD_SIZE", "RANK", "LOCAL_RANK", "VIRTUAL_ENV")}
    clean["TNT_TIMEOUT"] = "120"
    clean["PATH"] = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    failed = 0
    for where, body in blocks:
        work = tempfile.mkdtemp(prefix="tnt-docs-")
        try:
            for name in os.listdir(src):
                if name not in ("build", ".git"):
                    os.symlink(os.path.join(src, name), os.path.join(work, name))
            os.symlink(os.path.abspath(build), os.path.join(work, "build"))
            os.mkdir(os.path.join(work, "home"))
            clean["HOME"] = os.path.join(work, "home")
            print("check_docs: running %s:\n%s" % (where, body), flush=True)
            try:
                r = subprocess.run(["bash", "-euc", body], cwd=work, env=clean, timeout=300,
                                   capture_output=True, text=True)
                out, rc = r.stdout + r.stderr, r.returncode
            except subprocess.TimeoutExpired as e:
                out, rc = (e.stdout or b"").decode() + (e.stderr or b"").decode(), "timeout"
            print("".join("  | " + l + "\n" for l in out.splitlines()), end="")
            if rc != 0:
                print("check_docs: FAILED %s (exit %s)" % (where, rc))
                failed += 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print("check_docs: %d runnable block(s), %d failed" % (len(blocks), failed))
    return 1 if failed else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "python":
        return check_python_names(os.path.abspath(sys.argv[2]))
    if len(sys.argv) != 4 or sys.argv[1] not in ("names", "run"):
        print(__doc__)
        return 2
    src = os.path.abspath(sys.argv[2])
    if sys.argv[1] == "names":
        return check_names(src, sys.argv[3])
    return run_blocks(src, sys.argv[3])


if __name__ == "__main__":
    sys.exit(main())
