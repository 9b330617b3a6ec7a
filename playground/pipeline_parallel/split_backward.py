"""The backward pass cut in two: B, the gradient w.r.t. the stage input, and W, the weight gradients.

A layer ``y = x @ W.T + b`` needs two products in its backward: ``dx = dy @ W`` (what the previous
stage waits for) and ``dW = dy.T @ x`` (what only the optimizer waits for).  Zero-bubble pipeline
schedules (Qi et al., 2024) run the first at once and defer the second into idle slots.  Here both
are real autograd passes over the micro-batch's one graph:

* during the forward, ``record_taps`` notes, for every module that owns parameters (``Linear``,
  ``LayerNorm``, ``Embedding``), the autograd edge of its output: a *tap*;
* B (``backward_input``): ``torch.autograd.grad`` from the stage output to the stage input and to
  every tap.  Autograd runs only the nodes on those paths and asks each node only for the gradients
  of edges that lead there, so no weight gradient is computed; the graph is kept (``retain_graph``)
  together with the gradient arriving at each tap: that is what W needs;
* W (``backward_weight``): one ``torch.autograd.grad`` per tap, from its output edge to its own
  parameters, seeded with the gradient B left there, accumulated into ``.grad``.

B and W together do exactly the arithmetic of one ``loss.backward()`` (the same kernels on the same
tensors), so the gradients are bitwise those of the unsplit backward (checked in the tests).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch.autograd.graph import get_gradient_edge

__all__ = ["record_taps", "backward_input", "backward_weight"]


@contextmanager
def record_taps(module: torch.nn.Module):
    """Yield a list that fills, during the forward, with ``(output edge, parameters)`` per
    parameter-owning submodule call.  Edges, not tensors: the tap keeps the graph node alive, not
    the output's values."""
    taps: list = []
    handles = []
    for sub in module.modules():
        params = tuple(sub.parameters(recurse=False))
        if params:
            handles.append(sub.register_forward_hook(
                lambda _m, _inputs, out, params=params: taps.append((get_gradient_edge(out), params))))
    try:
        yield taps
    finally:
        for handle in handles:
            handle.remove()


def backward_input(y: torch.Tensor, grad_y: torch.Tensor | None, x: torch.Tensor | None, taps):
    """B: the gradient of the stage input ``x`` (None for token ids) and the gradient arriving at
    each tap; no weight gradient.  ``grad_y`` is None when ``y`` is the loss."""
    targets = ([x] if x is not None else []) + [edge for edge, _ in taps]
    grads = torch.autograd.grad(y, targets, grad_y, retain_graph=True, allow_unused=True)
    return (grads[0] if x is not None else None), list(grads[len(targets) - len(taps):])


def backward_weight(taps, tap_grads) -> None:
    """W: each tap's parameter gradients from the gradient B left at its output, accumulated into
    ``p.grad`` as ``loss.backward()`` would (first micro-batch stored, later ones added)."""
    for (edge, params), grad in zip(taps, tap_grads):
        if grad is None:  # the tap's output did not reach the stage output
            continue
        for p, g in zip(params, torch.autograd.grad([edge], list(params), [grad])):
            if p.grad is None:
                p.grad = g
            else:
                p.grad += g
