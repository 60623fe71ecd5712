"""minGRU (Feng et al. 2024, "Were RNNs All We Needed?") as a mixer for archsep: a plugin file.
The stack around it (embedding, positions, pre-LN blocks with GELU MLPs, readout) is the built-in
mixers' (`archsep.MixerConfig`); this file gives the token mixer alone, in its two forms."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from archsep import MODELS, ArchsepError, Mixer, MixerConfig


def log_g(x: torch.Tensor) -> torch.Tensor:  # log g(x), g(x) = x + 1/2 (x >= 0), sigmoid(x) (x < 0)
    return torch.where(x >= 0, (F.relu(x) + 0.5).log(), F.logsigmoid(x))


class MinGRU(Mixer):
    """h_t = (1 - z_t) h_{t-1} + z_t g(x_t W_h), z_t = sigmoid(x_t W_z); the output is h_t W_o."""

    def __init__(self, width: int, expand: int):
        super().__init__()
        self.hidden = expand * width
        self.state_floats = self.hidden  # h_t, per sequence
        self.zh = nn.Linear(width, 2 * self.hidden)  # the gate's and the candidate's logits
        self.out = nn.Linear(self.hidden, width, bias=False)

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """The parallel form, (B, L, W) -> (B, L, W): h_t = sum_{s<=t} e^{A_t - A_s} z_s g(c_s)
        with A_t = sum_{r<=t} log(1 - z_r), in log space (the paper's scan)."""
        k, c = self.zh(x).chunk(2, -1)  # (B, L, hidden) each
        a = F.logsigmoid(-k).cumsum(1)  # A_t
        h = (a + torch.logcumsumexp(F.logsigmoid(k) + log_g(c) - a, 1)).exp()  # (B, L, hidden)
        return self.out(h[:, -1:] if last_only else h)  # (B, 1, W) when last_only

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        return {"h": torch.zeros(batch, self.hidden, device=device, dtype=dtype)}

    def step(self, x: torch.Tensor, state: dict[str, torch.Tensor], t: int):
        """The step form: position t's x (B, W) and h_{t-1} -> the output (B, W) and h_t."""
        k, c = self.zh(x).chunk(2, -1)
        z = torch.sigmoid(k)
        h = (1 - z) * state["h"] + z * log_g(c).exp()
        return self.out(h), {"h": h}


@MODELS.register("mingru")
@dataclass(frozen=True)
class MinGRUConfig(MixerConfig):
    """minGRU: a gated diagonal recurrence of expand * width units, no hidden-to-hidden weights
    (layers, width, mlp_width and positions are MixerConfig's)."""

    expand: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions
        if self.expand < 1:
            raise ArchsepError.at("expand", f"must be >= 1, got {self.expand}")

    def mixer(self, layer: int) -> Mixer:
        return MinGRU(self.width, self.expand)
