"""Compute-optimal sizing and the fitted loss of Hoffmann et al. (2022), "Chinchilla" (arXiv:2203.15556).

Hoffmann et al. estimate the compute-optimal split of a FLOP budget C = 6 N D between parameters N
and training tokens D three ways.  Their Approaches 1 and 2 agree that N_opt and D_opt both grow
as C^0.50 (their Table 2); the tabulated Approach 1 allocations (their Table 3: 67B parameters and
1.5T tokens at 5.76e23 FLOPs, 1T and 21.2T at 1.27e26) sit at about 20 tokens per parameter, and
Chinchilla itself (70B parameters, 1.4T tokens) was trained at that ratio.  ``chinchilla_optimal``
therefore defaults to the **20 tokens per parameter rule**, a rounding of Approach 1 (not Approach 1
itself): D = 20 N and C = 6 N D, i.e. N = sqrt(C / 120).  At 5.76e23 FLOPs it gives 69.3B on 1.39T,
within 1% of the trained Chinchilla.

Approach 3 fits a parametric loss L(N, D) = E + A / N^alpha + B / D^beta (their Eq. 10, fitted
E = 1.69, A = 406.4, B = 410.7, alpha = 0.34, beta = 0.28).  Besiroglu et al. (2024,
arXiv:2404.10102) refitted it to the same data, read off Hoffmann et al.'s Figure 4, and found the
original fit wrong: the optimizer had stopped early (a loss scale that was a mean, not a sum) and the
published parameters were rounded in a way that biases them.  Their fit (E = 1.8172, A = 482.01,
B = 2085.43, alpha = 0.3478, beta = 0.3658; Epoch's analyzing-chinchilla notebook) puts about 20
tokens per parameter at Chinchilla's budget, in agreement with Approaches 1 and 2, where the
published (rounded) values put about 90.  ``LOSS_FIT`` is the corrected fit, used by default; ``HOFFMANN_LOSS_FIT``
keeps the published one (``fit="hoffmann"``).  Minimising L under C = 6 N D has a closed form (their
Eq. 4), ``approach=3``; the loss itself is ``chinchilla_loss``.
"""

from __future__ import annotations

import math

__all__ = ["chinchilla_optimal", "chinchilla_loss", "LOSS_FIT", "HOFFMANN_LOSS_FIT", "TOKENS_PER_PARAM"]

TOKENS_PER_PARAM = 20.0  # the rounding of Approach 1 (Table 3 of Hoffmann et al.): D_opt ~ 20 N_opt
HOFFMANN_LOSS_FIT = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}  # Approach 3, Eq. 10
LOSS_FIT = {"E": 1.8172, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658}  # Besiroglu et al. 2024
_FITS = {"besiroglu": LOSS_FIT, "hoffmann": HOFFMANN_LOSS_FIT}


def _fit(name: str) -> dict:
    if name not in _FITS:
        raise ValueError(f"fit must be one of {', '.join(_FITS)}, got {name!r}")
    return _FITS[name]


def _positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def chinchilla_optimal(compute: float, approach: int = 1, fit: str = "besiroglu") -> tuple[float, float]:
    """(params, tokens) that spend ``compute`` FLOPs (= 6 N D) compute-optimally.

    ``approach=1``: D = 20 N, the rounding of Hoffmann et al.'s Approach 1 (N and D both ~ C^0.50).
    ``approach=3``: minimise the fitted ``chinchilla_loss`` under 6 N D = C (their Eq. 4), with
    Besiroglu et al.'s corrected fit, or ``fit="hoffmann"`` for the published one.
    """
    c = _positive("compute", compute)
    if approach == 1:
        params = math.sqrt(c / (6 * TOKENS_PER_PARAM))
    elif approach == 3:
        f = _fit(fit)
        a = f["beta"] / (f["alpha"] + f["beta"])
        g = (f["alpha"] * f["A"] / (f["beta"] * f["B"])) ** (1 / (f["alpha"] + f["beta"]))
        params = g * (c / 6) ** a
    else:
        raise ValueError(f"approach must be 1 or 3, got {approach!r}")
    return params, c / (6 * params)


def chinchilla_loss(params: float, tokens: float, fit: str = "besiroglu") -> float:
    """The fitted loss L(N, D) = E + A/N^alpha + B/D^beta (nats per token, MassiveText): Besiroglu et
    al.'s corrected fit, or ``fit="hoffmann"`` for Hoffmann et al.'s."""
    n, d = _positive("params", params), _positive("tokens", tokens)
    f = _fit(fit)
    return f["E"] + f["A"] / n ** f["alpha"] + f["B"] / d ** f["beta"]
