"""What the shipped machines share: the tiny float64 layer they build pools and schedulers
for, and the id ranges (with their strategies) of the requests, sessions and cache nodes they
draw."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from slotwarden.kernels.layer import TinyMamba, TinyMambaConfig
from slotwarden.model.vocabulary import Event

MODEL = TinyMamba(TinyMambaConfig(layers=1, d_model=8, heads=1, head_dim=4, dstate=4, dtype=torch.float64))
"""The layer every machine's pool and scheduler is shaped for (float64: bit-for-bit checks)."""

REQUEST_IDS = range(1, 10)
SESSION_IDS = range(1001, 1010)
"""Request and session ids come from disjoint ranges, so an id of one kind used where the other
belongs never matches by accident."""
NODE_IDS = range(2001, 2010)
"""Cache node ids: a third disjoint range."""
RIDS, SIDS, NODES = st.sampled_from(REQUEST_IDS), st.sampled_from(SESSION_IDS), st.sampled_from(NODE_IDS)
EVENTS = st.sampled_from(list(Event))
