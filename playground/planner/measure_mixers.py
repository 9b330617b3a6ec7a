"""The recurrent mixers' counts (``ssm``) confronted with real PyTorch modules: parameters, FLOPs and the scan.

``Mamba2Mixer`` and ``GatedDeltaNetMixer`` hold their weights as the Hugging Face modules do (``NemotronHMamba2Mixer``,
``Qwen3NextGatedDeltaNet``: one input projection or two, a depthwise convolution, a step bias and decay a head, a
gated norm, an output projection) and run the chunked scan the planner prices, written out with matrix products so
that ``FlopCounterMode`` sees them.  ``measure_mixer`` builds one from a shape of ``ssm``, counts its parameters
and its forward FLOPs, and checks the chunked scan against the token-by-token recurrence it rewrites:

* Mamba-2 (SSD, Dao and Gu 2024): h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t^T, y_t = C_t^T h_t + D x_t;
* Gated DeltaNet (Yang et al. 2025): S_t = a_t (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T, o_t = S_t^T q_t.

Chunked, the delta rule's corrections solve a triangular system per chunk (T = (I + A)^-1, C^2 / 3 multiply-adds a
token and head, under 1% of its products, which ``FlopCounterMode`` does not count either).  torch is imported
inside the functions: the planner itself never needs it.
"""

from __future__ import annotations

from playground.planner.ssm import GatedDeltaNet, Mamba2

__all__ = ["ssd_chunked", "ssd_recurrent", "delta_rule_chunked", "delta_rule_recurrent", "mixer_module",
           "measure_mixer"]


def ssd_recurrent(x, dt, A, B, C):
    """Mamba-2's scan token by token: x (T, H, P), dt (T, H), A (H,), B and C (T, H, N) -> y (T, H, P)."""
    import torch
    state = x.new_zeros(x.shape[1], B.shape[2], x.shape[2])              # (H, N, P)
    out = []
    for t in range(x.shape[0]):
        state = torch.exp(dt[t] * A)[:, None, None] * state + (dt[t, :, None] * B[t])[:, :, None] * x[t][:, None, :]
        out.append(torch.einsum("hn,hnp->hp", C[t], state))
    return torch.stack(out)


def ssd_chunked(x, dt, A, B, C, chunk: int, groups: int):
    """The same scan chunk by chunk (SSD): within a chunk C B^T a group, masked by each head's decay and applied to
    dt x; each chunk's state B^T (decay dt x); the states passed on; their share of the output C state.  B and C
    are (T, G, N), shared by the H / G heads of a group."""
    import torch
    T, H, P = x.shape
    per = H // groups
    X, l = dt[..., None] * x, dt * A                                      # (T, H, P), log-decay (T, H)
    state, out = x.new_zeros(H, B.shape[2], P), []
    for s in range(0, T, chunk):
        e = min(s + chunk, T)
        Xc, Bc, Cc, L = X[s:e], B[s:e], C[s:e], torch.cumsum(l[s:e], 0)  # L (Q, H)
        scores = torch.einsum("ign,jgn->gij", Cc, Bc).repeat_interleave(per, 0)   # C B^T a group -> (H, Q, Q)
        decay = torch.exp(L.T[:, :, None] - L.T[:, None, :]).tril()      # exp(L_i - L_j), j <= i
        y = torch.einsum("hij,jhp->ihp", scores * decay, Xc)              # the chunk's own tokens
        Ch = Cc.repeat_interleave(per, 1)                                 # (Q, H, N)
        y = y + torch.exp(L)[..., None] * torch.einsum("ihn,hnp->ihp", Ch, state)   # the states passed in
        Bh = Bc.repeat_interleave(per, 1)
        weight = torch.exp(L[-1][None] - L)                               # decay to the chunk's end (Q, H)
        state = torch.exp(L[-1])[:, None, None] * state + torch.einsum("jhn,jhp->hnp", Bh, weight[..., None] * Xc)
        out.append(y)
    return torch.cat(out)


def delta_rule_recurrent(q, k, v, g, beta):
    """The gated delta rule token by token: q, k (T, H, dk), v (T, H, dv), log-gate g and strength beta (T, H)."""
    import torch
    state = q.new_zeros(q.shape[1], q.shape[2], v.shape[2])               # (H, dk, dv)
    out = []
    for t in range(q.shape[0]):
        kt, a, b = k[t], torch.exp(g[t])[:, None, None], beta[t][:, None, None]
        state = a * (state - b * kt[:, :, None] * torch.einsum("hk,hkv->hv", kt, state)[:, None, :]) \
            + b * kt[:, :, None] * v[t][:, None, :]
        out.append(torch.einsum("hk,hkv->hv", q[t], state))
    return torch.stack(out)


def delta_rule_chunked(q, k, v, g, beta, chunk: int):
    """The same rule chunk by chunk: with the gates' products G within a chunk and the state S_0 passed in, the
    corrections D = U - W S_0 solve (I + A) D = beta V - beta G K S_0, A = strictly lower (beta_t G_t / G_j k_t.k_j);
    the output G Q S_0 + (Q K^T o G / G_j, causal) D; the state out G_Q S_0 + (K G_Q / G)^T D."""
    import torch
    T, H, dk = q.shape
    state, out = q.new_zeros(H, dk, v.shape[2]), []
    for s in range(0, T, chunk):
        e = min(s + chunk, T)
        qc, kc, vc, bc = (z[s:e].transpose(0, 1) for z in (q, k, v, beta))   # head first
        G = torch.cumsum(g[s:e].T, -1)                                    # (H, Q) log of the gates' products
        ratio = torch.exp(G[:, :, None] - G[:, None, :])                  # G_t / G_j
        kk = kc @ kc.transpose(1, 2)                                      # K K^T
        A = (bc[..., None] * ratio * kk).tril(-1)
        eye = torch.eye(e - s, dtype=q.dtype)
        Tinv = torch.linalg.solve_triangular(eye + A, eye.expand_as(A), upper=False)
        wu = Tinv @ torch.cat([bc[..., None] * torch.exp(G)[..., None] * kc, bc[..., None] * vc], -1)
        W, U = wu[..., :dk], wu[..., dk:]
        D = U - W @ state                                                 # the corrected values
        o = torch.exp(G)[..., None] * (qc @ state) + ((qc @ kc.transpose(1, 2)) * ratio).tril() @ D
        state = torch.exp(G[:, -1])[:, None, None] * state \
            + (torch.exp(G[:, -1:] - G)[..., None] * kc).transpose(1, 2) @ D
        out.append(o.transpose(0, 1))
    return torch.cat(out)


def mixer_module(shape, hidden: int):
    """A torch module holding ``shape``'s weights (a ``ssm.Mamba2`` or ``ssm.GatedDeltaNet``) as Hugging Face's does,
    whose ``forward(x)`` (x: tokens x hidden, one sequence) runs the chunked scan; ``recurrent=True`` the reference."""
    import torch
    from torch import nn

    class Mixer(nn.Module):
        def __init__(self):
            super().__init__()
            d, cc = shape.inner, shape.conv_channels
            heads = shape.heads if isinstance(shape, Mamba2) else shape.value_heads
            if isinstance(shape, Mamba2):
                self.in_proj = nn.Linear(hidden, shape.in_width, bias=shape.proj_bias)
                self.D = nn.Parameter(torch.ones(heads))
            else:   # queries, keys, values and the gate z; then beta and the decay's input a
                self.in_proj_qkvz = nn.Linear(hidden, cc + d, bias=False)
                self.in_proj_ba = nn.Linear(hidden, 2 * heads, bias=False)
            self.conv1d = nn.Conv1d(cc, cc, shape.conv, groups=cc, padding=shape.conv - 1,
                                    bias=getattr(shape, "conv_bias", False))
            self.dt_bias = nn.Parameter(torch.zeros(heads))
            self.A_log = nn.Parameter(torch.linspace(0.0, 1.0, heads))
            self.norm = nn.Parameter(torch.ones(d if isinstance(shape, Mamba2) else shape.value_dim))
            self.out_proj = nn.Linear(d, hidden, bias=getattr(shape, "proj_bias", False))

        def _conv(self, xs):
            return nn.functional.silu(self.conv1d(xs.T[None])[0, :, :xs.shape[0]].T)

        def forward(self, x, recurrent: bool = False):
            T = x.shape[0]
            if isinstance(shape, Mamba2):
                H, P, G, N, d = shape.heads, shape.head_dim, shape.groups, shape.state, shape.inner
                z, xbc, dt = self.in_proj(x).split([d, shape.conv_channels, H], -1)
                xs, B, C = self._conv(xbc).split([d, G * N, G * N], -1)
                dt, A = nn.functional.softplus(dt + self.dt_bias), -torch.exp(self.A_log)
                xs, B, C = xs.reshape(T, H, P), B.reshape(T, G, N), C.reshape(T, G, N)
                y = ssd_recurrent(xs, dt, A, B.repeat_interleave(H // G, 1), C.repeat_interleave(H // G, 1)) \
                    if recurrent else ssd_chunked(xs, dt, A, B, C, shape.chunk, G)
                y = (y + self.D[:, None] * xs).reshape(T, d)
                gated = y * nn.functional.silu(z)
                return self.out_proj(gated * torch.rsqrt(gated.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm)
            nk, dk, nv, dv = shape.key_heads, shape.key_dim, shape.value_heads, shape.value_dim
            qkv, z = self.in_proj_qkvz(x).split([shape.conv_channels, shape.inner], -1)
            b, a = self.in_proj_ba(x).split([nv, nv], -1)
            q, k, v = self._conv(qkv).split([nk * dk, nk * dk, nv * dv], -1)
            q, k = (nn.functional.normalize(y.reshape(T, nk, dk), dim=-1).repeat_interleave(nv // nk, 1)
                    for y in (q, k))
            g = -torch.exp(self.A_log) * nn.functional.softplus(a + self.dt_bias)
            args = (q / dk ** 0.5, k, v.reshape(T, nv, dv), g, torch.sigmoid(b))
            o = delta_rule_recurrent(*args) if recurrent else delta_rule_chunked(*args, shape.chunk)
            o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm * nn.functional.silu(
                z.reshape(T, nv, dv))
            return self.out_proj(o.reshape(T, shape.inner))

    return Mixer()


def measure_mixer(shape, hidden: int, tokens: int, seed: int = 0) -> dict:
    """One mixer of ``shape`` at ``hidden`` over one sequence of ``tokens`` tokens, in float64: its parameters
    counted by PyTorch against ``shape.params``; its forward FLOPs counted by ``FlopCounterMode`` (matrix products,
    and apart the convolution's) against ``shape.gemms``; the largest difference between the chunked scan's
    output and the recurrence's."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    torch.manual_seed(seed)
    module = mixer_module(shape, hidden).double()
    x = torch.randn(tokens, hidden, dtype=torch.float64)
    with torch.no_grad():
        with FlopCounterMode(display=False) as counter:
            chunked = module(x)
        recurrent = module(x, recurrent=True)
    ops = {str(op).split(".")[-1]: n for op, n in counter.get_flop_counts()["Global"].items()}
    conv = sum(n for op, n in ops.items() if "convolution" in op)
    return {"params": sum(p.numel() for p in module.parameters()), "predicted_params": shape.params(hidden),
            "flops": sum(ops.values()) - conv, "conv_flops": conv,
            "predicted_flops": sum(2 * c * M * N * K for _, c, M, N, K in shape.gemms(hidden, tokens, 1, 1)),
            "max_error": float((chunked - recurrent).abs().max()), "scale": float(recurrent.abs().max())}
