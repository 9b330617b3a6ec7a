"""The course's shared model and data: a tiny GPT and a deterministic synthetic dataset.

Every chapter trains this same model, so a parallel run can always be checked against one
single-process reference.  It is a chain, ``model.layers = [embedding, block_1..block_L, head]``,
so a pipeline cuts it into consecutive slices, and each block keeps Megatron's shapes
(separate q/k/v/o projections, a 4h MLP) so tensor parallelism can shard it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ModelConfig", "TinyGPT", "Block", "build_model", "synthetic_batch", "shard_batch",
           "loss_fn", "train_step"]


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 64        # V, tokens
    d_model: int = 32      # h, hidden size
    n_heads: int = 4       # a, attention heads
    n_layers: int = 4      # L, transformer blocks
    seq_len: int = 16      # s, tokens per sequence
    ffn_mult: int = 4      # MLP width = ffn_mult * h

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")

    @property
    def d_ff(self) -> int:
        return self.ffn_mult * self.d_model

    def param_count(self) -> int:
        """Ψ: parameters of ``TinyGPT`` (checked against the module in the tests)."""
        h, V, s, f = self.d_model, self.vocab, self.seq_len, self.d_ff
        block = 2 * (2 * h) + 4 * (h * h + h) + (h * f + f) + (f * h + h)
        return V * h + s * h + self.n_layers * block + 2 * h + (h * V + V)


class Embedding(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.tokens = nn.Embedding(cfg.vocab, cfg.d_model)
        self.positions = nn.Embedding(cfg.seq_len, cfg.d_model)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[-1], device=tokens.device)
        return self.tokens(tokens) + self.positions(positions)


class Attention(nn.Module):
    """Causal multi-head self-attention with separate q, k, v, o projections."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, S, _ = x.shape
        # heads = columns of wq/wk/wv divided by head size; a TP shard simply holds fewer heads
        q, k, v = (w(x).view(B, S, -1, x.shape[-1] // self.n_heads).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, S, -1))


class MLP(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln1(x)), then + mlp(ln2(x))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg.d_model, cfg.n_heads)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg.d_model, cfg.d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Head(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(x))


class TinyGPT(nn.Module):
    """tokens (B, s) -> logits (B, s, V); ``layers`` is the chain a pipeline cuts."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList([Embedding(cfg), *(Block(cfg) for _ in range(cfg.n_layers)),
                                     Head(cfg)])

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = tokens
        for layer in self.layers:
            x = layer(x)
        return x


def build_model(cfg: ModelConfig | None = None, seed: int = 0,
                dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> TinyGPT:
    """The same weights for the same ``(cfg, seed)`` on every rank and every run."""
    cfg = cfg or ModelConfig()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyGPT(cfg)
        for name, p in model.named_parameters():
            if p.dim() == 2:  # small embeddings, fan-in scaled matrices
                nn.init.normal_(p, std=0.02 if "layers.0." in name else 1 / math.sqrt(p.shape[-1]))
    return model.to(device=device, dtype=dtype)


def synthetic_batch(cfg: ModelConfig, batch_size: int, step: int, seed: int = 0):
    """Deterministic batch ``(inputs, targets)``, each (batch_size, s) int64.

    Each sequence follows x[t+1] = (x[t] + x[t-1]) mod V from two random starting tokens: a rule
    the model can learn, so the loss really falls, and every rank can regenerate any step.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    seq = torch.empty(batch_size, cfg.seq_len + 1, dtype=torch.long)
    seq[:, :2] = torch.randint(0, cfg.vocab, (batch_size, 2), generator=g)
    for t in range(2, cfg.seq_len + 1):
        seq[:, t] = (seq[:, t - 1] + seq[:, t - 2]) % cfg.vocab
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def shard_batch(batch, rank: int, world_size: int):
    """This rank's contiguous slice of every tensor in ``batch`` (dim 0 must divide evenly)."""
    n = batch[0].shape[0]
    if n % world_size:
        raise ValueError(f"batch of {n} examples does not split evenly over {world_size} ranks")
    per = n // world_size
    return tuple(t[rank * per:(rank + 1) * per] for t in batch)


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over every position of the batch."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def train_step(model: nn.Module, optimizer, batch) -> float:
    """One single-process step on ``batch``: the reference every parallel run is checked against."""
    inputs, targets = batch
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()
