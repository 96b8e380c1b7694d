"""The ledger's one-slot and per-actor lanes against its plain `apply`, move by move.

A script of a session's life (admit, park, lend, a borrowed turn, finish, close, and refused
moves between) runs on twin ledgers: `apply` on the reference; `apply_one` down the compiled
move, with and without a `before_write` hook (which must see the one slot before it moves),
and down the per-slot path (no compiled move). After every move each twin holds the same
record for every slot; a refused move raises the same error on each and changes nothing.
`apply_each` on batches larger than the per-slot path takes agrees the same way between the
compiled move and the numpy path.
"""

from __future__ import annotations

from slotwarden.model.vocabulary import Actor, Event
from slotwarden.runtime.ledger.ledger import SlotLedger

R1, R2, R3, S5 = Actor.request(1), Actor.request(2), Actor.request(3), Actor.session(5)
SCRIPT = (  # event, slot, actor, target (None: no target, `apply_one` can fire it)
    (Event.ADMIT, 1, R1, None),
    (Event.ADMIT, 2, R1, None),
    (Event.FINISH, 1, R3, None),  # refused: not its slot
    (Event.PARK, 1, R1, 5),
    (Event.FINISH, 2, R1, None),
    (Event.LEND, 1, S5, 2),
    (Event.ADMIT, 1, R2, None),
    (Event.CLOSE, 1, S5, None),  # refused: lent to a running turn
    (Event.FINISH, 1, R2, None),
    (Event.ROLLBACK, 1, R1, None),  # refused: parked, and not request 1's
    (Event.CLOSE, 1, S5, None),
)


def _ledger(compiled: bool) -> SlotLedger:
    ledger = SlotLedger(4)
    ledger.alloc(2, R1)
    if not compiled:
        ledger.mover = None  # the path of a build without the compiled move
    return ledger


def problems() -> list[str]:
    ref = _ledger(True)
    twins = {"compiled": _ledger(True), "compiled, hooked": _ledger(True), "per-slot": _ledger(False)}
    seen: list = []
    moved: list = []
    out = []
    for event, slot, actor, target in SCRIPT:
        want = _outcome(
            lambda: ref.apply(event, [slot], actor) if target is None else ref.apply(event, [slot], actor, target)
        )
        for name, led in twins.items():
            if target is not None:
                got = _outcome(lambda: led.apply(event, [slot], actor, target))
            elif name == "compiled, hooked":
                got = _outcome(
                    lambda: led.apply_one(event, slot, actor, before_write=lambda b: seen.append(b.ids.tolist()))
                )
            else:
                got = _outcome(lambda: led.apply_one(event, slot, actor))
            if got != want or _records(led) != _records(ref):
                out.append(
                    f"{event.name} of slot {slot} by {actor} ({name}): {got} and {_records(led)}, "
                    f"want {want} and {_records(ref)}"
                )
                return out
        if target is None and want == "ok":
            moved.append([slot])
    if seen != moved:
        out.append(f"before_write saw {seen}: want the slot of each one-slot move made, {moved}")
    return out + _each()


def _each() -> list[str]:
    out = []
    ledgers = {"compiled": SlotLedger(6), "numpy": SlotLedger(6)}
    ledgers["numpy"].mover = None
    results = {}
    for name, led in ledgers.items():
        ids = led.alloc_each([1, 2, 3, 4])
        steps = [
            _outcome(lambda: led.apply_each(Event.ADMIT, ids, [1, 2, 3, 4])),
            _outcome(lambda: led.apply_each(Event.FINISH, ids, [1, 2, 9, 4])),  # slot 3 is not request 9's
            _outcome(lambda: led.apply_each(Event.FINISH, ids, [1, 2, 3, 4])),
        ]
        results[name] = (steps, _records(led))
    if results["compiled"] != results["numpy"]:
        out.append(f"apply_each: compiled {results['compiled']}, numpy path {results['numpy']}")
    elif "slot 3" not in results["numpy"][0][1]:
        out.append(f"apply_each refused {results['numpy'][0][1]!r}, not naming slot 3")
    return out


def _outcome(thunk) -> str:
    try:
        thunk()
    except Exception as e:  # noqa: BLE001 (the error and its text are compared)
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"
    return "ok"


def _records(ledger: SlotLedger) -> list:
    return [tuple(ledger.record(s)) for s in range(1, ledger.capacity + 1)]
