"""Why the key projection's bias is rounding noise, and why that matters to Adam but not to SGD.

The scores of query i are q_i . (W_k x_j + b_k): the b_k term is the same for every key j, and
softmax ignores a constant added to all its inputs, so the loss does not depend on b_k and its true
gradient is 0.  Backward computes rounding noise instead (~1e-9), different for two mathematically
equal computations (sharded or not).  SGD moves b_k by lr * |g|: invisible.  Adam's first step is
lr * g / (|g| + eps), a visible share of lr for |g| near eps = 1e-8.  The 2-D runs of
``playground.systems_map.compose`` therefore train with SGD, and the ZeRO tests mask the key biases when
comparing Adam runs added in different orders.
"""

from __future__ import annotations

import torch

from playground.model import ModelConfig, build_model, loss_fn, synthetic_batch

__all__ = ["key_bias_gradients", "key_bias_report"]


def key_bias_gradients(cfg: ModelConfig | None = None, batch: int = 8, step: int = 0) -> dict:
    """|gradient| of the attention key biases and of every other parameter after one backward of
    the single-process reference, and Adam's first step on the key biases as a fraction of the
    learning rate, |g| / (|g| + eps) (Adam's default eps)."""
    cfg = cfg or ModelConfig()
    model = build_model(cfg, seed=0)
    inputs, targets = synthetic_batch(cfg, batch, step)
    loss_fn(model(inputs), targets).backward()
    key, other = [], []
    for name, p in model.named_parameters():
        (key if name.endswith("attn.wk.bias") else other).append(p.grad.abs().flatten())
    key, other = torch.cat(key), torch.cat(other)
    eps = torch.optim.Adam([torch.zeros(1)]).defaults["eps"]
    adam = key / (key + eps)
    return {"count": key.numel(), "median": key.median().item(), "max": key.max().item(),
            "other_median": other.median().item(), "eps": eps,
            "adam_median": adam.median().item(), "adam_max": adam.max().item()}


def key_bias_report(cfg: ModelConfig | None = None) -> str:
    """What ``key_bias_gradients`` measures, in two lines."""
    g = key_bias_gradients(cfg)
    return (f"key biases ({g['count']} values): |gradient| median {g['median']:.0e}, largest "
            f"{g['max']:.0e} \n(rounding noise; median of every other parameter {g['other_median']:.0e})\n"
            f"first step, as a fraction of the learning rate: Adam |g|/(|g| + eps), eps = "
            f"{g['eps']:.0e}:\nmedian {100 * g['adam_median']:.0f}%, largest "
            f"{100 * g['adam_max']:.0f}%; SGD |g|: at most {g['max']:.0e} of it")
