"""The shared model and the memory counter."""

import pytest
import torch

from playground.memory import SavedActivations, model_state_bytes, storage_bytes
from playground.model import ModelConfig, build_model, shard_batch, synthetic_batch, train_step


def test_same_seed_same_weights_and_count_matches_formula():
    cfg = ModelConfig(vocab=50, d_model=24, n_heads=3, n_layers=3, seq_len=10)
    a, b = build_model(cfg, seed=1), build_model(cfg, seed=1)
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert sum(p.numel() for p in a.parameters()) == cfg.param_count()
    assert not torch.equal(next(a.parameters()), next(build_model(cfg, seed=2).parameters()))


def test_data_is_deterministic_and_learnable():
    cfg = ModelConfig()
    x1, y1 = synthetic_batch(cfg, 8, step=3)
    x2, y2 = synthetic_batch(cfg, 8, step=3)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert torch.equal(x1[:, 1:], y1[:, :-1])
    model = build_model(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = [train_step(model, opt, synthetic_batch(cfg, 16, s)) for s in range(30)]
    assert losses[-1] < losses[0]


def test_shards_tile_the_batch():
    batch = synthetic_batch(ModelConfig(), 12, 0)
    parts = [shard_batch(batch, r, 4) for r in range(4)]
    assert torch.equal(torch.cat([p[0] for p in parts]), batch[0])
    with pytest.raises(ValueError, match="does not split evenly"):
        shard_batch(batch, 0, 5)


@pytest.mark.parametrize("bad", [dict(d_model=30, n_heads=4), dict(n_layers=0), dict(vocab=-3)])
def test_bad_config_is_refused(bad):
    with pytest.raises(ValueError):
        ModelConfig(**bad)


def test_storage_bytes_counts_each_storage_once():
    flat = torch.zeros(100)
    views = [flat[:40], flat[40:]]
    assert storage_bytes(views) == 400
    assert storage_bytes([flat, torch.zeros(10, dtype=torch.bfloat16), None]) == 420


def test_model_state_bytes_for_adam():
    model = build_model(ModelConfig())
    n = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters())
    train_step(model, opt, synthetic_batch(ModelConfig(), 4, 0))
    assert model_state_bytes(model.parameters(), opt) == {
        "parameters": 4 * n, "gradients": 4 * n, "optimizer": 8 * n, "total": 16 * n}


def test_saved_activations_counts_what_autograd_keeps():
    w = torch.randn(64, 64, requires_grad=True)
    x = torch.randn(8, 64)
    with SavedActivations(exclude=[w]) as saved:
        torch.relu(x @ w).sum()
    # matmul saves x (its weight is excluded); relu saves its output (8 x 64 float32)
    assert saved.bytes == 2 * 8 * 64 * 4


def test_optimizer_state_of_a_scalar_parameter_is_counted_but_step_counters_are_not():
    scalar, vector = torch.nn.Parameter(torch.tensor(1.0)), torch.nn.Parameter(torch.zeros(3))
    for make, per_param in ((lambda ps: torch.optim.Adam(ps), 8),  # exp_avg + exp_avg_sq
                            (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), 4),
                            (lambda ps: torch.optim.NAdam(ps), 8)):  # not its mu_product
        opt = make([scalar, vector])
        (scalar * vector.sum() + scalar).backward()
        opt.step()
        assert model_state_bytes([scalar, vector], opt)["optimizer"] == per_param * (1 + 3)
        scalar.grad = vector.grad = None
