"""verify's 'guard step' row: the drop-in allocator's step check against the model's."""

import torch

from slotwarden.verification.edges import guard_step


def test_the_guards_step_check_agrees_with_the_models():
    assert guard_step.problems() == []


def test_a_guard_check_blind_to_reads_is_found():
    def no_sources(a, ids, who, src):  # the engine's copy sources dropped: reads of another's slot pass
        a.check_step(torch.tensor(ids), who, 0, None)

    found = guard_step.disagreements(no_sources, steps=400)
    assert found and any(got is None for _, _, got in found)


def test_a_guard_check_that_lets_a_pad_row_anywhere_is_found():
    def pads_anywhere(a, ids, who, src):
        real = [i for i, w in enumerate(who) if w != guard_step.NOBODY]
        pick = (lambda v: [v[i] for i in real]) if real else None
        if pick:
            a.check_step(torch.tensor(pick(ids)), pick(who), 0, None if src is None else pick(src))

    assert guard_step.disagreements(pads_anywhere, steps=400)
