"""The advisor's length distribution: where a step's sample lengths come from.

`ppsched advise CONFIG --lengths SOURCE` takes either a file of real lengths (``.jsonl``
with a length field, ``.parquet``, or text with one number a line; read by
`solver.packing.read_lengths`, whose errors name the file, line and field) or a lognormal
given by its parameters, ``lognormal:median=1000,sigma=1.2`` (optional ``min``, ``max``
clip and ``seed``), drawn by `solver.packing.synthetic.lognormal`.

A step (one minibatch: the samples every device trains on before one optimizer update)
takes ``samples_per_device * devices`` samples. A file's samples are cut into
consecutive minibatches in file order (the order a loader would read them); a lognormal
draws each minibatch from its own seed. Either way the advisor averages over `steps`
minibatches, so one unlucky draw does not decide the ranking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ppsched.solver.packing.lengths import LengthsError, read_lengths
from ppsched.solver.packing.synthetic import MAX_TOKENS, MIN_TOKENS, lognormal

LOGNORMAL_PREFIX = "lognormal:"
# The lognormal's keys and what each accepts (for the error messages).
_KEYS = {"median": "tokens > 0", "sigma": "a spread >= 0", "min": "tokens >= 1",
         "max": "tokens >= min", "seed": "an integer"}


@dataclass(frozen=True)
class LengthSource:
    """A parsed ``--lengths`` value: a file, or a lognormal's parameters."""

    path: Path | None = None
    field: str = "length"
    median: float = 1000.0
    sigma: float = 1.2
    min_tokens: int = MIN_TOKENS
    max_tokens: int = MAX_TOKENS
    seed: int = 0

    def describe(self) -> str:
        """One line for the printed assumptions."""
        if self.path is not None:
            return f"file {self.path.name}" + (f" (field '{self.field}')"
                                               if self.path.suffix in (".jsonl", ".parquet")
                                               else "")
        return (f"lognormal median={self.median:g} sigma={self.sigma:g} clipped to "
                f"[{self.min_tokens}, {self.max_tokens}], seed {self.seed}")


def parse_length_source(text: str, field: str = "length") -> LengthSource:
    """``PATH`` or ``lognormal:KEY=VALUE,...`` as a LengthSource.

    Raises:
        LengthsError: an unknown key, a bad value, or a clip range that is empty.
    """
    if not text.startswith(LOGNORMAL_PREFIX):
        return LengthSource(path=Path(text), field=field)
    values: dict[str, float] = {}
    for i, item in enumerate(x for x in text[len(LOGNORMAL_PREFIX):].split(",") if x.strip()):
        key, sep, raw = (s.strip() for s in item.partition("="))
        where = f"--lengths lognormal[{i}]"
        if not sep or key not in _KEYS:
            raise LengthsError(where, item, "KEY=VALUE with KEY one of " + ", ".join(_KEYS))
        try:
            value = float(raw)
        except ValueError:
            raise LengthsError(f"--lengths lognormal.{key}", raw, _KEYS[key]) from None
        whole = key in ("min", "max", "seed")
        if not math.isfinite(value) or (whole and value != int(value)) or (
                key == "median" and value <= 0) or (key == "sigma" and value < 0) or (
                key in ("min", "max") and value < 1):
            raise LengthsError(f"--lengths lognormal.{key}", raw, _KEYS[key])
        values[key] = value
    source = LengthSource(
        median=values.get("median", 1000.0), sigma=values.get("sigma", 1.2),
        min_tokens=int(values.get("min", MIN_TOKENS)),
        max_tokens=int(values.get("max", MAX_TOKENS)), seed=int(values.get("seed", 0)))
    if source.max_tokens < source.min_tokens:
        raise LengthsError("--lengths lognormal.max", source.max_tokens,
                           f"tokens >= min ({source.min_tokens})")
    return source


def minibatches(source: LengthSource, per_step: int, steps: int) -> list[list[int]]:
    """`steps` minibatches of `per_step` sample lengths each (fewer steps when a file
    holds fewer samples; its tail that does not fill a minibatch is left out).

    Raises:
        LengthsError: the file's errors (named by `read_lengths`), or a file with fewer
            samples than one minibatch.
    """
    if source.path is None:
        mu = math.log(source.median)
        return [lognormal(per_step, source.seed * 1_000_003 + k, mu=mu, sigma=source.sigma,
                          min_tokens=source.min_tokens, max_tokens=source.max_tokens)
                for k in range(steps)]
    lengths = read_lengths(source.path, source.field)
    if len(lengths) < per_step:
        raise LengthsError("--lengths", f"{source.path.name}: {len(lengths)} samples",
                           f"at least one minibatch of {per_step} samples (samples per "
                           "device x devices)")
    count = min(steps, len(lengths) // per_step)
    return [lengths[k * per_step:(k + 1) * per_step] for k in range(count)]
