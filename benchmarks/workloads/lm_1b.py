"""A GPT-style language model of 1.3B parameters (24 layers, d_model 2048, vocabulary 50,257, sequence 1024, batch 8,
AdamW): a model this 2-core, 23 GiB machine cannot train, for the refusals of `dlperf crossover` and `dlperf advise`
and the speed of `dlperf predict --memory` (benchmarks/predict_memory.py). `small` is the same code at 2 layers of
256.

    dlperf predict benchmarks/workloads/lm_1b.py:make --memory --gpu A100-SXM4-40GB
    dlperf crossover benchmarks/workloads/lm_1b.py:make --gpu T4
"""

import torch
from torch import nn

import dlperf

VOCAB, SEQ = 50257, 1024


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).triu(1)
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class LM(nn.Module):
    def __init__(self, layers: int, d: int, heads: int, seq: int = SEQ) -> None:
        super().__init__()
        self.embed, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*(Block(d, heads) for _ in range(layers)))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.embed.weight  # tied, as GPT-2's

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        return self.head(self.norm(self.blocks(x)))  # (B, T, VOCAB)


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _workload(name: str, model: nn.Module, seq: int, batch: int):
    def make_batch(batch_size: int, device: torch.device):
        tokens = torch.randint(0, VOCAB, (batch_size, seq + 1), device=device)
        return tokens[:, :-1], tokens[:, 1:]

    return dlperf.user_workload(name, model, make_batch, lm_loss, batch_size=batch,
                                optimizer=lambda params: torch.optim.AdamW(params, lr=1e-4))  # fmt: skip


def make():
    """1.3B parameters: 24 layers of d_model 2048, 16 heads, sequence 1024, batch 8."""
    return _workload("lm-1.3b", LM(24, 2048, 16), SEQ, 8)


def small():
    """The same code at 2 layers of 256 (14M parameters, most of them the embedding and the head), sequence 128."""
    return _workload("lm-small", LM(2, 256, 4, seq=128), 128, 8)
