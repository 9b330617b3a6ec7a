"""The planner's one error: bad or contradictory input, named in one line.

Every planner module raises it; the command lines turn it into one line on stderr and exit status 2.
"""

__all__ = ["PlanError"]


class PlanError(ValueError):
    """Bad or contradictory planner input; the message names the problem."""
