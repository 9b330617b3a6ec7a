"""The course's package: every chapter's runs, formulas and figures.

The package stands in floors.  At the bottom, directly in ``playground/``, the shared basics every
chapter uses (``BASICS``).  Above them one folder per part of the book (``PARTS``, bottom up): a part
may import the basics and the parts below it, never one above.  On top, the front doors the README
and the chapters name (``FRONT_DOORS``, each a command), then ``figures/`` and ``bench/``, which
nothing imports.  ``tests/test_package.py`` holds the package to this shape, and
``figures/package_map.png`` draws it from the imports the code really makes.  Each part's face (its
``__init__``) names its public API and loads a module only when one of its names is first used
(``lazy_face``), so that a command which needs arithmetic alone never waits for torch.
"""

# The shared basics, each used by several parts (what each holds: CONTRIBUTING.md).
BASICS = ("launch", "launch_errors", "launch_cli", "comm", "memory", "model", "hardware", "results",
          "plotting")

# One folder per part of the book, bottom up: each may import the basics and the folders before it.
PARTS = ("data_parallel", "pipeline_parallel", "zero", "systems_map", "planner", "failures")

# Commands the README and the chapters name: ``python -m playground.<name>``.
FRONT_DOORS = ("ring_pass", "capacity_plan", "step_time")

# On top: figure functions and benchmarks, imported by nothing in the package.
TOP = ("figures", "bench")


def lazy_face(package: str, modules: dict[str, tuple[str, ...]]):
    """A part's face (its ``__init__``) that loads each of its modules the first time one of its names is
    used (PEP 562): ``modules`` maps a module of the part to the names the face takes from it, ``"name"`` or
    ``"name as other"``; the module is a name of the face too.  ``from playground.zero import ZeroDP`` works
    as an eager import would, but a command that needs only arithmetic (the planner's) starts without
    importing torch for runs it never makes.  Returns the face's ``__getattr__`` and ``__dir__``."""
    import importlib
    import sys

    homes = {}
    for module, names in modules.items():
        homes[module] = (module, None)
        for entry in names:
            attr, _, alias = entry.partition(" as ")
            homes[alias or attr] = (module, attr)

    def __getattr__(name):
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = homes[name]
        value = importlib.import_module(f"{package}.{module}")
        if attr is not None:
            value = getattr(value, attr)
        setattr(sys.modules[package], name, value)   # from now on a plain attribute
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__
