"""torchtitan 0.3.0's own training loop (`Trainer`, built by its `ConfigManager` from
`--module llama3 --config ...` and flags) for a step or two on 2 gloo ranks on CPU, with the
gradient of every parameter recorded just before the optimizer applies it.

Module level, so spawn can pickle the rank function, and torchtitan is imported only inside
it: the CPU shim must be in place before torchtitan's modules read the device type. Each
shim is the least a CPU run without torchtitan's assets needs, and says why:

- `_cpu_device`: torchtitan picks ``_get_available_device_type() or "cuda"``, so on a
  machine without an accelerator it calls ``torch.cuda.set_device`` and builds CUDA meshes;
  this makes its device ``cpu`` (``torch.cpu`` has the same ``set_device`` and
  ``device_count``), before any torchtitan module copies the name.
- `SyntheticTokenizer`, `SyntheticText`: the wheel ships neither the tokenizer files
  (``./tests/assets/tokenizer``) nor the ``c4_test`` dataset, and this runs offline. The
  data are what torchtitan's text loader yields (``{"input", "positions"}`` and labels, one
  sample of ``seq_len`` tokens per microbatch row), from a fixed generator, so every run
  sees the same batches.
- `_causal_sdpa`: FlexAttention, the llama3 configs' attention, has no backward on CPU in
  torch 2.13; torchtitan's own causal SDPA attention computes the same for one document
  per row.
- `_step_shim`: torchtitan 0.3.0 calls ``step(arg_mbs=, kwarg_mbs=, target_mbs=, ...)``,
  which torch 2.13's ``step`` does not take (docs/running.md, "torch's version"); installed
  only when the installed torch's ``step`` lacks ``arg_mbs``.
- `_set_timeout_shim`: after the first step torchtitan shortens its process groups'
  timeouts with ``torch.distributed.set_timeout``, which torch 2.13 has only as the private
  ``distributed_c10d._set_pg_timeout``.

Besides the run's size and seed (``--training.seq_len``, ``--training.steps``,
``--debug.seed``) and no checkpoint, validation or TensorBoard files, nothing else is
changed: torchtitan's config (the ppsched flags included), model, weight init, FSDP2
wrapping (bf16 compute unless a flag says otherwise), activation checkpointing, loss,
schedule, gradient clipping and optimizer are its own. The process group is the
launcher's (gloo), which torchtitan's ``init_distributed`` adopts.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

SEED = 7
SEQ_LEN = 32  # tokens per sample: small, so a CPU step takes seconds
AC_WRAPPER = "_checkpoint_wrapped_module."  # activation checkpointing's name infix


class _CpuDeviceModule:
    """``torch.cpu`` plus the memory-monitor calls torchtitan's metrics make of a device
    module (``torch.cpu`` has no allocator statistics: empty ones, the host's RAM as the
    capacity); they only feed its log lines."""

    set_device = staticmethod(torch.cpu.set_device)
    device_count = staticmethod(torch.cpu.device_count)

    @staticmethod
    def current_device() -> int:
        # An index, as torch.cuda's is: torchtitan passes it to barrier(device_ids=).
        return 0
    synchronize = staticmethod(torch.cpu.synchronize)

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return "cpu"

    @staticmethod
    def get_device_properties(device: Any = None) -> Any:
        return SimpleNamespace(
            total_memory=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))

    @staticmethod
    def memory_stats(device: Any = None) -> dict[str, int]:
        return {}

    @staticmethod
    def reset_peak_memory_stats(device: Any = None) -> None:
        return None

    @staticmethod
    def empty_cache() -> None:
        return None


def _cpu_device() -> None:
    from torchtitan.tools import utils

    utils.device_type, utils.device_module = "cpu", _CpuDeviceModule


def _step_shim() -> None:
    from torch.distributed.pipelining import schedules

    def step(self: Any, *, arg_mbs: list | None = None, kwarg_mbs: list | None = None,
             target_mbs: list | None = None, losses: list | None = None,
             return_outputs: bool = True,
             loss_kwargs: dict[str, Any] | None = None) -> None:
        # What torch 2.13's step() does before it splits a whole batch, then the
        # pre-split lists torchtitan passes (tests/interop/titan_side.py has the same).
        stages = getattr(self, "_stages", None) or [self._stage]
        for stage in stages:
            stage.has_backward = self._has_backward
            stage.clear_runtime_states()
        self._step_microbatches(arg_mbs, kwarg_mbs, target_mbs, losses, return_outputs,
                                loss_kwargs=loss_kwargs)

    for cls in (schedules.PipelineScheduleSingle, schedules.PipelineScheduleMulti):
        if "arg_mbs" not in inspect.signature(cls.step).parameters:
            cls.step = step  # type: ignore[method-assign]


def _set_timeout_shim() -> None:
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    if not hasattr(dist, "set_timeout"):
        # torch 2.13's private name for the same call.
        dist.set_timeout = distributed_c10d._set_pg_timeout  # type: ignore[attr-defined]


def _causal_sdpa(model_config: Any) -> None:
    """Each layer's FlexAttention (every llama3 config's) becomes torchtitan's own
    `ScaledDotProductAttention` (causal): torch 2.13's FlexAttention has no backward on CPU
    ("FlexAttention does not support backward on CPU"). Every row of `SyntheticText` is one
    document, so the causal mask is the block-causal document mask flex would build."""
    from torchtitan.models.common.attention import FlexAttention, ScaledDotProductAttention

    found = list(model_config.traverse(FlexAttention.Config))
    assert found, "no FlexAttention in the model config: the shim no longer fits"
    for _, _, parent, attr in found:
        setattr(parent, attr, ScaledDotProductAttention.Config())


def _synthetic_components(vocab: int) -> tuple[Any, Any]:
    """A tokenizer and a data loader config, as torchtitan `Configurable`s."""
    from torchtitan.components.dataloader import BaseDataLoader
    from torchtitan.components.tokenizer import BaseTokenizer

    class SyntheticTokenizer(BaseTokenizer):
        @dataclass(kw_only=True, slots=True)
        class Config(BaseTokenizer.Config):
            pass

        def __init__(self, config: Any, **_: Any) -> None:
            super().__init__()
            self.eos_id = vocab - 1

        def encode(self, *args: Any, **kwargs: Any) -> list[int]:
            raise NotImplementedError("the synthetic data are token ids already")

        def decode(self, *args: Any, **kwargs: Any) -> str:
            raise NotImplementedError("the synthetic data are token ids already")

        def get_vocab_size(self) -> int:
            return vocab

    class SyntheticText(BaseDataLoader):
        @dataclass(kw_only=True, slots=True)
        class Config(BaseDataLoader.Config):
            pass

        def __init__(self, config: Any, *, seq_len: int, local_batch_size: int,
                     **_: Any) -> None:
            self.seq_len, self.rows = seq_len, local_batch_size

        def __iter__(self) -> Any:
            gen = torch.Generator().manual_seed(SEED)
            while True:
                tokens = torch.randint(0, vocab, (self.rows, self.seq_len + 1),
                                       generator=gen)
                positions = torch.arange(self.seq_len).repeat(self.rows, 1)
                yield {"input": tokens[:, :-1], "positions": positions}, tokens[:, 1:]

        def state_dict(self) -> dict[str, Any]:
            return {}

        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            pass

    return SyntheticTokenizer.Config(), SyntheticText.Config()


def _full(grad: torch.Tensor) -> torch.Tensor:
    full = grad.full_tensor() if hasattr(grad, "full_tensor") else grad
    return full.detach().clone().to(torch.float64)


def train(rank: int, world: int, config_name: str, flags: list[str], folder: str,
          steps: int) -> dict[str, Any]:
    """Run torchtitan's `Trainer.train()` for `steps` steps of ``--module llama3 --config
    config_name`` with `flags` (a recipe's, last: it may end in a tyro sub-command), and
    return per step every parameter's gradient as the optimizer saw it (after torchtitan's
    clipping; names without activation checkpointing's wrapper), the logged loss and
    grad norm (loss -1 on a rank without the last stage)."""
    # What torchrun sets and torchtitan reads (its local device, its rank checks);
    # launch_local has already made the gloo process group.
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_WORLD_SIZE=str(world))
    _cpu_device()
    _step_shim()
    _set_timeout_shim()
    from torchtitan.config import ConfigManager

    config = ConfigManager().parse_args([
        "--module", "llama3", "--config", config_name, f"--dump_folder={folder}",
        f"--training.steps={steps}", f"--training.seq_len={SEQ_LEN}",
        f"--debug.seed={SEED}", "--checkpoint.no-enable", "--validator.no-enable",
        "--metrics.no-enable_tensorboard", *flags])
    _causal_sdpa(config.model_spec.model)
    vocab = config.model_spec.model.vocab_size
    config.tokenizer, config.dataloader = _synthetic_components(vocab)
    trainer = config.build()
    grads: list[dict[str, torch.Tensor | None]] = []
    logged: list[tuple[float, float]] = []
    optimizer_step = trainer.optimizers.step
    metrics_log = trainer.metrics_processor.log

    def record_then_step(*args: Any, **kwargs: Any) -> Any:
        grads.append({name.replace(AC_WRAPPER, ""): None if p.grad is None else _full(p.grad)
                      for part in trainer.model_parts
                      for name, p in part.named_parameters()})
        return optimizer_step(*args, **kwargs)

    def record_then_log(step: int, loss: float, max_loss: float, grad_norm: float,
                        **kwargs: Any) -> Any:
        logged.append((loss, grad_norm))
        return metrics_log(step, loss, max_loss, grad_norm, **kwargs)

    trainer.optimizers.step = record_then_step
    trainer.metrics_processor.log = record_then_log
    try:
        trainer.train()
    finally:
        trainer.close()
    return {"grads": grads, "logged": logged,
            "schedule": type(trainer.pp_schedule).__name__,
            "first": trainer.pp_has_first_stage, "last": trainer.pp_has_last_stage}
