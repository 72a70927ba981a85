"""Write the DERIVED per-layer profiles of profiles/layers/ (DESIGN.md 6.7).

Nothing here is measured: every time and memory figure comes from FLOP and activation
formulas and a stated GPU throughput, written into each file's `description`. They give the
partitioner real shapes (a 128k-vocabulary LM head costing several blocks, attention
growing with the sequence), not real timings.

    python -m benchmarks.layer_profiles    # rewrites profiles/layers/*.json
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "profiles" / "layers"

# H100 SXM: 989 TFLOP/s dense bf16, 3.35 TB/s HBM; at the stated efficiencies.
PEAK_FLOPS = 989e12
MFU = 0.5
HBM_BYTES_PER_S = 3.35e12
HBM_EFFICIENCY = 0.7
GIB = 2.0**30
T_COMM_MS = 0.05  # an assumed activation send per link (small next to the layers' ms)


@dataclass(frozen=True)
class Shape:
    name: str
    hidden: int
    blocks: int
    heads: int
    kv_heads: int
    ffn: int
    gated: bool  # SwiGLU (three MLP matrices) or GELU (two)
    vocab: int
    seq: int
    microbatch: int
    tp: int  # tensor-parallel GPUs per stage (times and activations divide by it)
    num_ranks: int
    num_microbatches: int
    note: str


SHAPES = (
    Shape("llama3-8b", 4096, 32, 32, 8, 14336, True, 128256, 8192, 1, 1, 4, 16,
          "Llama-3 8B shape"),
    Shape("llama3-70b", 8192, 80, 64, 8, 28672, True, 128256, 8192, 1, 8, 8, 32,
          "Llama-3 70B shape, tensor parallel 8 within each stage (64 GPUs)"),
    Shape("gpt3-13b", 5120, 40, 40, 40, 20480, False, 50257, 2048, 1, 1, 8, 32,
          "GPT-3 13B shape"),
    Shape("gpt3-175b", 12288, 96, 96, 96, 49152, False, 50257, 2048, 1, 8, 16, 64,
          "GPT-3 175B shape, tensor parallel 8 within each stage (128 GPUs)"),
    Shape("gpt1.5b", 2304, 22, 24, 24, 9216, False, 50257, 1024, 6, 1, 8, 24,
          "the Zero Bubble paper's 1.5B shape (its Table 3) with a 50k vocabulary"),
)


def _ms(flops: float) -> float:
    return flops / (PEAK_FLOPS * MFU) * 1e3


def _ms_bytes(moved: float) -> float:
    return moved / (HBM_BYTES_PER_S * HBM_EFFICIENCY) * 1e3


def layers_of(x: Shape) -> list[dict[str, object]]:
    tokens = x.seq * x.microbatch
    h, f, g = x.hidden, x.ffn, x.kv_heads / x.heads
    attn_params = h * h * (2 + 2 * g)
    block_params = attn_params + (3 if x.gated else 2) * h * f
    # Causal attention: QK^T and AV, 2*s*s*h each per sequence, half masked away.
    attention = 2 * x.microbatch * x.seq * x.seq * h
    matmul = 2 * tokens * block_params
    # Activations one F keeps (bytes, bf16), Korthikanti et al. 2022 without the s^2 term
    # (flash attention): GPT 34 s*b*h; gated MLP: (12 + 4g) s*b*h + 6 s*b*f.
    sbh = tokens * h
    m_b = 34 * sbh if not x.gated else (12 + 4 * g) * sbh + 6 * tokens * f
    # W reads the inputs of the linear layers: QKV, output projection, MLP in, MLP out.
    m_w = 6 * sbh + 2 * tokens * f

    def entry(name: str, t_f: float, t_b: float, t_w: float, mb: float, mw: float,
              params: float) -> dict[str, object]:
        tp = x.tp
        return {"name": name, "t_f": round(t_f / tp, 4), "t_b": round(t_b / tp, 4),
                "t_w": round(t_w / tp, 4), "m_b": round(mb / tp / GIB, 5),
                "m_w": round(mw / tp / GIB, 5), "params_bytes": 2 * params / tp}

    out = [entry("tok_embeddings", _ms_bytes(2 * 2 * sbh), 0.0, _ms_bytes(3 * 2 * sbh),
                 8 * tokens, 2 * sbh, x.vocab * h)]
    for i in range(x.blocks):
        out.append(entry(f"layers.{i}", _ms(matmul + attention), _ms(matmul + 2 * attention),
                         _ms(matmul), m_b, m_w, block_params))
    out.append(entry("norm", _ms_bytes(2 * 2 * sbh), _ms_bytes(3 * 2 * sbh),
                     _ms_bytes(2 * 2 * sbh), 2 * sbh, 0.0, h))
    head = 2 * tokens * h * x.vocab
    # The loss reads and writes the fp32 logits (softmax, then its gradient).
    loss = _ms_bytes(2 * 4 * tokens * x.vocab)
    out.append(entry("lm_head", _ms(head) + loss, _ms(head) + loss, _ms(head),
                     2 * sbh + 4 * tokens * x.vocab, 2 * sbh, x.vocab * h))
    return out


def one_p(layers: list[dict[str, object]], num_ranks: int, num_microbatches: int,
          ) -> float:
    """1p: the activation memory 1F1B needs on its busiest rank with the even split of
    the blocks (the embedding on the first stage, norm and head on the last): rank r
    holds min(p - r, m) microbatches of its stage."""
    blocks = layers[1:-2]
    base, extra = divmod(len(blocks), num_ranks)
    counts = [base + (r < extra) for r in range(num_ranks)]
    sizes, start = [], 0
    for r, count in enumerate(counts):
        stage = blocks[start:start + count] + ([layers[0]] if r == 0 else []) \
            + (layers[-2:] if r == num_ranks - 1 else [])
        start += count
        sizes.append(sum(float(str(x["m_b"])) for x in stage))
    return max(min(num_ranks - r, num_microbatches) * size for r, size in enumerate(sizes))


def description(x: Shape) -> str:
    return (
        f"DERIVED, NOT MEASURED. {x.note}: hidden {x.hidden}, {x.blocks} blocks, "
        f"{x.heads} heads ({x.kv_heads} KV), FFN {x.ffn} ({'SwiGLU' if x.gated else 'GELU'}), "
        f"vocabulary {x.vocab}, sequence {x.seq}, microbatch {x.microbatch}"
        + (f", tensor parallel {x.tp} per stage (times and memory divided by {x.tp})"
           if x.tp > 1 else "")
        + ". Times in ms at an assumed "
        f"{PEAK_FLOPS * MFU / 1e12:.1f} TFLOP/s (H100 dense bf16 peak {PEAK_FLOPS / 1e12:.0f}"
        f" at MFU {MFU}); memory-bound ops (embedding, norm, the loss over fp32 logits) at "
        f"{HBM_EFFICIENCY:.0%} of {HBM_BYTES_PER_S / 1e12:.2f} TB/s. Block: F = 2 * tokens "
        "* params + causal attention 2*b*s^2*h; B = the same matmuls + twice the "
        "attention (its backward has no weights); W = the matmuls. Embedding: a lookup (no "
        "FLOPs, no B); head: a 2*h*V-per-token matmul in F, B and W plus the loss. Memory in "
        "GiB per microbatch: a block keeps 34*s*b*h bytes (Korthikanti et al. 2022, flash "
        "attention; gated MLPs (12+4*kv/heads)*s*b*h + 6*s*b*f), W holds the linear layers' "
        "inputs (6*s*b*h + 2*s*b*f); the head keeps its input and the fp32 logits "
        "(4*s*b*V). t_comm: an assumed 0.05 ms per link. memory_limit is 1p: what 1F1B "
        "needs on its busiest rank with the even split of the blocks.")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for x in SHAPES:
        layers = layers_of(x)
        data = {"name": f"{x.name}-p{x.num_ranks}-m{x.num_microbatches}",
                "description": description(x), "num_ranks": x.num_ranks,
                "num_microbatches": x.num_microbatches, "t_comm": T_COMM_MS,
                "memory_limit": round(one_p(layers, x.num_ranks, x.num_microbatches), 4),
                "layers": layers}
        path = OUT / f"{data['name']}.json"
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
