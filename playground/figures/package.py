"""The package map (CONTRIBUTING.md, README): its floors, and the imports the code really makes.

``import_graph()`` reads every module's imports from the source (``ast``; inside functions too),
so the picture and ``tests/test_package.py`` check the same edges; the figure draws one box per
floor and one arrow per pair of floors that an import joins, with how many modules it joins.
"""

from __future__ import annotations

import ast
import textwrap
from collections import Counter
from functools import lru_cache
from pathlib import Path

from matplotlib.patches import FancyBboxPatch

import playground
from playground.figures import figure
from playground.plotting import COLORS, new_figure

__all__ = ["PACKAGE", "module_paths", "import_graph", "is_face", "floor_of", "floor_edges"]

PACKAGE = Path(playground.__file__).resolve().parent


@lru_cache(maxsize=1)
def module_paths() -> dict[str, Path]:
    """{dotted module name: its file} for every module of the package (read once; do not mutate)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """{module: the playground modules it imports}, read from the source at any depth of its code."""
    paths = module_paths()

    def resolve(name):
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {resolve(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                found |= {resolve(f"{base}.{a.name}") or resolve(base) for a in node.names}
        graph[module] = {m for m in found if m and m != module}
    return graph


def is_face(importer: str, imported: str) -> bool:
    """A package's ``__init__`` importing its own modules is its face, not a dependency."""
    return module_paths()[importer].name == "__init__.py" and imported.startswith(importer + ".")


def floor_of(module: str) -> tuple[str, str]:
    """(floor, module within it): the floor is 'root', 'basics', 'front', a part, 'figures' or 'bench'."""
    parts = module.split(".")
    if len(parts) == 1:
        return "root", ""
    if parts[1] in playground.BASICS:
        return "basics", parts[1]
    if parts[1] in playground.FRONT_DOORS:
        return "front", parts[1]
    return parts[1], ".".join(parts[2:])


def floor_edges() -> Counter:
    """{(floor, floor it imports): how many modules of the first import the second}."""
    graph, edges = import_graph(), Counter()
    for a, deps in graph.items():
        for fb in {floor_of(b)[0] for b in deps if not is_face(a, b)}:
            fa = floor_of(a)[0]
            if fa != fb and "root" not in (fa, fb):
                edges[fa, fb] += 1
    return edges


FLOORS = ("basics", *playground.PARTS, "front", "figures", "bench")  # bottom up
FLOOR_LABELS = {"basics": "playground/*.py (basics)", "front": "front doors", "figures": "playground/figures/",
                "bench": "playground/bench/"}


@figure("package_map.png")
def package_map():
    """Left: what each floor holds.  Right: which floor imports which (modules that do), all below
    the diagonal: every import points down."""
    edges = floor_edges()
    members: dict[str, list[str]] = {f: [] for f in FLOORS}
    for module in module_paths():
        floor, name = floor_of(module)
        if floor in members and name and "." not in name and name != "__main__":
            members[floor].append(name)
    n = len(FLOORS)
    fig, (left, right) = new_figure(ncols=2, width=11.0, height=6.4, gridspec_kw={"width_ratios": [1.35, 1]})
    for y, floor in enumerate(FLOORS):
        colour = COLORS[(y - 1) % len(COLORS)] if floor in playground.PARTS else "0.6"
        left.add_patch(FancyBboxPatch((0.01, y + 0.08), 0.98, 0.84, boxstyle="round,pad=0.005",
                                      facecolor=colour, alpha=0.22, edgecolor=colour))
        left.text(0.03, y + 0.74, FLOOR_LABELS.get(floor, f"playground/{floor}/"), fontsize=9, weight="bold",
                  va="center")
        names = sorted(members[floor], key=lambda m: (m in ("__main__",), m))
        text = ", ".join(f"-m playground.{m}" for m in names) if floor == "front" else ", ".join(names)
        lines, size = textwrap.wrap(text, 92), 7
        if len(lines) > 2:   # a long floor: smaller type, wider lines, hung below its title
            lines, size = textwrap.wrap(text, 122), 6.1
        if len(lines) > 3:   # longer still: smaller again, so that four lines stay inside the box
            lines, size = textwrap.wrap(text, 158), 5.0
        if len(lines) > 4:   # the planner's published tables, named as one family so the box holds them
            tables = [m for m in names if m.startswith("published_")]
            text = ", ".join([m for m in names if m not in tables] + [f"published_* ({len(tables)} tables of runs)"])
            lines = textwrap.wrap(text, 158)
        left.text(0.03, y + 0.60, "\n".join(lines), fontsize=size, va="top", linespacing=1.05)
    left.set(xlim=(0, 1), ylim=(0, n))
    left.axis("off")
    left.set_title("floors, bottom up: each may import the floors below it", fontsize=10)
    short = {"basics": "basics", "front": "front", "data_parallel": "data_par.", "pipeline_parallel": "pipeline",
             "systems_map": "sys. map"}
    for y, importer in enumerate(FLOORS):
        for x, imported in enumerate(FLOORS):
            allowed = x < y
            right.add_patch(FancyBboxPatch((x + 0.05, y + 0.05), 0.9, 0.9, boxstyle="square,pad=0",
                                           facecolor=COLORS[2] if allowed else "0.93", alpha=0.18 if allowed else 1,
                                           edgecolor="white"))
            count = edges.get((importer, imported), 0)
            if count:
                right.text(x + 0.5, y + 0.5, str(count), ha="center", va="center", fontsize=9,
                           color="black" if allowed else COLORS[3], weight="bold")
    right.set(xlim=(0, n), ylim=(0, n))
    right.set_xticks([x + 0.5 for x in range(n)], [short.get(f, f) for f in FLOORS], rotation=60, fontsize=8)
    right.set_yticks([y + 0.5 for y in range(n)], [short.get(f, f) for f in FLOORS], fontsize=8)
    right.set_xlabel("imported floor")
    right.set_ylabel("importing floor")
    right.set_title("modules that import it (green: allowed, below the diagonal)", fontsize=10)
    right.grid(False)
    return fig
