#!/usr/bin/env python3
"""Checks that the source tree keeps the shape its README's layout table shows.

    scripts/check_layout.py BUILD_DIR

Reads BUILD_DIR/compile_commands.json (every translation unit CMake builds,
with its include directories) and the sources themselves, and fails, naming
each offence, when

  - a target compiles a source file of another component, or has another
    component's private folder (a `source/` or `src/` folder) on its include
    path: each component is reached only through its public headers;
  - the include graph between the top-level folders has a cycle: shared
    pieces (shm/, options/, protocol/, nvidia/) sit below the components
    that use them, and no component includes one that includes it back.

A *component* is a top-level folder, except that tools/ and tests/ hold
several: tools/cli, tools/trace, tests/fakecuda and so on each count alone.
Tests may include what they test, so tests/* are exempt from the private-folder
rule (their own targets are still checked against each other).
"""

import json
import os
import re
import shlex
import sys
from collections import defaultdict

CONTAINERS = {"tools", "tests"}
PRIVATE_FOLDERS = {"source", "src"}
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cu", ".h", ".hpp", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]', re.MULTILINE)


def component_of(relative_path):
    """The component a repository-relative path belongs to, or None."""
    parts = relative_path.split("/")
    if len(parts) < 2:
        return None
    if parts[0] in CONTAINERS:
        return "/".join(parts[:2]) if len(parts) > 2 else parts[0]
    return parts[0]


def private_to(relative_path):
    """The component whose private folder holds this path, or None."""
    component = component_of(relative_path)
    if component is None:
        return None
    inside = relative_path.split("/")[len(component.split("/")):]
    return component if any(part in PRIVATE_FOLDERS for part in inside) else None


def include_directories(arguments):
    """The -I, -isystem and -iquote directories of one compile command."""
    directories = []
    flags = ("-I", "-isystem", "-iquote")
    it = iter(arguments)
    for argument in it:
        for flag in flags:
            if argument == flag:
                directories.append(next(it, ""))
            elif argument.startswith(flag) and len(argument) > len(flag):
                directories.append(argument[len(flag):])
    return directories


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_layout.py BUILD_DIR")
    build = os.path.realpath(sys.argv[1])
    root = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)

    def in_repo(path):
        path = os.path.realpath(path)
        if path.startswith(build + os.sep) or not path.startswith(root + os.sep):
            return None
        return os.path.relpath(path, root)

    def source_folder(binary_folder):
        """The folder of the CMakeLists.txt that made a build folder."""
        try:
            with open(os.path.join(binary_folder, "cmake_install.cmake")) as f:
                first = f.readline()
        except OSError:
            return None
        match = re.match(r"# Install script for directory: (.*)", first)
        return in_repo(match.group(1).strip()) if match else None

    offences = []
    roots = set()  # include directories inside the repository
    for entry in commands:
        arguments = entry.get("arguments") or shlex.split(entry["command"])
        directory = entry["directory"]
        source = in_repo(os.path.join(directory, entry["file"]))
        # The target's home: the folder of the CMakeLists.txt that made it,
        # which CMake names at the top of the build folder's install script.
        output = next((arguments[i + 1] for i, a in enumerate(arguments[:-1]) if a == "-o"), "")
        home = source_folder(os.path.join(directory, output.split("/CMakeFiles/")[0]))
        target_component = component_of(home + "/CMakeLists.txt") if home else None
        if source is None or target_component is None:
            continue
        if component_of(source) != target_component:
            offences.append(f"{home}: a target of {target_component} compiles {source}, "
                            f"a source of {component_of(source)}")
        for include in include_directories(arguments):
            relative = in_repo(os.path.join(directory, include))
            if relative is None:
                continue
            roots.add(relative)
            owner = private_to(relative + "/x")
            if owner and owner != target_component and not target_component.startswith("tests"):
                offences.append(f"{home}: a target of {target_component} (compiling {source}) "
                                f"has {relative}, private to {owner}, on its include path")

    # Every source file and header of the repository, and what it includes.
    files = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [s for s in subfolders
                         if not s.startswith(".") and os.path.join(folder, s) != build
                         and not os.path.exists(os.path.join(folder, s, "CMakeCache.txt"))]
        files += [os.path.relpath(os.path.join(folder, n), root)
                  for n in names if n.endswith(SOURCE_SUFFIXES)]
    known = set(files)

    def resolve(including, name):
        candidates = [os.path.normpath(os.path.join(os.path.dirname(including), name))]
        candidates += [os.path.normpath(os.path.join(r, name)) for r in sorted(roots)]
        found = [c for c in candidates if c in known]
        if not found:
            return None
        # Two folders offering the same name: the one nearest the includer.
        same = [c for c in found if component_of(c) == component_of(including)]
        return (same or found)[0]

    edges = defaultdict(dict)  # component -> component -> an example include
    for path in files:
        if component_of(path) is None:
            continue
        with open(os.path.join(root, path), errors="replace") as f:
            text = f.read()
        for name in INCLUDE.findall(text):
            target = resolve(path, name)
            if target is None:
                continue
            a, b = component_of(path), component_of(target)
            if b is not None and a != b:
                edges[a].setdefault(b, f"{path} includes {target}")

    # Cycles between components: depth-first, reporting each once.
    state, stack, seen_cycles = {}, [], set()

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                key = frozenset(cycle)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    steps = [f"  {x} -> {y}: {edges[x][y]}" for x, y in zip(cycle, cycle[1:])]
                    offences.append("include cycle " + " -> ".join(cycle) + "\n" + "\n".join(steps))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)

    for offence in offences:
        print(offence)
    if offences:
        sys.exit(f"check_layout: {len(offences)} offence(s)")
    components = sorted(set(edges) | {b for a in edges for b in edges[a]})
    print(f"check_layout: {len(components)} components, {sum(len(v) for v in edges.values())} "
          f"include edges between them, no cycle, no private sources reached")


if __name__ == "__main__":
    main()
