"""The package's shape: floors that only import downwards, parts with a face, and every path the
book and the README name still resolving.

The imports are read from the source (``ast``), inside functions too, so a lazy import cannot hide
a climb; ``if __name__ == "__main__":`` blocks are the command line of their module and are read too.
"""

import ast
import importlib
import importlib.util
import json
import re
from pathlib import Path

import pytest

import playground
from playground.figures.package import floor_of, import_graph, is_face, module_paths

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "playground"

# In each part, the modules that run and check the algorithms (an algorithm never imports them).
RUNS = {
    "data_parallel": {"ddp_check", "allreduce_lab", "accumulation_check"},
    "pipeline_parallel": {"report"},
    "zero": {"runs", "zero3_runs", "peak_runs"},
    "systems_map": {"tp_measure", "ring_attention_runs", "expert_parallel_runs", "compose", "compose_torch",
                    "key_bias", "placement", "cp_runs", "dropless_runs"},
    "planner": {"measure", "replay", "peer_model", "capacity_explorer", "args", "flag_values", "layout_flags", "cli",
                "step_time_cli"},
    "failures": {"checkpoint_runs", "restart_runs", "straggler_runs", "hang_runs"},
}
# The planner's floors, bottom up: command line -> plan -> (memory, step time, search) -> cost terms.
PLANNER_FLOORS = (
    {"errors", "flops", "scaling_laws", "published_runs", "efficiency_sources", "replay_cache"},
    {"ssm", "model_text", "hf_hub"},  # a hybrid's recurrent mixers, which Model holds; a Model in words; the hub cache
    {"architecture", "goodput", "efficiency", "hf_keys"},
    {"stages", "hf_families", "hf_hybrid"},  # hf_families reads nested blocks (DBRX's) with hf_keys' typed look-ups,
    # hf_hybrid Nemotron-H's blocks
    {"layout", "hf_config", "presets", "gemms"},
    {"layout_checks", "activations"},  # whether a layout can run; what a layer keeps for backward
    {"memory", "measure", "measure_mixers", "comm_costs", "moe_kernels", "kernel_rates"},
    {"costs"},
    {"layer_costs"},  # one layer's passes, priced from the cost terms
    {"published_row"},
    {"published_foundry", "published_zoo", "published_megatron", "published_gemms", "published_attention",
     "published_te_gemms", "published_fms"},
    {"published_automodel", "published_nemo"},  # beside the Model Zoo, which they draw on
    {"published_bridge", "published_bridge_ab"},  # their MoE rows reuse the shapes of the Model Zoo's and AutoModel's
    {"published_bridge_2509", "published_bridge_2604", "published_bridge_2606",  # other releases' tables, read with the same row builder
     "published_bridge_nemotron",  # 26.04.01's hybrid rows
     "published_moe_report", "published_moe_recipes"},  # the Megatron-Core MoE report's runs and Megatron-LM's
    # MoE recipes, on the same racks
    {"step_time", "published_layouts", "published_stacks", "overlap"},
    {"layout_search", "step_range", "mfu_ceiling", "published_zero_bubble"},  # the last replays schedules
    {"capacity_inputs",  # what a plan is asked about: the numbers checked, the model resolved
     "batch_split"},  # and the GPU counts and batches that would run better, each searched
    {"capacity"},
    {"replay"},
    {"peer_model"},
    {"flag_values"},
    {"layout_flags"},
    {"args"},
    {"step_time_cli"},
    {"cli"},
    {"capacity_explorer"},  # shows the command line's report of a plan
)
COMMAND_LINES = {"args", "flag_values", "layout_flags", "cli", "step_time_cli"}


MODULES = module_paths()
GRAPH = import_graph()
_is_face, _floor = is_face, floor_of


def _climbs(check) -> list[str]:
    return sorted(f"{a} -> {b}" for a, deps in GRAPH.items() for b in deps if not _is_face(a, b) and check(a, b))


# ----------------------------------------------------------------------------- floors
def test_the_import_graph_sees_imports_at_every_depth():
    assert "playground.data_parallel.ring" in GRAPH["playground.zero.zero_dp"]            # module level
    assert "playground.pipeline_parallel.gantt" in GRAPH["playground.pipeline_parallel.report"]  # in a function
    assert "playground.planner.cli" in GRAPH["playground.capacity_plan"]
    assert not _is_face("playground.zero.runs", "playground.zero") and _is_face("playground.zero", "playground.zero.runs")


def test_no_import_cycle_anywhere_counting_imports_inside_functions():
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if _is_face(v, w):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    assert cycles == []


def test_playground_itself_holds_only_the_basics_and_the_front_doors():
    top = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert top == set(playground.BASICS) | set(playground.FRONT_DOORS)
    assert len(top) <= 12
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(playground.PARTS) | set(playground.TOP)


def test_the_basics_import_only_the_basics():
    assert _climbs(lambda a, b: _floor(a)[0] == "basics" and _floor(b)[0] != "basics") == []


def test_a_part_imports_only_the_basics_and_the_parts_below_it():
    rank = {p: i for i, p in enumerate(playground.PARTS)}

    def climbs(a, b):
        (fa, _), (fb, _) = _floor(a), _floor(b)
        if fa not in rank:
            return False
        # the root (playground/__init__.py: the package's shape and the faces' loader) stands under everything
        return fb not in ("root", "basics") and (fb not in rank or rank[fb] > rank[fa])
    assert _climbs(climbs) == []


def test_nothing_imports_figures_or_bench_and_only_they_use_a_front_door():
    def climbs(a, b):
        (fa, _), (fb, _) = _floor(a), _floor(b)
        if fb in ("figures", "bench"):
            return fa != fb
        return fb == "front" and fa not in ("front", "figures", "bench")
    assert _climbs(climbs) == []


def test_algorithms_never_import_the_runs_that_check_them():
    def climbs(a, b):
        (fa, ma), (fb, mb) = _floor(a), _floor(b)
        return fa in RUNS and fa == fb and ma and ma not in RUNS[fa] and mb in RUNS[fb]
    assert _climbs(climbs) == []


def test_the_planner_flows_one_way_from_its_command_line_to_the_hardware_table():
    floor_of = {m: i for i, floor in enumerate(PLANNER_FLOORS) for m in floor}
    planner = {_floor(m)[1] for m in MODULES if _floor(m)[0] == "planner" and _floor(m)[1]}
    assert planner == set(floor_of), "every planner module has a floor"

    def climbs(a, b):
        (fa, ma), (fb, mb) = _floor(a), _floor(b)
        return fa == fb == "planner" and ma and mb and floor_of[mb] >= floor_of[ma]
    assert _climbs(climbs) == []
    # a model never imports its command line
    assert _climbs(lambda a, b: _floor(a)[0] == _floor(b)[0] == "planner" and _floor(a)[1] not in RUNS["planner"]
                   and _floor(b)[1] in COMMAND_LINES) == []


@pytest.mark.parametrize("part", playground.PARTS)
def test_each_part_names_its_public_api_in_its_init(part):
    face = importlib.import_module(f"playground.{part}")
    assert face.__doc__ and "May import" in face.__doc__, "the docstring says what the part may import"
    assert len(face.__all__) == len(set(face.__all__))
    missing = [name for name in face.__all__ if not hasattr(face, name)]
    assert missing == []
    modules = {p.stem for p in (PACKAGE / part).glob("*.py") if p.name != "__init__.py"}
    named = {m for m in modules if f"``{m}``" in face.__doc__}
    assert named == modules, "the docstring says what each module of the part holds"


def test_the_tests_mirror_the_package():
    for part in playground.PARTS:
        assert sorted((ROOT / "tests" / part).glob("test_*.py")), f"tests/{part}/ holds the tests of {part}"


# ----------------------------------------------------------------------------- names the book uses
def _texts():
    """(where, text) of the README, CONTRIBUTING, the Makefile, scripts, and every chapter cell."""
    for path in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "Makefile", *sorted((ROOT / "scripts").glob("*"))]:
        yield path.name, path.read_text()
    for path in sorted((ROOT / "chapters").iterdir()):
        if path.suffix == ".md":
            yield path.name, path.read_text()
        elif path.suffix == ".ipynb":
            for i, cell in enumerate(json.loads(path.read_text())["cells"]):
                yield f"{path.name} cell {i}", "".join(cell["source"])


COMMAND = re.compile(r"(?:python\S*|-m)\s+(?:-m\s+)?(playground(?:\.\w+)*)")
LITERALINCLUDE = re.compile(r"```\{literalinclude\}\s+(\S+)((?:\n:[\w-]+:[^\n]*)*)")


def test_every_python_m_command_named_in_the_book_and_readme_resolves():
    seen, broken = set(), []
    for where, text in _texts():
        for module in COMMAND.findall(text.replace('", "', " ")):
            if module in ("playground", "playground.x") or module.endswith("."):
                continue  # prose that names the pattern (``python -m playground.<demo>``), not a command
            seen.add(module)
            spec = importlib.util.find_spec(module)
            if spec is None:
                broken.append(f"{where}: {module} (no such module)")
                continue
            if spec.submodule_search_locations:  # a package runs its __main__
                if importlib.util.find_spec(f"{module}.__main__") is None:
                    broken.append(f"{where}: {module} (a package without __main__)")
            elif '__name__ == "__main__"' not in Path(spec.origin).read_text():
                broken.append(f"{where}: {module} (not a command)")
    assert {"playground.capacity_plan", "playground.step_time", "playground.ring_pass", "playground.bench"} <= seen
    assert broken == []


def _defines(path: Path, dotted: str) -> bool:
    body = ast.parse(path.read_text()).body
    for name in dotted.split("."):
        match = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and n.name == name]
        if not match:
            return False
        body = match[0].body
    return True


def test_every_literalinclude_path_and_pyobject_resolves():
    seen, broken = 0, []
    for where, text in _texts():
        for target, options in LITERALINCLUDE.findall(text):
            seen += 1
            path = (ROOT / "chapters" / target).resolve()
            if not path.is_file():
                broken.append(f"{where}: {target} (no such file)")
                continue
            for obj in re.findall(r":pyobject:\s*(\S+)", options):
                if not _defines(path, obj):
                    broken.append(f"{where}: {target} has no {obj}")
    assert seen >= 20 and broken == []


def test_every_package_path_named_in_prose_exists():
    broken = [f"{where}: {p}" for where, text in _texts()
              for p in re.findall(r"\bplayground/[\w/]*\w(?:\.py)?", text) if not (ROOT / p).exists()]
    assert broken == []


def test_chapters_import_a_parts_names_from_its_face():
    """``from playground.zero import ZeroDP``, not ``from playground.zero.zero_dp import ZeroDP``."""
    from_module = []
    for where, text in _texts():
        if "cell" not in where:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:  # a markdown cell
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.count(".") == 2:
                part = node.module.split(".")[1]
                if part in playground.PARTS:
                    face = importlib.import_module(f"playground.{part}")
                    if all(a.name in face.__all__ for a in node.names):
                        from_module.append(f"{where}: from {node.module} import ...")
    assert from_module == []


def test_contributing_opens_with_a_map_of_every_folder():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    head = text[: text.index("\n## ", text.index("## The package map") + 1)]
    for folder in (*playground.PARTS, *playground.TOP):
        assert f"`playground/{folder}/`" in head, folder
    assert "figures/package_map.png" in head


@pytest.mark.parametrize("part", playground.PARTS)
def test_a_parts_face_never_hides_one_of_its_modules(part):
    """``from playground.<part> import <module>`` must give the module, not a function of that name."""
    face = importlib.import_module(f"playground.{part}")
    for path in (PACKAGE / part).glob("*.py"):
        if path.name != "__init__.py" and hasattr(face, path.stem):
            assert getattr(face, path.stem) is importlib.import_module(f"playground.{part}.{path.stem}"), path.stem


@pytest.mark.parametrize("part", playground.PARTS)
def test_a_face_loads_a_module_when_one_of_its_names_is_first_used(part):
    """The face lists every public name (for completion), keeps a name once loaded as a plain attribute,
    and says which name it lacks in the usual way."""
    face = importlib.import_module(f"playground.{part}")
    assert set(face.__all__) <= set(dir(face))
    name = face.__all__[0]
    value = getattr(face, name)
    assert value is vars(face)[name], "once loaded, a plain attribute"
    with pytest.raises(AttributeError, match=f"playground.{part}.*no_such_name"):
        face.no_such_name
