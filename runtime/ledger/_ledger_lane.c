/* The ledger's own lane: `SlotLedger`'s usual `alloc(n, actor)`, `apply(event, ids, actor)` and
 * `fence()` in one C call each (`runtime/ledger/ledger_lane.py` binds them over the methods).
 *
 * It is the compiled form of what the ledger's Python does for the usual call on its compiled
 * move: the same check and write (`move_ids`), then the free ring, the releases filed under the
 * step their fence waits for, and the flight record, with the write's mark held from the write
 * to the record. It decides nothing about the lifecycle: the moves come from the compiled
 * tables, the actor kind of each event and the states that wait for a fence are handed in.
 * The usual call: the ledger's class still has SlotLedger's own methods (asked of `usual`
 * whenever the class changes), the ledger's thread calling, its compiled move bound, one slot
 * or more (`small`, the Python's per-slot size, is not read), an `Actor` of the event's kind
 * with a plain id, a 1-D int64 ndarray of ids
 * outside the ledger's own memory, no target and no `before_write`; a move the kernel accepts
 * from one state to one state; a fence of one filed batch (a run or an array), all due. Every
 * other call goes, untouched, to the class's Python method, which does it or raises the
 * model's typed error. No device sync: host memory only.
 *
 * LedgerLane(ledger, mover, usual, types, ring, per_event, waits, codes)
 *   usual      usual(ledger) -> bool: the class's methods are SlotLedger's own
 *   types      (numpy.ndarray, numpy.empty, numpy int64 dtype, Actor, ActorKind members by value,
 *               Event members by value, FlightRecorder.record, the empty ids array a fence returns,
 *               the query `launch` files for a step finished at once: not called, taken as true)
 *   ring       the ledger's free ring (int32, capacity);  per_event uint8 [2, events]: the
 *              event's actor kind, whether it names a target;  waits uint8 [states]
 *   codes      (ALLOC, FENCE, FREE, RELEASED, the scheduler's kind)
 */
#include "_move.h"

typedef struct {
    PyObject_HEAD
    PyObject *ledger, *usual;
    Mover *mover;
    PyObject *ndarray, *empty, *int64, *actor_type, *kinds, *events, *record_func, *no_ids, *already_done, *nobody;
    Py_buffer ring, per_event, waits;
    int held;
    Py_ssize_t nevents, nstates, nkinds, cap;
    long alloc_event, fence_event, free_state, released_state, scheduler_kind;
    unsigned int tag; /* the ledger's class's version tag when `usual` last said yes (0: ask) */
} LedgerLane;

static PyObject *s_head, *s_count, *s_launched, *s_completed, *s_pending, *s_waiting,
    *s_copy, *s_settle_raw, *s_alloc, *s_apply, *s_fence, *s_start, *s_stop, *s_step, *s_has_free_list;

static int intern_names(void) {
#define NAME(var, text)                                                                                              \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    NAME(s_head, "_head")
    NAME(s_count, "_count") NAME(s_launched, "launched") NAME(s_completed, "completed") NAME(s_pending, "_pending")
    NAME(s_waiting, "_waiting") NAME(s_copy, "copy") NAME(s_settle_raw, "_settle_raw") NAME(s_alloc, "alloc")
    NAME(s_apply, "apply") NAME(s_fence, "fence") NAME(s_start, "start") NAME(s_stop, "stop") NAME(s_step, "step")
    NAME(s_has_free_list, "has_free_list")
#undef NAME
    return 0;
}

static int ll_traverse(LedgerLane *l, visitproc visit, void *arg) {
    Py_VISIT(l->ledger);
    Py_VISIT(l->usual);
    Py_VISIT((PyObject *)l->mover);
    return 0;
}

static void ll_release(LedgerLane *l) {
    Py_buffer *all[3] = {&l->ring, &l->per_event, &l->waits};
    for (int i = 0; i < l->held; i++) PyBuffer_Release(all[i]);
    l->held = 0;
    l->nstates = 0; /* unbound: every call takes the Python method */
}

static int ll_clear(LedgerLane *l) {
    ll_release(l);
    PyObject **all[] = {&l->ledger, &l->usual, (PyObject **)&l->mover, &l->ndarray, &l->empty, &l->int64,
                        &l->actor_type, &l->kinds, &l->events, &l->record_func, &l->no_ids, &l->already_done,
                        &l->nobody};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) Py_CLEAR(*all[i]);
    return 0;
}

static void ll_dealloc(LedgerLane *l) {
    PyObject_GC_UnTrack(l);
    ll_clear(l);
    Py_TYPE(l)->tp_free((PyObject *)l);
}

static int hold(LedgerLane *l, Py_buffer *view, PyObject *obj, Py_ssize_t itemsize, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    l->held++;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: an array of %zd-byte items", what, itemsize);
        return -1;
    }
    return 0;
}

static int ll_init(LedgerLane *l, PyObject *args, PyObject *Py_UNUSED(kw)) {
    PyObject *ledger, *mover, *usual, *ring, *per_event, *waits;
    ll_clear(l);
    if (!PyArg_ParseTuple(args, "OO!O(OOOOO!O!OOO)OOO(lllll)", &ledger, &MoverType, &mover, &usual, &l->ndarray,
                          &l->empty, &l->int64, &l->actor_type, &PyTuple_Type, &l->kinds, &PyTuple_Type, &l->events,
                          &l->record_func, &l->no_ids, &l->already_done, &ring, &per_event, &waits, &l->alloc_event,
                          &l->fence_event, &l->free_state, &l->released_state, &l->scheduler_kind)) {
        l->ndarray = l->empty = l->int64 = l->actor_type = l->kinds = l->events = l->record_func = l->no_ids = NULL;
        l->already_done = NULL;
        return -1;
    }
    PyObject **refs[] = {&l->ndarray, &l->empty, &l->int64, &l->actor_type, &l->kinds, &l->events, &l->record_func,
                         &l->no_ids, &l->already_done};
    for (size_t i = 0; i < sizeof refs / sizeof *refs; i++) Py_INCREF(*refs[i]);
    l->ledger = Py_NewRef(ledger);
    l->usual = Py_NewRef(usual);
    l->mover = (Mover *)Py_NewRef(mover);
    if ((l->nobody = PyLong_FromLong(K_NOBODY)) == NULL) return -1;
    if (hold(l, &l->ring, ring, 4, 1, "ring") < 0 || hold(l, &l->per_event, per_event, 1, 0, "per_event") < 0 ||
        hold(l, &l->waits, waits, 1, 0, "waits") < 0)
        return -1;
    l->nevents = PyTuple_GET_SIZE(l->events);
    l->nkinds = PyTuple_GET_SIZE(l->kinds);
    l->cap = l->ring.len / 4;
    if (l->per_event.len != 2 * l->nevents || l->cap != l->mover->capacity || l->alloc_event >= l->nevents ||
        l->fence_event >= l->nevents || l->waits.len < 1) {
        PyErr_SetString(PyExc_ValueError, "LedgerLane: tables of another shape than the ledger's");
        return -1;
    }
    l->tag = 0;
    l->nstates = l->waits.len;
    return 0;
}

/* Whether the usual call may take the lane: bound, the ledger's class still SlotLedger's methods
 * (its version tag unchanged since `usual` said so), the ledger's thread, its compiled move, its
 * own free list, its fence lists a plain dict. -1: error. */
static int ready(LedgerLane *l) {
    if (l->nstates == 0) return 0;
    PyTypeObject *type = Py_TYPE(l->ledger);
    if (l->tag == 0 || type->tp_version_tag != l->tag) {
        PyObject *r = PyObject_CallOneArg(l->usual, l->ledger);
        if (r == NULL) return -1;
        int yes = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (yes <= 0) return yes;
        (void)_PyType_Lookup(type, s_alloc); /* gives the class a version tag where it has none */
        l->tag = type->tp_version_tag;       /* any later change of the class's attributes changes it */
    }
    int same = owns_ledger(l->ledger);
    if (same > 0) same = same_mover(l->ledger, l->mover);
    if (same <= 0) return same;
    PyObject *own = PyObject_GetAttr(l->ledger, s_has_free_list), *waiting = NULL;
    if (own == NULL) return -1;
    same = own == Py_True;
    Py_DECREF(own);
    if (same && (waiting = PyObject_GetAttr(l->ledger, s_waiting)) == NULL) return -1;
    same = same && PyDict_CheckExact(waiting);
    Py_XDECREF(waiting);
    return same;
}

/* Whether the lane is bound at all (a LedgerLane made and not initialised, or whose `__init__`
 * failed, refuses every call). */
static int bound(LedgerLane *l) {
    if (l->ledger != NULL && l->mover != NULL && l->nstates > 0) return 1;
    PyErr_SetString(PyExc_RuntimeError, "this LedgerLane is bound to no ledger");
    return 0;
}

/* The class's own method `name` called with the caller's arguments (the Python path): a plain
 * function is called with the ledger before them (no bound method made), anything else bound. */
static PyObject *python(LedgerLane *l, PyObject *name, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyTypeObject *type = Py_TYPE(l->ledger);
    PyObject *func = _PyType_Lookup(type, name); /* borrowed */
    if (func == NULL) return PyErr_Format(PyExc_AttributeError, "%s has no method %U", type->tp_name, name);
    const Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    if (PyFunction_Check(func) && total < 8) {
        PyObject *stack[9];
        stack[0] = l->ledger;
        for (Py_ssize_t i = 0; i < total; i++) stack[i + 1] = args[i];
        Py_INCREF(func); /* held over the call: the class may drop it meanwhile */
        PyObject *out = PyObject_Vectorcall(func, stack, nargs + 1, kwnames);
        Py_DECREF(func);
        return out;
    }
    descrgetfunc get = Py_TYPE(func)->tp_descr_get;
    PyObject *bound = get ? get(func, l->ledger, (PyObject *)type) : Py_NewRef(func);
    if (bound == NULL) return NULL;
    PyObject *out = PyObject_Vectorcall(bound, args, nargs, kwnames);
    Py_DECREF(bound);
    return out;
}

static int set_ssize(PyObject *obj, PyObject *name, Py_ssize_t v) {
    PyObject *x = PyLong_FromSsize_t(v);
    int r = x == NULL ? -1 : PyObject_SetAttr(obj, name, x);
    Py_XDECREF(x);
    return r;
}

/* `n` ids onto the free ring's tail (`_push`). -1 on an error: a ring that would overflow, which
 * the lifecycle rules out (RuntimeError, as the Python path raises). */
static int push(LedgerLane *l, const int64_t *ids, Py_ssize_t n) {
    int failed = 0;
    Py_ssize_t head = attr_int(l->ledger, s_head, &failed), count = attr_int(l->ledger, s_count, &failed);
    if (failed) return -1;
    if (count + n > l->cap) {
        PyErr_Format(PyExc_RuntimeError, "free list overflow: %zd + %zd > %zd", count, n, l->cap);
        return -1;
    }
    int32_t *ring = l->ring.buf;
    Py_ssize_t tail = head + count;
    if (tail >= l->cap) tail -= l->cap;
    for (Py_ssize_t i = 0; i < n; i++) {
        ring[tail] = (int32_t)ids[i];
        if (++tail == l->cap) tail = 0;
    }
    return set_ssize(l->ledger, s_count, count + n);
}

/* The record of a move of `raw` (the ids' range or bytes) by `actor`, one state to one. */
static int record(LedgerLane *l, long event, PyObject *actor, int64_t epoch, PyObject *raw, long code) {
    return record_move(l->ledger, l->record_func, PyTuple_GET_ITEM(l->events, event), actor, l->nobody, epoch, raw,
                       code);
}

/* alloc(n, actor): see the module's contract. */
static PyObject *ll_alloc(LedgerLane *l, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (!bound(l)) return NULL;
    if (kwnames != NULL || nargs != 2 || !PyLong_CheckExact(args[0])) goto python;
    Py_ssize_t n = PyLong_AsSsize_t(args[0]);
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        goto python;
    }
    if (n < 1) goto python; /* a count the Python refuses */
    int64_t me = 0;
    const uint8_t *actor_of = l->per_event.buf;
    if (actor_kind(l->actor_type, l->kinds, args[1], &me) != actor_of[l->alloc_event]) goto python;
    int ok = ready(l), failed = 0;
    if (ok <= 0) return ok < 0 ? NULL : python(l, s_alloc, args, nargs, kwnames);
    Py_ssize_t head = attr_int(l->ledger, s_head, &failed), count = attr_int(l->ledger, s_count, &failed);
    int64_t epoch = attr_int(l->ledger, s_launched, &failed);
    if (failed) return NULL;
    if (n > count || head < 0 || head >= l->cap || epoch > INT32_MAX) goto python;
    PyObject *out = PyObject_CallFunctionObjArgs(l->empty, args[0], l->int64, NULL), *was = NULL, *raw = NULL;
    if (out == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(out, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    int64_t *ids = view.buf;
    const int32_t *ring = l->ring.buf;
    const Py_ssize_t first = n < l->cap - head ? n : l->cap - head;
    for (Py_ssize_t i = 0; i < first; i++) ids[i] = ring[head + i];
    for (Py_ssize_t i = first; i < n; i++) ids[i] = ring[i - first];
    if (ledger_mark(l->ledger, l->alloc_event, &was) < 0) goto error;
    /* the free ring's ids are distinct: no duplicate check */
    long code = move_ids(l->mover, l->alloc_event, ids, n, me, NULL, K_NOBODY, epoch, NULL, NULL, NULL, 1, 0, NULL,
                         NULL, -1, &failed);
    if (failed || code < 0 || code >= MIXED) { /* nothing written: the Python path raises or does it */
        if (ledger_unmark(l->ledger, was) < 0 || failed) goto error;
        PyBuffer_Release(&view);
        Py_DECREF(out);
        goto python;
    }
    /* the ring's head moves past them; a pass round its end turns the ring (its order kept) */
    Py_ssize_t h = head + n;
    if (h > l->cap) {
        int32_t *r = l->ring.buf, *tmp = PyMem_Malloc((h - l->cap) * 4);
        if (tmp == NULL) {
            PyErr_NoMemory();
            goto interrupted;
        }
        memcpy(tmp, r, (h - l->cap) * 4);
        memmove(r, r + (h - l->cap), (2 * l->cap - h) * 4);
        memcpy(r + (2 * l->cap - h), tmp, (h - l->cap) * 4);
        PyMem_Free(tmp);
        h = 0;
    } else if (h == l->cap) {
        h = 0;
    }
    if (set_ssize(l->ledger, s_head, h) < 0 || set_ssize(l->ledger, s_count, count - n) < 0) goto interrupted;
    if ((raw = kept_ids(l->mover, ids, n)) == NULL || record(l, l->alloc_event, args[1], epoch, raw, code) < 0)
        goto interrupted;
    if (ledger_unmark(l->ledger, was) < 0) goto error;
    Py_DECREF(raw);
    PyBuffer_Release(&view);
    return out;
interrupted: /* written, not all filed: the mark stays (every later call raises WriteInterrupted) */
    Py_XDECREF(was);
error:
    Py_XDECREF(raw);
    PyBuffer_Release(&view);
    Py_DECREF(out);
    return NULL;
python:
    return python(l, s_alloc, args, nargs, kwnames);
}

/* The slots of a move into a state that waits for a fence, filed under its step (`_note_released`):
 * the range of a run, else a copy of the caller's array; slots with different fences by the Python. */
static int file_released(LedgerLane *l, PyObject *ids_obj, const int64_t *ids, Py_ssize_t n, PyObject *raw,
                         long event, long after) {
    const int32_t *fence = l->mover->fence;
    const int32_t f = fence[ids[0]];
    int one = 1;
    for (Py_ssize_t i = 1; i < n; i++) one &= fence[ids[i]] == f;
    if (!one) {
        PyObject *a = PyLong_FromLong(after), *r = NULL;
        if (a != NULL)
            r = PyObject_CallMethodObjArgs(l->ledger, s_settle_raw, raw, a, PyTuple_GET_ITEM(l->events, event), NULL);
        Py_XDECREF(a);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    PyObject *chunk = PyRange_Check(raw) ? Py_NewRef(raw) : PyObject_CallMethodNoArgs(ids_obj, s_copy);
    PyObject *waiting = chunk ? PyObject_GetAttr(l->ledger, s_waiting) : NULL, *key = PyLong_FromLong(f);
    int r = -1;
    if (waiting != NULL && key != NULL && PyDict_CheckExact(waiting)) {
        PyObject *list = PyDict_GetItemWithError(waiting, key); /* borrowed */
        if (list == NULL && !PyErr_Occurred()) {
            if ((list = PyList_New(0)) != NULL) {
                r = PyDict_SetItem(waiting, key, list);
                Py_DECREF(list); /* the dict holds it */
            }
        } else if (list != NULL) {
            r = 0;
        }
        if (r == 0) r = PyList_Append(list, chunk);
    } else if (waiting != NULL && key != NULL) {
        PyErr_SetString(PyExc_TypeError, "the ledger's _waiting is not a dict");
    }
    Py_XDECREF(key);
    Py_XDECREF(waiting);
    Py_XDECREF(chunk);
    return r;
}

/* apply(event, ids, actor): see the module's contract. */
static PyObject *ll_apply(LedgerLane *l, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (!bound(l)) return NULL;
    if (kwnames != NULL || nargs != 3 || !PyLong_Check(args[0]) || Py_TYPE(args[1]) != (PyTypeObject *)l->ndarray)
        goto python;
    long event = PyLong_AsLong(args[0]);
    if (event == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        goto python;
    }
    const uint8_t *actor_of = l->per_event.buf, *targets = actor_of + l->nevents;
    if (event < 0 || event >= l->nevents || PyTuple_GET_ITEM(l->events, event) != args[0] || targets[event] ||
        event == l->alloc_event || event == l->fence_event)
        goto python;
    int64_t me = 0;
    if (actor_kind(l->actor_type, l->kinds, args[2], &me) != actor_of[event]) goto python;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        goto python;
    }
    const int64_t *ids = view.buf;
    const Py_ssize_t n = view.len / 8;
    const char *ring = l->ring.buf;
    int ok = n >= 1 && view.ndim == 1 && is_int64(&view) && n <= l->cap && !overlaps_columns(l->mover, ids, view.len) &&
             !((const char *)ids < ring + l->ring.len && ring < (const char *)ids + view.len);
    if (ok > 0) ok = ready(l);
    int failed = 0;
    int64_t epoch = ok > 0 ? attr_int(l->ledger, s_launched, &failed) : 0;
    if (ok < 0 || failed) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (!ok || epoch > INT32_MAX) {
        PyBuffer_Release(&view);
        goto python;
    }
    PyObject *was = NULL, *raw = NULL;
    if (ledger_mark(l->ledger, event, &was) < 0) goto error;
    long code = move_ids(l->mover, event, ids, n, me, NULL, K_NOBODY, epoch, NULL, NULL, NULL, 1, 1, NULL, NULL, -1,
                         &failed);
    if (failed || code < 0 || code >= MIXED) { /* nothing written: the Python path raises or does it */
        if (ledger_unmark(l->ledger, was) < 0 || failed) goto error;
        PyBuffer_Release(&view);
        goto python;
    }
    const long after = code & 0xFF;
    const uint8_t *waits = l->waits.buf;
    if ((raw = kept_ids(l->mover, ids, n)) == NULL) goto interrupted;
    if (after == l->free_state) {
        if (push(l, ids, n) < 0) goto interrupted;
    } else if (after < l->nstates && waits[after]) {
        if (file_released(l, args[1], ids, n, raw, event, after) < 0) goto interrupted;
    }
    if (record(l, event, args[2], epoch, raw, code) < 0) goto interrupted;
    if (ledger_unmark(l->ledger, was) < 0) goto error;
    Py_DECREF(raw);
    PyBuffer_Release(&view);
    return Py_NewRef(args[1]);
interrupted: /* written, not all filed: the mark stays (every later call raises WriteInterrupted) */
    Py_XDECREF(was);
error:
    Py_XDECREF(raw);
    PyBuffer_Release(&view);
    return NULL;
python:
    return python(l, s_apply, args, nargs, kwnames);
}

static int cmp_ids(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* A range's (start, stop) when its step is 1. -1 on an error, 0 when not, 1 when so. */
static int run_of(PyObject *range, int64_t *lo, int64_t *hi) {
    int failed = 0;
    int64_t step = attr_int(range, s_step, &failed);
    *lo = attr_int(range, s_start, &failed);
    *hi = attr_int(range, s_stop, &failed);
    if (failed) return -1;
    return step == 1 && *hi > *lo;
}

/* The steps from `from` + 1 to `to` leave the ledger's table of pending steps (`_pending.pop`). */
static int forget_steps(PyObject *pending, int64_t from, int64_t to) {
    for (int64_t s = from + 1; s <= to; s++) {
        PyObject *k = PyLong_FromLongLong(s);
        if (k == NULL) return -1;
        int r = PyDict_DelItem(pending, k);
        Py_DECREF(k);
        if (r < 0) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError)) return -1;
            PyErr_Clear();
        }
    }
    return 0;
}

/* `Actor.fence(step)`: made as `tuple.__new__` makes a record where that is all it does (up to
 * Python 3.13), else by calling the record's class. */
static PyObject *fence_actor(LedgerLane *l, PyObject *step) {
    PyObject *kind = PyTuple_GET_ITEM(l->kinds, l->scheduler_kind);
#if PY_VERSION_HEX < 0x030E0000
    PyObject *actor = ((PyTypeObject *)l->actor_type)->tp_alloc((PyTypeObject *)l->actor_type, 2);
    if (actor != NULL) {
        PyTuple_SET_ITEM(actor, 0, Py_NewRef(kind));
        PyTuple_SET_ITEM(actor, 1, Py_NewRef(step));
    }
    return actor;
#else
    PyObject *argv[2] = {kind, step};
    return PyObject_Vectorcall(l->actor_type, argv, 2, NULL);
#endif
}

/* fence(): see the module's contract. */
static PyObject *ll_fence(LedgerLane *l, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (!bound(l)) return NULL;
    if (kwnames != NULL || nargs != 0) goto python;
    int ok = ready(l), failed = 0;
    if (ok <= 0) return ok < 0 ? NULL : python(l, s_fence, args, nargs, kwnames);
    int64_t completed = attr_int(l->ledger, s_completed, &failed), epoch = attr_int(l->ledger, s_launched, &failed);
    if (failed) return NULL;
    if (epoch > INT32_MAX) goto python;
    PyObject *pending = PyObject_GetAttr(l->ledger, s_pending), *waiting = NULL, *out = NULL, *was = NULL;
    PyObject *raw = NULL, *actor = NULL, *due_key = NULL;
    Py_buffer view;
    int viewing = 0;
    if (pending == NULL) return NULL;
    if (!PyDict_CheckExact(pending)) goto slow;
    /* the steps the device has finished, in order (`_finished`): asked without waiting */
    int64_t done = completed;
    for (;;) {
        PyObject *k = PyLong_FromLongLong(done + 1);
        if (k == NULL) goto error;
        PyObject *query = PyDict_GetItemWithError(pending, k);
        Py_DECREF(k);
        if (query == NULL) {
            if (PyErr_Occurred()) goto error;
            break;
        }
        int yes = 1;
        if (query != l->already_done) {
            Py_INCREF(query);
            PyObject *r = PyObject_CallNoArgs(query);
            Py_DECREF(query);
            yes = r == NULL ? -1 : PyObject_IsTrue(r);
            Py_XDECREF(r);
        }
        if (yes < 0) goto error;
        if (!yes) break;
        done++;
    }
    /* a step the device finished that was never launched (a launch interrupted), or a class
     * changed by a query: the Python path says what is wrong or does it */
    if (done > epoch || Py_TYPE(l->ledger)->tp_version_tag != l->tag) goto slow;
    if ((waiting = PyObject_GetAttr(l->ledger, s_waiting)) == NULL) goto error;
    if (!PyDict_CheckExact(waiting)) goto slow;
    /* the one filed step whose fence has passed */
    Py_ssize_t pos = 0, found = 0;
    PyObject *key, *value, *chunks = NULL, *step_key = NULL;
    while (PyDict_Next(waiting, &pos, &key, &value)) {
        if (!PyLong_CheckExact(key)) goto slow;
        int overflow = 0;
        int64_t s = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (overflow) goto slow;
        if (s <= done) {
            found++;
            step_key = key;
            chunks = value;
        }
    }
    if (found == 0) { /* nothing due: the steps finished are fenced */
        if (forget_steps(pending, completed, done) < 0) goto error;
        if (done > completed) {
            PyObject *d = PyLong_FromLongLong(done);
            int r = d == NULL ? -1 : PyObject_SetAttr(l->ledger, s_completed, d);
            Py_XDECREF(d);
            if (r < 0) goto error;
        }
        out = Py_NewRef(l->no_ids);
        goto done;
    }
    if (found != 1 || !PyList_CheckExact(chunks) || PyList_GET_SIZE(chunks) != 1) goto slow;
    due_key = Py_NewRef(step_key);
    PyObject *chunk = PyList_GET_ITEM(chunks, 0);
    int64_t *ids, n;
    if (PyRange_Check(chunk)) { /* one run, filed as such */
        int64_t lo, hi;
        int run = run_of(chunk, &lo, &hi);
        if (run < 0) goto error;
        if (!run || hi - lo > l->cap) goto slow;
        n = hi - lo;
        PyObject *count = PyLong_FromLongLong(n);
        out = count ? PyObject_CallFunctionObjArgs(l->empty, count, l->int64, NULL) : NULL;
        Py_XDECREF(count);
        if (out == NULL || PyObject_GetBuffer(out, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto error;
        viewing = 1;
        ids = view.buf;
        for (int64_t i = 0; i < n; i++) ids[i] = lo + i;
    } else if (Py_TYPE(chunk) == (PyTypeObject *)l->ndarray) { /* the ledger's own copy of a batch */
        if (PyObject_GetBuffer(chunk, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
            PyErr_Clear();
            goto slow;
        }
        viewing = 1;
        n = view.len / 8;
        if (view.ndim != 1 || !is_int64(&view) || n < 1 || n > l->cap) goto slow;
        ids = view.buf;
        int sorted = 1;
        for (int64_t i = 1; i < n; i++) sorted &= ids[i - 1] < ids[i];
        if (!sorted) qsort(ids, n, 8, cmp_ids); /* in id order, as the Python path sorts it */
        out = Py_NewRef(chunk);
    } else {
        goto slow;
    }
    /* every slot RELEASED, due, moving to FREE: else the Python path fences what is due */
    const long want = l->free_state | l->released_state << 8;
    long code = move_ids(l->mover, l->fence_event, ids, n, done, NULL, K_NOBODY, epoch, NULL, NULL, NULL, 0, 1, NULL,
                         NULL, -1, &failed);
    if (failed) goto error;
    if (code != want) goto slow;
    if (ledger_mark(l->ledger, l->fence_event, &was) < 0) goto error;
    code = move_ids(l->mover, l->fence_event, ids, n, done, NULL, K_NOBODY, epoch, NULL, NULL, NULL, 1, 0, NULL, NULL,
                    -1, &failed);
    if (failed || code != want) {
        if (!failed) PyErr_SetString(PyExc_RuntimeError, "the compiled fence moved other than it checked");
        goto interrupted;
    }
    if (push(l, ids, n) < 0 || PyDict_DelItem(waiting, due_key) < 0 || forget_steps(pending, completed, done) < 0)
        goto interrupted;
    {
        PyObject *d = PyLong_FromLongLong(done);
        int r = d == NULL || (done > completed && PyObject_SetAttr(l->ledger, s_completed, d) < 0) ? -1 : 0;
        if (r == 0) actor = fence_actor(l, d);
        Py_XDECREF(d);
        if (actor == NULL) goto interrupted;
    }
    if ((raw = kept_ids(l->mover, ids, n)) == NULL || record(l, l->fence_event, actor, epoch, raw, code) < 0)
        goto interrupted;
    if (ledger_unmark(l->ledger, was) < 0) goto error;
    goto done;
interrupted: /* written, not all filed: the mark stays (every later call raises WriteInterrupted) */
    Py_XDECREF(was);
error:
    Py_CLEAR(out);
done:
    if (viewing) PyBuffer_Release(&view);
    Py_XDECREF(due_key);
    Py_XDECREF(raw);
    Py_XDECREF(actor);
    Py_XDECREF(waiting);
    Py_DECREF(pending);
    return out;
slow: /* nothing written: the Python path */
    if (viewing) PyBuffer_Release(&view);
    Py_XDECREF(due_key);
    Py_XDECREF(out);
    Py_XDECREF(waiting);
    Py_DECREF(pending);
python:
    return python(l, s_fence, args, nargs, kwnames);
}

static PyMethodDef ll_methods[] = {
    {"alloc", (PyCFunction)(void (*)(void))ll_alloc, METH_FASTCALL | METH_KEYWORDS,
     "alloc(n, actor): the ledger's usual alloc (see the module's contract)"},
    {"apply", (PyCFunction)(void (*)(void))ll_apply, METH_FASTCALL | METH_KEYWORDS,
     "apply(event, ids, actor): the ledger's usual apply (see the module's contract)"},
    {"fence", (PyCFunction)(void (*)(void))ll_fence, METH_FASTCALL | METH_KEYWORDS,
     "fence(): the ledger's usual fence (see the module's contract)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LedgerLaneType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "slotwarden.runtime.ledger._move.LedgerLane",
    .tp_basicsize = sizeof(LedgerLane),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A slot ledger's usual alloc, apply and fence in one call each (see runtime/ledger/ledger_lane.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ll_init,
    .tp_dealloc = (destructor)ll_dealloc,
    .tp_traverse = (traverseproc)ll_traverse,
    .tp_clear = (inquiry)ll_clear,
    .tp_methods = ll_methods,
};

int ledger_lane_ready(void) { return intern_names() < 0 ? -1 : PyType_Ready(&LedgerLaneType); }
