"""The capacity planner's command: ``python -m playground.capacity_plan --help``.

A front door only: the planner lives in ``playground/planner/`` (its ``__init__`` lists what it
offers), and this command is ``playground.planner.cli.main``.
"""

from playground.planner.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
