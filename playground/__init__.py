"""The course's package: every chapter's runs, formulas and figures.

The package stands in floors.  At the bottom, directly in ``playground/``, the shared basics every
chapter uses (``BASICS``).  Above them one folder per part of the book (``PARTS``, bottom up): a part
may import the basics and the parts below it, never one above.  On top, the front doors the README
and the chapters name (``FRONT_DOORS``, each a command), then ``figures/`` and ``bench/``, which
nothing imports.  ``tests/test_package.py`` holds the package to this shape, and
``figures/package_map.png`` draws it from the imports the code really makes.
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
