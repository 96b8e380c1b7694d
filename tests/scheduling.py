"""Shared builders for scheduler tests: a TinyMamba and a pool whose shapes match it."""

import torch

from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.runtime.scheduler.build import build
from slotwarden.runtime.pool import StatePool
from slotwarden.runtime.scheduler.scheduler import Scheduler
from slotwarden.runtime.scheduler.shapes import pool_config

MODEL = TinyMamba(TinyMambaConfig(dtype=torch.float64))


def make_pool(slots: int) -> StatePool:
    return StatePool(pool_config(MODEL, slots))


def make_scheduler(slots: int = 4, model=MODEL, **config) -> Scheduler:
    return build(model, slots=slots, **config)


def fresh_state(tokens):
    """(conv, ssm) of slot 1 after feeding `tokens` from zero, and the next token."""
    conv, ssm = MODEL.new_state(1)
    nxt = MODEL.prefill([torch.tensor(tokens, dtype=torch.int64)], torch.tensor([1]), conv, ssm)
    return conv[:, 1], ssm[:, 1], int(nxt[0])
