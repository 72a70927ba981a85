"""Synthetic sample lengths for benchmarks and tests (seeded, pure Python).

`lognormal`: post-training-like lengths, long-tailed: ``exp(N(mu, sigma))`` rounded and
clipped to ``[min_tokens, max_tokens]``; the defaults (mu = ln 1000, sigma = 1.2, clip
[16, 32768]) give a median of about 1,000 tokens, a mean near 2,000 and about 0.2% of
samples at the 32k clip. `uniform`: the control, every length equally likely.
"""

from __future__ import annotations

import math
import random

LOGNORMAL_MU = math.log(1000.0)
LOGNORMAL_SIGMA = 1.2
MIN_TOKENS = 16
MAX_TOKENS = 32768


def lognormal(count: int, seed: int, *, mu: float = LOGNORMAL_MU,
              sigma: float = LOGNORMAL_SIGMA, min_tokens: int = MIN_TOKENS,
              max_tokens: int = MAX_TOKENS) -> list[int]:
    """`count` lengths ``clip(round(exp(N(mu, sigma))), min_tokens, max_tokens)``."""
    rng = random.Random(seed)
    return [min(max_tokens, max(min_tokens, round(rng.lognormvariate(mu, sigma))))
            for _ in range(count)]


def uniform(count: int, seed: int, *, min_tokens: int = MIN_TOKENS,
            max_tokens: int = 4096) -> list[int]:
    """`count` lengths drawn uniformly from ``[min_tokens, max_tokens]``."""
    rng = random.Random(seed)
    return [rng.randint(min_tokens, max_tokens) for _ in range(count)]
