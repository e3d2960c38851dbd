"""The tarantella package has no import cycle, hidden or not, and every
module imports on its own.

  check_imports.py PACKAGE_DIR [SOURCE_DIR [ARCHITECTURE_MD]]

1. Static: the graph of sibling imports (``from . import x``, ``from .x
   import y``, ``import tarantella.x``), at the top of a module or inside a
   function, has no cycle. A function-local import may still defer a
   dependency (torch, for instance) but may not hide a cycle.
2. Dynamic: ``import tarantella.<module>`` succeeds in a fresh interpreter
   for every module.
3. With SOURCE_DIR: every module of the source tree is in PACKAGE_DIR (the
   build lists its modules one by one).
4. With ARCHITECTURE_MD (docs/architecture.md): every module and C/C++
   source of the source tree is named there (as `name`), so the map of the
   package that newcomers read lists every file.
Exits 1 naming each cycle or failing module.
"""
import ast
import os
import subprocess
import sys


def sibling_imports(path, modules):
    """{sibling: 'top' | 'local'} imported by the module at path."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = {}

    def note(name, node):
        if name in modules:
            where = "local" if node_in_function(node) else "top"
            if found.get(name) != "top":
                found[name] = where

    parents = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent

    def node_in_function(node):
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return True
        return False

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module is None:
                for alias in node.names:
                    note(alias.name, node)
            elif node.level == 1:
                note(node.module.split(".")[0], node)
            elif node.level == 0 and node.module and node.module.startswith("tarantella."):
                note(node.module.split(".")[1], node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tarantella."):
                    note(alias.name.split(".")[1], node)
    return found


def cycles(graph):
    """Every elementary cycle's node list, each reported once."""
    seen, out = set(), []

    def walk(start, node, path):
        for nxt in sorted(graph.get(node, {})):
            if nxt == start:
                key = frozenset(path)
                if key not in seen:
                    seen.add(key)
                    out.append(path + [start])
            elif nxt not in path and nxt > start:
                walk(start, nxt, path + [nxt])

    for start in sorted(graph):
        walk(start, start, [start])
    return out


def unlisted_sources(src, doc):
    """Source files of src that doc never names in backquotes."""
    text = open(doc, encoding="utf-8").read()
    kinds = (".py", ".c", ".cpp", ".h", ".hpp")
    return [f for f in sorted(os.listdir(src))
            if f.endswith(kinds) and "`%s`" % f not in text]


def main(pkg, src=None, doc=None):
    modules = sorted(f[:-3] for f in os.listdir(pkg) if f.endswith(".py") and f != "__init__.py")
    bad = 0
    if src is not None:
        for f in sorted(os.listdir(src)):
            if f.endswith(".py") and not os.path.exists(os.path.join(pkg, f)):
                print("check_imports: %s is not in the build (%s); add it to TNT_PY_MODULES in "
                      "python/CMakeLists.txt" % (f, pkg))
                bad = 1
    if doc is not None:
        for f in unlisted_sources(src, doc):
            print("check_imports: %s is not listed in %s; add it to the module table with "
                  "its one job" % (f, doc))
            bad = 1
    graph = {m: sibling_imports(os.path.join(pkg, m + ".py"), set(modules)) for m in modules}
    for cyc in cycles(graph):
        edges = ["%s -> %s (%s)" % (a, b, graph[a][b]) for a, b in zip(cyc, cyc[1:])]
        print("check_imports: import cycle: " + ", ".join(edges))
        bad = 1
    env = dict(os.environ, PYTHONPATH=os.path.dirname(pkg))
    for m in modules:
        r = subprocess.run([sys.executable, "-c", "import tarantella.%s" % m], env=env,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print("check_imports: import tarantella.%s failed:\n%s" % (m, r.stderr[-2000:]))
            bad = 1
    if not bad:
        print("check_imports: %d modules, no import cycle, each imports alone" % len(modules))
    return bad


if __name__ == "__main__":
    args = [os.path.abspath(a) for a in sys.argv[1:4]]
    sys.exit(main(*args))
