"""AdamW over the model's parameters, or over an fp32 master copy of bf16 weights.

Why a master copy: in a bf16 run the weights are held in bf16 so every matmul reads half
the bytes, but AdamW's steps at lr 1e-5 are far below bf16's resolution (8 bits of
mantissa: near a weight of 0.02 the spacing is 1.2e-4), so updating bf16 weights in place
would round most steps away. :class:`MasterWeights` keeps the fp32 values the optimizer
updates, hands them the bf16 gradients, and copies the result back to the model after
each step; checkpoints and the exported model hold the fp32 values, so a bf16 run's run
folder looks exactly like an fp32 run's.

Weight decay follows BLIP: not on biases, norms or embeddings. Fused AdamW (one kernel for
all parameters) is used where the plan says so (CUDA).
"""

from __future__ import annotations

__all__ = ["build_optimizer", "MasterWeights"]


def _decays(name: str, param) -> bool:
    return param.ndim >= 2 and "embedding" not in name


class MasterWeights:
    """fp32 copies of a model's parameters, taken before the model is cast to ``dtype``
    (bf16), in ``named_parameters`` order."""

    def __init__(self, net, dtype):
        import torch

        self.net = net
        self.names = [n for n, _ in net.named_parameters()]
        self.params = [torch.nn.Parameter(p.detach().float().clone(), requires_grad=p.requires_grad)
                       for _, p in net.named_parameters()]
        net.to(dtype)
        self.model_params = [p for _, p in net.named_parameters()]

    def named(self):
        return zip(self.names, self.params)

    def grads_to_master(self) -> None:
        """The model's gradients, in fp32, become the masters' (the model's are dropped)."""
        for p, m in zip(self.model_params, self.params):
            m.grad = None if p.grad is None else p.grad.float()
            p.grad = None

    def master_to_model(self) -> None:
        import torch

        with torch.no_grad():
            for p, m in zip(self.model_params, self.params):
                p.copy_(m)

    def state_dict(self) -> dict:
        """The model's state dict with every parameter replaced by its fp32 master (a tied
        weight, listed under two names, by the same master under both)."""
        by_storage = {p.data_ptr(): m for p, m in zip(self.model_params, self.params)}
        state = self.net.state_dict()
        for name, value in state.items():
            if value.data_ptr() in by_storage:
                state[name] = by_storage[value.data_ptr()].detach().clone()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Masters from a checkpoint's (fp32) model state; the model gets their bf16 copies."""
        import torch

        self.net.load_state_dict(state)
        with torch.no_grad():
            for name, m in self.named():
                m.copy_(state[name])

    def export_fp32(self) -> None:
        """Turn the model into fp32 holding the exact master values (before saving it)."""
        self.net.float()
        self.model_params = [p for _, p in self.net.named_parameters()]
        self.master_to_model()


def build_optimizer(torch, net, *, lr: float, weight_decay: float, weights: str, fused: bool):
    """``(AdamW, MasterWeights or None)``: the optimizer over the (fp32) model's parameters,
    or, for ``weights="bf16"``, the model cast to bf16 and the optimizer over its fp32
    masters; ``fused`` where CUDA has it."""
    masters = MasterWeights(net, torch.bfloat16) if weights == "bf16" else None
    named = list(masters.named()) if masters else list(net.named_parameters())
    groups = [{"params": [p for n, p in named if _decays(n, p)], "weight_decay": weight_decay},
              {"params": [p for n, p in named if not _decays(n, p)], "weight_decay": 0.0}]
    kwargs = {"fused": True} if fused else {}
    return torch.optim.AdamW(groups, lr=lr, **kwargs), masters
