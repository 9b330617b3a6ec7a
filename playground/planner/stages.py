"""How pipeline stages split a model's layers: as Megatron-Core places them, or as the user says.

``stage_layers`` gives each stage's layers, ``even_chunks`` whether each stage cuts into equal
virtual-stage chunks, ``placement_note`` says it in words; ``playground.planner.layout`` re-exports
all three.  Each takes a ``Layout`` (not imported: the layout module imports this one).
"""

from __future__ import annotations

import math
from playground.planner.architecture import Model
from playground.planner.errors import PlanError

__all__ = ["stage_layers", "even_chunks", "placement_note"]


def stage_layers(model: Model, layout) -> tuple[int, ...]:
    """Transformer layers on each pipeline stage, first to last.

    As Megatron-Core places them: evenly when PP divides the layers; else, when it divides the
    layers plus two, the embedding and the loss each count as one layer (its
    ``--account-for-embedding-in-pipeline-split`` and ``--account-for-loss-in-pipeline-split``:
    Llama 3 405B's 126 layers on 16 stages are 7 + 14 x 8 + 7); else the middle stages take
    ceil(l / p) each and the first and last share the rest (``--decoder-first/last-pipeline-
    num-layers``), the first taking the smaller half.  ``first_stage_layers`` and
    ``last_stage_layers`` set those two by hand; the middle stages then split the rest evenly.
    """
    l, p = model.layers, layout.pp
    first, last = layout.first_stage_layers, layout.last_stage_layers
    if p == 1:
        return (l,)
    if first is not None or last is not None:
        middle_total = l - (first or 0) - (last or 0)
        open_stages = p - (first is not None) - (last is not None)
        if open_stages == 0:
            if middle_total:
                raise PlanError(f"first + last stage layers must be the {l} layers with PP=2")
            return (first, last)
        if middle_total < open_stages or middle_total % open_stages:
            raise PlanError(f"the {middle_total} layers left after the first/last stages do not split evenly "
                            f"over the other {open_stages} stages")
        q = middle_total // open_stages
        stages = [q] * p
        if first is not None:
            stages[0] = first
        if last is not None:
            stages[-1] = last
        return tuple(stages)
    if l % p == 0:
        return (l // p,) * p
    if (l + 2) % p == 0 and (l + 2) // p >= 2:
        q = (l + 2) // p
        return (q - 1,) + (q,) * (p - 2) + (q - 1,)
    q = math.ceil(l / p)
    rest = l - q * (p - 2)
    if p == 2 or rest < 2:
        q = l // p
        stages = [q] * p
        for i in range(l - q * p):  # the extra layers go to the last stages (the first holds the embedding)
            stages[-1 - i] += 1
        return tuple(stages)
    return (rest // 2,) + (q,) * (p - 2) + (rest - rest // 2,)


def even_chunks(model: Model, layout) -> bool:
    """Whether Megatron-Core can cut every stage into ``vpp`` equal model chunks (the embedding and the
    loss counted as layers when that is how the stages were placed).  The step-time model itself
    takes any split; the search proposes only these."""
    if layout.vpp == 1:
        return True
    stages = stage_layers(model, layout)
    return all(x % layout.vpp == 0 for x in stages) or \
        (layout.first_stage_layers is None and (model.layers + 2) % (layout.pp * layout.vpp) == 0)


def placement_note(model: Model, layout) -> str:
    """How the layers sit on the stages, in words (for the report); a hybrid's layers are its MLPs or MoEs, each
    with its share of the mixers."""
    stages = stage_layers(model, layout)
    hybrid = "" if not model.is_hybrid else (
        f" (each an {'MoE' if model.is_moe else 'MLP'} with its share of the {model.ssm_layers} recurrent and "
        f"{round(model.attention_share * model.layers)} attention mixers)")
    if len(set(stages)) == 1:
        return (f"{model.layers} layers{hybrid}, {stages[0]} per stage" if layout.pp > 1
                else f"{model.layers} layers{hybrid}")
    middle = stages[1:-1]
    mid = f" + {len(middle)} x {middle[0]}" if middle and len(set(middle)) == 1 else \
        "".join(f" + {x}" for x in middle)
    why = (" (the embedding and the loss each count as a layer)"
           if layout.first_stage_layers is None and (model.layers + 2) % layout.pp == 0 else "")
    return f"{model.layers} layers{hybrid} as {stages[0]}{mid} + {stages[-1]}{why}"
