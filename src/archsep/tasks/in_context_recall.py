"""In-context recall (MAD: Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid
Architectures", and its mad-lab generator), in mad-lab's evaluation format.

    x = 2 9 5 11 2 9 0 14 5 11 15 0  ->  label 14

(N = 12, vocab = 16: the pairs 2:9 5:11 2:9 0:14 5:11, the query marker 15, the probe key 0.)

Vocabulary `vocab` V as in mad-lab: the query marker (mad-lab's copy prefix) is V-1; of the
other V-1 ids, keys are [0, (V-1)//2) and values [(V-1)//2, V-1) (7 keys and 8 values at the
default V = 16). An example of length N (even) is m = N/2 - 1 key-value pairs, the marker and a
probe key: `k_1 v_1 ... k_m v_m MARK q`. Each k_i is uniform over the keys (with replacement);
each key has one value in an example, uniform over the values on its first appearance and
repeated whenever the key recurs (so two keys may share a value). The probe q is uniform over
the distinct keys of the prompt; the target, at the last position (readout "last"), is its value.

Where this differs from mad-lab: mad-lab trains on next-token prediction over the whole
sequence (`is_training=True`) and tests on the probe's value only; here training and test are
both the probe format, so no label is ever in the input (a bidirectional model cannot copy it).
The probe's value is uniform over the values: chance accuracy 1/((V-1) - (V-1)//2) (1/8 at V = 16).

Trivial baselines (`trivial_baselines`): besides the constant, "value-mode" (the most frequent
value id of the prompt, the smallest on a tie: keys that share a value make it likelier, and
frequent keys weigh more; 32% at the defaults N = 128, V = 16) and "last-value" (the value of the
prompt's last pair: about 1/7 + 1/8 * 6/7 = 25% at the defaults, where all 7 keys almost always
appear). Measured on 4096 test examples.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check
from .base import Batch, ClassificationTask, TaskSpec
from .registry import TASKS
from .token_heuristics import most_recent, token_mode


@TASKS.register("in-context-recall")
@dataclass(frozen=True)
class InContextRecall(ClassificationTask):
    N: int = 128  # sequence length (even): N/2 - 1 pairs, the marker and the probe
    vocab: int = 16  # mad-lab's vocab_size: keys, values and the marker
    seed: int = 0  # unused: the task has no hidden randomness

    def __post_init__(self) -> None:
        check(self.N >= 4 and self.N % 2 == 0, "N", f"must be an even integer >= 4, got {self.N}")
        noise_vocab, _ = self.noise()
        check(self.vocab - 1 - noise_vocab >= 3, "vocab",
              f"must leave >= 3 key and value ids besides the marker{' and the noise ids' if noise_vocab else ''} "
              f"(vocab >= {4 + noise_vocab}), got {self.vocab}")

    def noise(self) -> tuple[int, float]:
        """(noise ids, the probability that a pair slot is noise): none for in-context recall."""
        return 0, 0.0

    # --- the vocabulary ----------------------------------------------------------------------
    @property
    def n_kv(self) -> int:
        """Key and value ids together, [0, n_kv)."""
        return self.vocab - 1 - self.noise()[0]

    @property
    def n_keys(self) -> int:
        return self.n_kv // 2

    @property
    def n_values(self) -> int:
        return self.n_kv - self.n_keys

    @property
    def marker(self) -> int:
        return self.vocab - 1

    @property
    def n_pairs(self) -> int:
        return self.N // 2 - 1

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", self.vocab, self.N, self.vocab, "last")

    @property
    def chance_accuracy(self) -> float:
        return 1.0 / self.n_values

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        dev = generator.device
        m, K = self.n_pairs, self.n_keys
        noise_vocab, frac = self.noise()
        keys = torch.randint(0, K, (n, m), generator=generator, device=dev)
        table = K + torch.randint(0, self.n_values, (n, K), generator=generator, device=dev)  # each key's value
        pairs = torch.stack([keys, table.gather(1, keys)], -1)  # (n, m, 2)
        real = torch.ones(n, m, dtype=torch.bool, device=dev)
        if frac > 0:
            keep = torch.randint(0, m, (n, 1), generator=generator, device=dev)  # one slot always a pair
            real = torch.rand(n, m, generator=generator, device=dev) >= frac
            real.scatter_(1, keep, True)
            noise = self.n_kv + torch.randint(0, noise_vocab, (n, m, 2), generator=generator, device=dev)
            pairs = torch.where(real.unsqueeze(-1), pairs, noise)
        seen = torch.zeros(n, K, dtype=torch.long, device=dev).scatter_add_(1, keys, real.long()) > 0
        score = torch.where(seen, torch.rand(n, K, generator=generator, device=dev), -1.0)
        probe = score.argmax(1, keepdim=True)  # uniform over the keys shown
        x = torch.cat([pairs.reshape(n, 2 * m), torch.full((n, 1), self.marker, device=dev), probe], 1)
        return Batch(x, table.gather(1, probe).squeeze(1), tuples=probe)

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy on n test examples of "constant" (the most frequent label), "value-mode" (the
        prompt's most frequent value id) and "last-value" (the latest value id of the prompt)."""
        b = self.sample_test(n, generator)
        lo, hi = self.n_keys, self.n_kv
        return {"constant": self.constant_accuracy(b),
                "value-mode": self.label_accuracy(token_mode(b.x, lo, hi), b),
                "last-value": self.label_accuracy(most_recent(b.x, lo, hi)[:, -1], b)}
