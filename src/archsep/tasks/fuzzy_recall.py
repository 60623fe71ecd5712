"""Fuzzy in-context recall (MAD: Poli et al. 2024; mad-lab's generator): in-context recall whose
keys and values are runs of several tokens.

    x = 14 14 14 3 1 9 5 12 8 6 0 10 7 15 5 14 14  ->  labels 12 8 at 15 16

(N = 17, vocab = 16, key_len = value_len = 2: left padding 14, the pairs 3 1:9, 5:12 8, 6 0:10 7,
the query marker 15, the probe key 5, two answer slots.)

Vocabulary `vocab` V as in mad-lab: the query marker (copy prefix) is V-1 and the pad token V-2;
of the other n = V-2 ids, keys are [0, n//2) and values [n//2, n) (7 and 7 at V = 16). A key is
a run of 1..`key_len` distinct key ids and a value a run of 1..`value_len` distinct value ids
(mad-lab's permutations: the length uniform, then the ids uniform without repetition). An
example of length N is
    PAD ... PAD  k_1 v_1 ... k_m v_m  MARK  q  PAD x value_len
with m = (N - 1 - key_len - value_len) // (key_len + value_len) pairs (as many as fit at their
longest; left padding fills the rest, as mad-lab pads on the left). Each k_i is drawn as above
(with replacement); a key keeps the value of its first appearance when it recurs. The probe q is
uniform over the distinct keys shown. The last `value_len` positions are answer slots: slot j
(j = 0.. len(value)-1) is labelled with the j-th id of q's value (readout "mask"); slots past the
value's end carry no target (as in mad-lab, whose targets are the value's ids only). Keys and
values are parsed by their id ranges; a probe may also occur inside a longer key (q = 0 and a
key 6 0), which does not count as a match: that grouping of adjacent tokens is the task.

Where this differs from mad-lab: a fixed number of pairs (mad-lab fills the sequence with a
variable number and inserts the probe pair at a random point); the probe's length is uniform
in 1..key_len at training and test (mad-lab tests at key_len only); training uses the probe
format (mad-lab trains on next-token prediction), and the answer slots hold PAD rather than
the value's earlier ids, so no label is in the input (no teacher forcing a bidirectional model
could copy).

Each labelled id is uniform over the values: chance accuracy 1/(n - n//2) (1/7 at the defaults
N = 128, V = 16, key_len = value_len = 3). Trivial baseline (`trivial_baselines`): besides the
constant, "value-mode" (the prompt's most frequent value id at every slot; 22% at the defaults, on 4096
test examples).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check
from .base import Batch, ClassificationTask, TaskSpec
from .registry import TASKS
from .token_heuristics import token_mode


@TASKS.register("fuzzy-recall")
@dataclass(frozen=True)
class FuzzyRecall(ClassificationTask):
    N: int = 128  # sequence length
    vocab: int = 16  # mad-lab's vocab_size: keys, values, the pad token and the marker
    key_len: int = 3  # mad-lab's k_motif_size: the longest key
    value_len: int = 3  # mad-lab's v_motif_size: the longest value
    seed: int = 0  # unused: the task has no hidden randomness

    def __post_init__(self) -> None:
        check(self.key_len >= 1, "key_len", f"must be >= 1, got {self.key_len}")
        check(self.value_len >= 1, "value_len", f"must be >= 1, got {self.value_len}")
        check(self.vocab >= 4, "vocab", f"must be >= 4, got {self.vocab}")
        check(self.n_keys >= self.key_len, "key_len",
              f"a key holds distinct ids: must be <= the {self.n_keys} key ids of vocab {self.vocab}, "
              f"got {self.key_len}")
        check(self.n_values >= self.value_len, "value_len",
              f"a value holds distinct ids: must be <= the {self.n_values} value ids of vocab {self.vocab}, "
              f"got {self.value_len}")
        need = 1 + 2 * self.key_len + 2 * self.value_len
        check(self.N >= need, "N", f"must be >= {need} (one pair and the probe at their longest), got {self.N}")

    @property
    def n_keys(self) -> int:
        return (self.vocab - 2) // 2

    @property
    def n_values(self) -> int:
        return self.vocab - 2 - self.n_keys

    @property
    def pad(self) -> int:
        return self.vocab - 2

    @property
    def marker(self) -> int:
        return self.vocab - 1

    @property
    def n_pairs(self) -> int:
        return (self.N - 1 - self.key_len - self.value_len) // (self.key_len + self.value_len)

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", self.vocab, self.N, self.vocab, "mask")

    @property
    def chance_accuracy(self) -> float:
        return 1.0 / self.n_values

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        dev = generator.device
        m, K, kl, vl = self.n_pairs, self.n_keys, self.key_len, self.value_len
        # every draw in bulk from the generator; the variable-length assembly in plain Python
        klen = torch.randint(1, kl + 1, (n, m), generator=generator, device=dev).tolist()
        vlen = torch.randint(1, vl + 1, (n, m), generator=generator, device=dev).tolist()
        kids = torch.rand(n, m, K, generator=generator, device=dev).argsort(-1)[..., :kl].tolist()
        vids = (K + torch.rand(n, m, self.n_values, generator=generator, device=dev).argsort(-1)[..., :vl]).tolist()
        pick = torch.rand(n, generator=generator, device=dev).tolist()
        xs: list[list[int]] = []
        first: list[list[int]] = []  # q's value ids, -1 past its end
        for i in range(n):
            table: dict[tuple[int, ...], tuple[int, ...]] = {}
            prompt: list[int] = []
            for j in range(m):
                k = tuple(kids[i][j][:klen[i][j]])
                v = table.setdefault(k, tuple(vids[i][j][:vlen[i][j]]))
                prompt += [*k, *v]
            shown = list(table)  # distinct keys, in order of first appearance
            q = shown[min(int(pick[i] * len(shown)), len(shown) - 1)]
            tail = [self.marker, *q, *[self.pad] * vl]
            xs.append([self.pad] * (self.N - len(prompt) - len(tail)) + prompt + tail)
            first.append(list(table[q]) + [-1] * (vl - len(table[q])))
        x = torch.tensor(xs, dtype=torch.long, device=dev)
        ans = torch.tensor(first, dtype=torch.long, device=dev).reshape(n, vl)
        y = torch.zeros(n, self.N, dtype=torch.long, device=dev)
        y[:, self.N - vl:] = ans.clamp(min=0)
        mask = torch.zeros(n, self.N, dtype=torch.bool, device=dev)
        mask[:, self.N - vl:] = ans >= 0
        return Batch(x, y, mask)

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy on n test examples of "constant" (the most frequent label) and "value-mode"
        (the most frequent value id of the input, at every slot)."""
        b = self.sample_test(n, generator)
        mode = token_mode(b.x, self.n_keys, self.n_keys + self.n_values)
        return {"constant": self.constant_accuracy(b),
                "value-mode": self.label_accuracy(mode.unsqueeze(1).expand_as(b.x), b)}
