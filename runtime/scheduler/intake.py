"""What `Scheduler.submit` accepts: each argument normalised, or refused with a typed error
naming the bad value, before anything is recorded."""

from __future__ import annotations

from slotwarden.model.errors import shown

import math
from collections.abc import Sequence

import numpy as np
import torch

from slotwarden.kernels.sample import MIN_TEMPERATURE, to_int64

from slotwarden.runtime.scheduler.errors import BadRequest, UnknownRequest, UnknownSession


def is_int(value) -> bool:
    """A Python or numpy integer; never a bool (True would alias id 1)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def prompt_tokens(prompt, vocab: int | None) -> list[int]:
    """`prompt` as a list of ints in 0..vocab-1 (a sequence of ints, or a 1-D integer tensor
    or array); raises `BadRequest` naming the first bad token and its position."""
    if isinstance(prompt, (str, bytes)) or not isinstance(prompt, (Sequence, torch.Tensor, np.ndarray)):
        # a set or a dict has no order to feed; an iterator could not be read twice
        raise BadRequest(
            f"a prompt is an ordered sequence of token ids (a list, tuple, range, 1-D tensor or array), "
            f"not {type(prompt).__name__} {shown(prompt)}"
        )
    if isinstance(prompt, (torch.Tensor, np.ndarray)):
        if prompt.ndim != 1:
            raise BadRequest(f"a prompt tensor must be 1-D, not of shape {tuple(prompt.shape)}")
        if isinstance(prompt, torch.Tensor):
            if prompt.is_floating_point() or prompt.is_complex() or prompt.dtype is torch.bool:
                raise BadRequest(f"prompt tokens must be integers, not {prompt.dtype}")
            if prompt.is_meta:
                raise BadRequest("a prompt tensor on the meta device has no values to read")
            prompt = prompt.tolist()  # a device sync for a tensor on the device
        elif prompt.dtype.kind not in "iu":
            raise BadRequest(f"prompt tokens must be integers, not {prompt.dtype}")
    tokens = list(prompt)
    if not tokens:
        raise BadRequest("a request needs at least one prompt token")
    for i, t in enumerate(tokens):
        if not is_int(t):
            raise BadRequest(f"prompt token {shown(t)} at position {i} is not an int ({type(t).__name__})")
        if t < 0 or (vocab is not None and t >= vocab):
            raise BadRequest(f"prompt token {int(t)} at position {i} is outside the vocabulary 0..{vocab - 1}")
    return [int(t) for t in tokens]


MAX_NEW_TOKENS = 2**31 - 1  # far past any real generation: a larger budget is a mistake, refused


def new_token_budget(n) -> int:
    if not is_int(n) or not 1 <= n <= MAX_NEW_TOKENS:
        raise BadRequest(f"max_new_tokens must be an int in 1..{MAX_NEW_TOKENS}, not {shown(n)}")
    return int(n)


def request_id(rid, issued: int) -> int:
    if not is_int(rid) or not 0 <= rid < issued:
        issued_so_far = f"ids handed out so far are 0..{issued - 1}" if issued else "no request has been submitted yet"
        raise UnknownRequest(f"no request {shown(rid)}: {issued_so_far}")
    return int(rid)


def session_id(sid, issued: int) -> int:
    if not is_int(sid) or not 0 <= sid < issued:
        issued_so_far = f"ids handed out so far are 0..{issued - 1}" if issued else "no session has been opened yet"
        raise UnknownSession(f"no session {shown(sid)}: {issued_so_far}")
    return int(sid)


MAX_SAMPLES = 256  # samples of one prompt in one call: a larger n is a mistake, refused


def sample_count(n) -> int:
    if not is_int(n) or not 1 <= n <= MAX_SAMPLES:
        raise BadRequest(f"n must be an int in 1..{MAX_SAMPLES}, not {shown(n)}")
    return int(n)


def temperature(value) -> float:
    """A finite float (or int) that is 0 (greedy) or at least `MIN_TEMPERATURE` (a smaller
    positive one would overflow the logits it divides)."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    try:
        t = float(value) if ok else math.nan
    except OverflowError:  # an int too large for a float
        t = math.nan
    if not math.isfinite(t) or t < 0:
        raise BadRequest(f"temperature must be a finite number >= 0 (0: greedy), not {shown(value)}")
    if 0 < t < MIN_TEMPERATURE:
        raise BadRequest(
            f"temperature {shown(value)} is too small to divide by: 0 (greedy) or at least {MIN_TEMPERATURE}"
        )
    return t


def sampling_seed(seed, default: int) -> int:
    """`seed` (any int, reduced modulo 2**64) as the int64 the device keeps; None: `default`."""
    if seed is None:
        return to_int64(default)
    if not is_int(seed):
        raise BadRequest(f"seed must be an int or None, not {shown(seed)}")
    return to_int64(int(seed))


MAX_DRAFTS = 16  # a window of 17 slots: past it, a request would hold most of a small pool


def draft_count(spec_k, temperature: float) -> int:
    """`spec_k`, the drafts a speculative request verifies per step (0: off): an int in
    0..MAX_DRAFTS, and greedy only (acceptance compares the target's greedy tokens)."""
    if not is_int(spec_k) or not 0 <= spec_k <= MAX_DRAFTS:
        raise BadRequest(f"spec_k must be an int in 0..{MAX_DRAFTS} (0: off), not {shown(spec_k)}")
    if spec_k and temperature > 0:
        raise BadRequest(f"speculative decoding (spec_k {int(spec_k)}) accepts greedily: it needs temperature 0")
    return int(spec_k)
