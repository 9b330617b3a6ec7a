"""How many bytes of model state one data-parallel rank holds, stage by stage (ZeRO).

Training with Adam keeps three kinds of *model state* per parameter: the parameter itself, its
gradient, and the optimizer state.  With mixed precision (Rajbhandari et al., 2020, Sec. 3.1)
that is 2 bytes of bf16/fp16 parameter, 2 bytes of gradient and K = 12 bytes of fp32 master
weight, momentum and variance: 16 bytes per parameter.  In all-fp32 training it is 4 + 4 + 8.

Plain data parallelism (stage 0) replicates all of it on each of the d ranks.  ZeRO shards
the optimizer state (stage 1), then the gradients too (stage 2), then the parameters (stage 3).
For Ψ parameters the bytes per rank are

    stage 0: (P + G + K)·Ψ         stage 2: P·Ψ + (G + K)·Ψ/d
    stage 1: (P + G)·Ψ + K·Ψ/d   stage 3: (P + G + K)·Ψ/d

with P, G, K the bytes per parameter of parameter, gradient and optimizer state.  ``predicted``
evaluates these formulas; ``exact_bytes`` adds what a real implementation meets: a flat buffer
of ``numel`` elements splits into shards that differ by one element when d does not divide
it (``playground.data_parallel.shards.shard_bounds``), so a rank holds ⌈numel/d⌉ or ⌊numel/d⌋ elements.
``PAPER_TABLE_1`` is Table 1 of the ZeRO paper, which ``paper_table`` regenerates.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from playground.data_parallel.shards import shard_bounds

__all__ = ["Recipe", "RECIPES", "STAGES", "predicted", "exact_bytes", "comm_elements",
           "accumulation_comm_elements", "hsdp_comm_elements",
           "PAPER_MODELS", "PAPER_DP_DEGREES", "PAPER_TABLE_1", "paper_table", "explorer"]

STAGES = (0, 1, 2, 3)
STAGE_NAMES = {0: "DP (stage 0)", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


@dataclass(frozen=True)
class Recipe:
    """Bytes per parameter of each kind of model state."""
    name: str
    parameter: int   # P: the copy forward and backward compute with
    gradient: int    # G: what backward writes, and what is reduced across ranks
    optimizer: int   # K: everything the optimizer keeps (fp32 master weights, moments)

    @property
    def total(self) -> int:
        return self.parameter + self.gradient + self.optimizer


RECIPES = {
    # bf16 parameter and gradient, fp32 master weight + Adam momentum + variance (K = 12)
    "mixed": Recipe("mixed", parameter=2, gradient=2, optimizer=12),
    # fp32 everything; the parameter is its own master copy, so Adam adds only 2 moments (K = 8)
    "fp32": Recipe("fp32", parameter=4, gradient=4, optimizer=8),
}


def _recipe(precision) -> Recipe:
    if isinstance(precision, Recipe):
        return precision
    if precision not in RECIPES:
        raise ValueError(f"precision must be one of {sorted(RECIPES)} (or a Recipe), "
                         f"got {precision!r}")
    return RECIPES[precision]


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)  # numpy ints too


def _check(stage, n_d) -> None:
    # an int only: 1.0 == 1 would pass a membership test and print as "stage 1.0"
    if not _is_int(stage) or stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES} (0 = plain data parallelism), "
                         f"got {stage!r}")
    if isinstance(n_d, bool) or not isinstance(n_d, int) or n_d < 1:
        raise ValueError(f"n_d (data-parallel degree) must be an integer >= 1, got {n_d!r}")


def _sharded(stage: int) -> tuple[bool, bool, bool]:
    """Which of (parameters, gradients, optimizer state) a stage shards."""
    return stage >= 3, stage >= 2, stage >= 1


def predicted(psi: float, n_d: int, stage: int, precision="mixed") -> dict[str, float]:
    """Per-rank bytes of parameters, gradients and optimizer state (the formulas above)."""
    _check(stage, n_d)
    if isinstance(psi, bool) or not isinstance(psi, numbers.Real) or not psi >= 0:
        raise ValueError(f"psi (number of parameters) must be >= 0, got {psi!r}")
    r = _recipe(precision)
    shard_p, shard_g, shard_o = _sharded(stage)
    out = {"parameters": r.parameter * psi / (n_d if shard_p else 1),
           "gradients": r.gradient * psi / (n_d if shard_g else 1),
           "optimizer": r.optimizer * psi / (n_d if shard_o else 1)}
    out["total"] = out["parameters"] + out["gradients"] + out["optimizer"]
    return out


def exact_bytes(unit_numels, n_d: int, stage: int, rank: int, precision="mixed") -> dict[str, int]:
    """Bytes rank ``rank`` holds when each unit (one flat buffer per layer) is sharded with
    ``shard_bounds``: the formula with Ψ/d replaced by this rank's real shard sizes."""
    _check(stage, n_d)
    if not _is_int(rank) or not 0 <= rank < n_d:
        raise ValueError(f"rank must be an integer in [0, {n_d}), got {rank!r}")
    unit_numels = list(unit_numels)
    bad = [k for k in unit_numels if not _is_int(k) or k < 0]
    if bad:  # a fractional element count would come back as fractional bytes
        raise ValueError(f"unit_numels must be integers >= 0 (elements per unit), got {bad[0]!r}")
    unit_numels, rank = [int(k) for k in unit_numels], int(rank)
    r = _recipe(precision)
    full = sum(unit_numels)
    shard = 0
    for numel in unit_numels:
        lo, hi = shard_bounds(numel, n_d)[rank]
        shard += hi - lo
    shard_p, shard_g, shard_o = _sharded(stage)
    out = {"parameters": r.parameter * (shard if shard_p else full),
           "gradients": r.gradient * (shard if shard_g else full),
           "optimizer": r.optimizer * (shard if shard_o else full)}
    out["total"] = out["parameters"] + out["gradients"] + out["optimizer"]
    return out


def comm_elements(psi: float, stage: int) -> float:
    """Elements each rank moves per step in the paper's accounting (Sec. 7): an all-reduce is a
    reduce-scatter (Ψ) plus an all-gather (Ψ) = 2Ψ; stages 1-2 do the same two halves; stage 3
    all-gathers the parameters twice (forward, backward) and reduce-scatters gradients = 3Ψ.
    A ring sends (d-1)/d of this per rank (``playground.data_parallel.ring``)."""
    _check(stage, 1)
    if isinstance(psi, bool) or not isinstance(psi, numbers.Real) or not psi >= 0:
        raise ValueError(f"psi (number of parameters) must be >= 0, got {psi!r}")
    return (3 if stage == 3 else 2) * psi


def accumulation_comm_elements(psi: float, stage: int, micro_batches: int) -> float:
    """Elements per rank per optimizer step with m = ``micro_batches`` accumulated micro-batches,
    each reduce-scattered as it finishes (ZeroDP, FSDP2's default): stage 3 re-gathers the
    parameters for every micro-batch's forward and backward, m(Ψ + Ψ + Ψ); stages 0-2 gather
    once, after the update: mΨ + Ψ.  Times (d-1)/d on a ring."""
    _check(stage, 1)
    if not _is_int(micro_batches) or micro_batches < 1:
        raise ValueError(f"micro_batches must be an integer >= 1, got {micro_batches!r}")
    return micro_batches * 3 * psi if stage == 3 else (micro_batches + 1) * psi


def hsdp_comm_elements(psi: float, shards: int, replicas: int) -> dict[str, float]:
    """Elements one HSDP rank sends per step over each kind of link, ring factors included:
    inside its shard group (two all-gathers and one reduce-scatter of Ψ over ``shards`` ranks)
    and across the ``replicas`` (a ring all-reduce of its Ψ/shards gradient elements)."""
    for name, value in (("shards", shards), ("replicas", replicas)):
        if not _is_int(value) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return {"intra": 3 * psi * (shards - 1) / shards,
            "inter": 2 * (psi / shards) * (replicas - 1) / replicas}


# ----------------------------------------------------------------------------- the paper's table
# Rajbhandari et al. (2020), Table 1: per-device model-state memory in GB (1e9 bytes), mixed
# precision Adam (K = 12), for three model sizes and six data-parallel degrees.  Columns per
# model: baseline DP, P_os (stage 1), P_os+g (stage 2), P_os+g+p (stage 3), as printed (three
# significant digits, larger entries truncated: 4187 for 4187.5).  The d = 64 row of the 7.5B
# model is also the paper's Figure 1 (120 -> 31.4 -> 16.6 -> 1.9 GB).
PAPER_MODELS = {"7.5B": 7.5e9, "128B": 128e9, "1T": 1e12}
PAPER_DP_DEGREES = (1, 4, 16, 64, 256, 1024)
PAPER_TABLE_1 = {
    "7.5B": {1: (120, 120, 120, 120), 4: (120, 52.5, 41.3, 30), 16: (120, 35.6, 21.6, 7.5),
             64: (120, 31.4, 16.6, 1.88), 256: (120, 30.4, 15.4, 0.47),
             1024: (120, 30.1, 15.1, 0.12)},
    "128B": {1: (2048, 2048, 2048, 2048), 4: (2048, 896, 704, 512), 16: (2048, 608, 368, 128),
             64: (2048, 536, 284, 32), 256: (2048, 518, 263, 8), 1024: (2048, 513, 257, 2)},
    "1T": {1: (16000, 16000, 16000, 16000), 4: (16000, 7000, 5500, 4000),
           16: (16000, 4750, 2875, 1000), 64: (16000, 4187, 2218, 250),
           256: (16000, 4046, 2054, 62.5), 1024: (16000, 4011, 2013, 15.6)},
}


def paper_table(precision="mixed") -> list[dict]:
    """Table 1 regenerated from ``predicted``: one row per (model, d), GB per stage, next to
    the printed values, the largest relative gap, and whether they agree to the printed digits."""
    rows = []
    for model, psi in PAPER_MODELS.items():
        for n_d in PAPER_DP_DEGREES:
            ours = tuple(predicted(psi, n_d, s, precision)["total"] / 1e9 for s in STAGES)
            paper = PAPER_TABLE_1[model][n_d]
            gap = max(abs(o - p) / p for o, p in zip(ours, paper))
            # the paper prints 3 significant digits, rounding or truncating: agreement means
            # less than one unit of the last printed digit apart
            agrees = all(abs(o - p) < _last_digit(p) for o, p in zip(ours, paper))
            rows.append({"model": model, "n_d": n_d, "formula_gb": ours, "paper_gb": paper,
                         "max_rel_gap": gap, "agrees": agrees})
    return rows


def _last_digit(printed: float) -> float:
    """Value of one unit in the last digit of a number as printed (30 -> 1, 0.47 -> 0.01)."""
    text = repr(printed)
    return 10.0 ** -len(text.split(".")[1]) if "." in text and not text.endswith(".0") else 1.0


# ----------------------------------------------------------------------------- explorer
PSI_CHOICES = (0.125, 0.35, 1.3, 7.5, 13, 30, 70, 128, 175, 530, 1000)  # billions, exact values


def explorer(psi_billions: float = 7.5, n_d: int = 64, precision: str = "mixed"):
    """An ipywidgets explorer: per-rank model-state GB of each stage as Ψ, the data-parallel
    degree d and the recipe change (for JupyterLab; the book shows the static figure instead).
    It starts at exactly the values given and redraws only when a control moves."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    from playground.plotting import COLORS, new_figure

    choices = sorted(set(PSI_CHOICES) | {psi_billions})  # the text's value is always an option
    degrees = sorted({2 ** i for i in range(11)} | {n_d})
    style, wide = {"description_width": "initial"}, widgets.Layout(width="320px")
    psi_w = widgets.SelectionSlider(options=[(f"{v:g}", v) for v in choices], value=psi_billions,
                                    description="Ψ (billions of parameters)", style=style,
                                    layout=wide, continuous_update=False)
    nd_w = widgets.SelectionSlider(options=degrees, value=n_d, description="d (data-parallel ranks)",
                                   style=style, layout=wide, continuous_update=False)
    prec_w = widgets.Dropdown(options=sorted(RECIPES), value=precision, description="recipe",
                              style=style, layout=widgets.Layout(width="160px"))
    out = widgets.Output()

    def draw(*_):
        psi, n, rec = psi_w.value * 1e9, nd_w.value, prec_w.value
        with out:
            out.clear_output(wait=True)
            fig, ax = new_figure(width=6.4, height=3.4)
            bottoms = [0.0] * 4
            for kind, color in zip(("parameters", "gradients", "optimizer"), COLORS):
                vals = [predicted(psi, n, s, rec)[kind] / 1e9 for s in STAGES]
                ax.bar([STAGE_NAMES[s] for s in STAGES], vals, bottom=bottoms, color=color,
                       label=kind)
                bottoms = [b + v for b, v in zip(bottoms, vals)]
            for i, total in enumerate(bottoms):
                ax.annotate(f"{total:.3g} GB", (i, total), ha="center", va="bottom")
            ax.set_ylabel("model states per rank (GB, accounted)")
            ax.set_title(f"Ψ = {psi_w.value:g}B parameters, d = {n}, {rec}")
            ax.legend()
            plt.show()

    for w in (psi_w, nd_w, prec_w):
        w.observe(draw, names="value")
    draw()
    return widgets.VBox([widgets.HBox([psi_w, nd_w, prec_w],
                                      layout=widgets.Layout(flex_flow="row wrap")), out])
