"""What the scheduler does with a finished step's results, as functions of the data they change.

`process_landed` appends each row's token to its request (a row of an aborted or retracted
request is void) and queues requests at their budget to finish; `finish_group` says which of
them give their slots back in one FINISH.
"""

from __future__ import annotations


def process_landed(done, device, finishing) -> None:
    """The host learns a finished step's tokens (one `.tolist()`: the step's one device sync on
    CUDA, taken only once the step is done); requests at their budget join `finishing`. Each row
    is taken off only once done, so a fault leaves exactly the rest for the next call."""
    device.finish(done.step)
    if done.host is None:
        done.host = done.tokens.tolist()
    if done.kind == "verify":  # its rows are committed once the step is fenced (windows.py)
        return
    rows = done.rows
    while rows:
        req, generation, row = rows[0]
        if not (req.done or generation != req.generation or row is None):  # else void: aborted or retracted
            req.pending_outputs -= 1
            req.output.append(done.host[row])
            if len(req.output) >= req.max_new_tokens:
                finishing.append(req)
        rows.popleft()


def finish_group(finishing) -> list:
    """The requests waiting to finish, in order, up to the first that parks its slot in its
    session (that one goes alone): every one of them gives its slot back by FINISH."""
    group = []
    for req in finishing:
        if req.done:
            continue
        if req.session is not None and not req.lent:
            break
        group.append(req)
    return group
