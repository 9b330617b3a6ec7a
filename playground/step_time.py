"""The step-time model's command: ``python -m playground.step_time --help``.

A front door only: the model is ``playground.planner.step_time.predict``, and this command is
``playground.planner.step_time_cli.main``.
"""

from playground.planner.step_time_cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
