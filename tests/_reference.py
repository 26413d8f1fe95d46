"""A plain PyTorch network built independently of condlab (nn.Linear layers): the reference
that batched training, the optimizers and dropout are checked against."""

import torch
from torch import nn

from condlab.training._models import Architecture


class Reference(nn.Module):
    """One network of `arch` from nn.Linear layers; dropout masks, if any, come from outside."""

    def __init__(self, arch: Architecture, weights: list[torch.Tensor]):
        super().__init__()
        self.arch = arch
        self.hidden = nn.ModuleList()
        for w in weights[:-1]:
            lin = nn.Linear(w.shape[1] - 1, w.shape[0]).double()
            lin.weight.data.copy_(w[:, :-1])
            lin.bias.data.copy_(w[:, -1])
            self.hidden.append(lin)
        out, bias = weights[-1], arch.output_bias
        self.out = nn.Linear(arch.width, arch.d_out, bias=bias).double()
        self.out.weight.data.copy_(out[:, : arch.width])
        if bias:
            self.out.bias.data.copy_(out[:, -1])

    def forward(self, x, masks=None):
        h = x
        for k, lin in enumerate(self.hidden):
            z = self.arch.activations[k].fn(lin(h))
            if masks is not None:
                z = z * masks[k]
            h = z + h if (self.arch.name == "residual" and k > 0) else z
        return self.out(h)

    def flat_weights(self) -> list[torch.Tensor]:
        """The weights in condlab's layout: bias as the last column of every matrix."""
        ws = [torch.cat([lin.weight, lin.bias[:, None]], 1) for lin in self.hidden]
        o = self.out
        ws.append(torch.cat([o.weight, o.bias[:, None]], 1) if o.bias is not None else o.weight)
        return [w.detach() for w in ws]
