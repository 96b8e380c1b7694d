/* The guard's lane: `GuardedAllocator`'s usual `alloc(n)` and `free(ids)` in one C call each.
 *
 * It is the compiled form of what the guard's Python does for the usual call (an acting actor of
 * the allocating kind, a 1-D int64 CPU tensor, a free whose slots all make the free table's move
 * for the first one): the same checks in the same move (`move_ids`, the ledger's compiled move),
 * the engine's `free` between the check and the write, the same record. It decides nothing of its
 * own about the lifecycle: the event of a free is read from the guard's free table (compiled from
 * the model, shared memory), the per-event actor kinds and the one-move table are handed in.
 * Anything else (no acting actor, another tensor, a refused or mixed batch, another thread) goes,
 * untouched, to the guard's Python (`alloc`, `free`), which does it or raises the model's typed
 * error; after the engine's `alloc` has run, to `LedgerGuard._record_alloc`, which does the rest
 * or hands the slots back and raises.
 *
 * Lane(guarded, guard, ledger, mover, acting, types, (alloc, free), free_event, one_move, per_state,
 *      per_event, codes)
 *   types:     (torch.Tensor, torch.int64, the guard's CPU device, Actor, ActorKind members by value,
 *               Event members by value, FlightRecorder.record); (alloc, free): the guard's Python
 *   free_event int64 [kinds, states, relations] (-1: no free), one_move uint8 [kinds, events, states]
 *   per_state  uint8 [3, states]: owner kind (255: none), lent, waits for a fence
 *   per_event  uint8 [2, events]: the event's actor kind, whether it names a target
 *   codes      (ALLOC, FENCE, FREE, NONE, OWNER, BORROWER, REQUEST kind)
 *   fills      optional: None, or (the guard's uint8 fill per slot id, the STALE code) written for
 *              each slot an alloc takes
 */
#include "_move.h"
#include <pythread.h>

typedef struct {
    PyObject_HEAD
    PyObject *guarded, *guard, *ledger, *acting;
    Mover *mover;
    PyObject *tensor_type, *int64, *cpu, *actor_type, *kinds, *events, *record_func;
    PyObject *cls_alloc, *cls_free; /* the guard's Python `alloc` and `free` (plain functions) */
    Py_buffer free_event, one_move, per_state, per_event;
    int held;
    Py_ssize_t nkinds, nstates, nevents, nrel;
    long alloc_event, fence_event, free_state, rel_none, rel_owner, rel_borrower, request_kind;
    PyObject *nobody; /* -1 */
    int64_t *scratch; /* capacity ids: a free's, read once, while the engine is handed its tensor */
    Py_buffer fills;  /* the guard's fill per slot id, where it keeps them (has_fills) */
    int has_fills;
    long stale;
} Lane;


static PyObject *s_thread, *s_mover, *s_launched, *s_completed, *s_waiting, *s_recorder, *s_marks, *s_allocator,
    *s_device, *s_dtype, *s_shape, *s_is_cpu, *s_data_ptr, *s_is_contiguous, *s_alloc, *s_free, *s_seq, *s_ring,
    *s_append, *s_record, *s_record_alloc, *s_settle_raw, *s_fence_after;

static int intern_names(void) {
#define NAME(var, text)                                                                                              \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    NAME(s_thread, "_thread") NAME(s_mover, "mover") NAME(s_launched, "launched") NAME(s_completed, "completed")
    NAME(s_waiting, "_waiting") NAME(s_recorder, "recorder") NAME(s_marks, "_marks") NAME(s_allocator, "allocator")
    NAME(s_device, "device") NAME(s_dtype, "dtype") NAME(s_shape, "shape") NAME(s_is_cpu, "is_cpu")
    NAME(s_data_ptr, "data_ptr") NAME(s_is_contiguous, "is_contiguous") NAME(s_alloc, "alloc") NAME(s_free, "free")
    NAME(s_seq, "seq") NAME(s_ring, "_ring") NAME(s_append, "append") NAME(s_record, "record")
    NAME(s_record_alloc, "_record_alloc") NAME(s_settle_raw, "_settle_raw") NAME(s_fence_after, "_fence_after_free")
#undef NAME
    return 0;
}

static int lane_traverse(Lane *l, visitproc visit, void *arg) {
    Py_VISIT(l->guarded);
    Py_VISIT(l->guard);
    Py_VISIT(l->ledger);
    Py_VISIT((PyObject *)l->mover);
    return 0;
}

static void lane_release(Lane *l) {
    Py_buffer *all[4] = {&l->free_event, &l->one_move, &l->per_state, &l->per_event};
    for (int i = 0; i < l->held; i++) PyBuffer_Release(all[i]);
    l->held = 0;
    if (l->has_fills) PyBuffer_Release(&l->fills);
    l->has_fills = 0;
    l->nstates = 0; /* unbound: every call takes the guard's Python */
}

static int lane_clear(Lane *l) {
    lane_release(l);
    PyObject **all[] = {&l->guarded,     &l->guard, &l->ledger, (PyObject **)&l->mover, &l->acting,
                        &l->tensor_type, &l->int64, &l->cpu,    &l->actor_type,         &l->kinds,
                        &l->events,      &l->record_func,       &l->cls_alloc,          &l->cls_free,
                        &l->nobody};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) Py_CLEAR(*all[i]);
    PyMem_Free(l->scratch);
    l->scratch = NULL;
    return 0;
}

static void lane_dealloc(Lane *l) {
    PyObject_GC_UnTrack(l);
    lane_clear(l);
    Py_TYPE(l)->tp_free((PyObject *)l);
}

static int hold(Lane *l, Py_buffer *view, PyObject *obj, Py_ssize_t itemsize, int ndim, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    l->held++;
    if (view->itemsize != itemsize || view->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s: a C-contiguous %d-D array of %zd-byte items", what, ndim, itemsize);
        return -1;
    }
    return 0;
}

static int lane_init(Lane *l, PyObject *args, PyObject *Py_UNUSED(kw)) {
    PyObject *guarded, *guard, *ledger, *mover, *acting, *free_event, *one_move, *per_state, *per_event;
    PyObject *tensor_type, *int64, *cpu, *actor_type, *kinds, *events, *record_func, *cls_alloc, *cls_free;
    PyObject *fills = Py_None;
    lane_clear(l);
    if (!PyArg_ParseTuple(args, "OOOO!O(OOOOO!O!O)(OO)OOOO(lllllll)|O", &guarded, &guard, &ledger, &MoverType, &mover,
                          &acting, &tensor_type, &int64, &cpu, &actor_type, &PyTuple_Type, &kinds, &PyTuple_Type,
                          &events, &record_func, &cls_alloc, &cls_free, &free_event, &one_move, &per_state,
                          &per_event, &l->alloc_event, &l->fence_event, &l->free_state, &l->rel_none, &l->rel_owner,
                          &l->rel_borrower, &l->request_kind, &fills))
        return -1;
    if (!PyContextVar_CheckExact(acting)) {
        PyErr_SetString(PyExc_TypeError, "acting: a ContextVar");
        return -1;
    }
    l->guarded = Py_NewRef(guarded);
    l->guard = Py_NewRef(guard);
    l->ledger = Py_NewRef(ledger);
    l->mover = (Mover *)Py_NewRef(mover);
    l->acting = Py_NewRef(acting);
    l->tensor_type = Py_NewRef(tensor_type);
    l->int64 = Py_NewRef(int64);
    l->cpu = Py_NewRef(cpu);
    l->actor_type = Py_NewRef(actor_type);
    l->kinds = Py_NewRef(kinds);
    l->events = Py_NewRef(events);
    l->record_func = Py_NewRef(record_func);
    l->cls_alloc = Py_NewRef(cls_alloc);
    l->cls_free = Py_NewRef(cls_free);
    if ((l->nobody = PyLong_FromLong(K_NOBODY)) == NULL) return -1;
    if (hold(l, &l->free_event, free_event, 8, 3, "free_event") < 0 ||
        hold(l, &l->one_move, one_move, 1, 3, "one_move") < 0 || hold(l, &l->per_state, per_state, 1, 2, "per_state") < 0 ||
        hold(l, &l->per_event, per_event, 1, 2, "per_event") < 0)
        return -1;
    Py_ssize_t kn = PyTuple_GET_SIZE(kinds), sn = l->mover->states, en = PyTuple_GET_SIZE(events);
    if (l->free_event.shape[0] != kn || l->free_event.shape[1] != sn || l->free_event.shape[2] <= l->rel_none || l->free_event.shape[2] <= l->rel_owner ||
        l->free_event.shape[2] <= l->rel_borrower ||
        l->one_move.shape[0] != kn || l->one_move.shape[1] != en || l->one_move.shape[2] != sn ||
        l->per_state.shape[0] != 3 || l->per_state.shape[1] != sn || l->per_event.shape[0] != 2 ||
        l->per_event.shape[1] != en || en > l->mover->events || l->rel_none < 0 || l->rel_owner < 0 || l->rel_borrower < 0) {
        PyErr_SetString(PyExc_ValueError, "tables: free_event [kinds, states, relations], one_move [kinds, events, states], "
                                          "per_state [3, states], per_event [2, events]");
        return -1;
    }
    l->nkinds = kn;
    l->nevents = en;
    l->nrel = l->free_event.shape[2];
    if (fills != Py_None) {
        PyObject *buffer;
        if (!PyArg_ParseTuple(fills, "Ol", &buffer, &l->stale)) return -1;
        if (PyObject_GetBuffer(buffer, &l->fills, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) return -1;
        l->has_fills = 1;
        if (l->fills.len != l->mover->capacity + 1 || l->stale < 0 || l->stale > 255) {
            PyErr_SetString(PyExc_ValueError, "fills: (a writable uint8 array, one per slot id 0..capacity, a code)");
            return -1;
        }
    }
    if ((l->scratch = PyMem_Malloc((l->mover->capacity + 1) * 8)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    l->nstates = sn;
    return 0;
}

/* The acting actor's kind (an index of `kinds`) and id, when it is the usual one: an `Actor` of a
 * known kind with an id 0..2**63 - 1. -1 for anything else (the guard's Python checks it). */
/* The kind of `actor` (an index of `kinds`, ActorKind members by value) when it is an `actor_type`
 * with a plain id in 0..INT64_MAX, else -1 (the call then takes the Python). */
long actor_kind(PyObject *actor_type, PyObject *kinds, PyObject *actor, int64_t *id) {
    if (Py_TYPE(actor) != (PyTypeObject *)actor_type || PyTuple_GET_SIZE(actor) != 2) return -1;
    PyObject *kind = PyTuple_GET_ITEM(actor, 0), *who = PyTuple_GET_ITEM(actor, 1);
    if (!PyLong_CheckExact(who)) return -1;
    long k = -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kinds); i++)
        if (PyTuple_GET_ITEM(kinds, i) == kind) k = (long)i;
    if (k < 0) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(who, &overflow);
    if (overflow || v < 0) return -1;
    *id = v;
    return k;
}

static long usual_actor(Lane *l, PyObject *actor, int64_t *id) { return actor_kind(l->actor_type, l->kinds, actor, id); }

/* Whether the calling thread owns `ledger` (its thread field is this thread's id, not a write's mark). */
int owns_ledger(PyObject *ledger) {
    PyObject *t = PyObject_GetAttr(ledger, s_thread);
    if (t == NULL) return -1;
    int mine = PyLong_CheckExact(t) && PyLong_AsUnsignedLong(t) == PyThread_get_thread_ident();
    Py_DECREF(t);
    if (PyErr_Occurred()) PyErr_Clear();
    return mine;
}

/* Whether `ledger`'s compiled move is still `mover` (a test may swap it out). */
int same_mover(PyObject *ledger, const Mover *mover) {
    PyObject *mv = PyObject_GetAttr(ledger, s_mover);
    if (mv == NULL) return -1;
    int same = mv == (PyObject *)mover;
    Py_DECREF(mv);
    return same;
}

static int attr_is(PyObject *obj, PyObject *name, PyObject *want) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    int is = v == want;
    Py_DECREF(v);
    return is;
}

int64_t attr_int(PyObject *obj, PyObject *name, int *failed) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        *failed = 1;
        return 0;
    }
    int64_t x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) *failed = 1;
    return x;
}

/* The ids of `ids` when it is a 1-D int64 CPU tensor of `*n` elements (`*n` < 0: any number >= 1,
 * then set), contiguous when more than one: its data pointer; NULL (no error set) for any other
 * tensor, or (const int64_t *)-1 on an error. */
static const int64_t *host_ids(Lane *l, PyObject *ids, Py_ssize_t *n) {
    if (Py_TYPE(ids) != (PyTypeObject *)l->tensor_type) return NULL;
    int ok = attr_is(ids, s_dtype, l->int64);
    if (ok <= 0) return ok < 0 ? (const int64_t *)-1 : NULL;
    PyObject *shape = PyObject_GetAttr(ids, s_shape);
    if (shape == NULL) return (const int64_t *)-1;
    Py_ssize_t got = -1;
    if (PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == 1) got = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0));
    Py_DECREF(shape);
    if (got == -1 && PyErr_Occurred()) return (const int64_t *)-1;
    if (got < 1 || (*n >= 0 && got != *n)) return NULL;
    ok = attr_is(ids, s_is_cpu, Py_True);
    if (ok <= 0) return ok < 0 ? (const int64_t *)-1 : NULL;
    if (got > 1) {
        PyObject *c = PyObject_CallMethodNoArgs(ids, s_is_contiguous);
        if (c == NULL) return (const int64_t *)-1;
        ok = c == Py_True;
        Py_DECREF(c);
        if (!ok) return NULL;
    }
    PyObject *p = PyObject_CallMethodNoArgs(ids, s_data_ptr);
    if (p == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_RuntimeError)) return (const int64_t *)-1;
        PyErr_Clear(); /* no storage to read (a sparse tensor) */
        return NULL;
    }
    void *at = PyLong_AsVoidPtr(p);
    Py_DECREF(p);
    if (at == NULL) return PyErr_Occurred() ? (const int64_t *)-1 : NULL;
    *n = got;
    return at;
}

/* The ledger's thread field set to the write's mark of `event` (the kernel checks, then the
 * engine's `free`, then the write, the filing and the record: one unit); its old value in `*was`. */
int ledger_mark(PyObject *ledger, long event, PyObject **was) {
    PyObject *marks = PyObject_GetAttr(ledger, s_marks);
    if (marks == NULL) return -1;
    if (!PyTuple_Check(marks) || PyTuple_GET_SIZE(marks) <= event) {
        Py_DECREF(marks);
        PyErr_SetString(PyExc_RuntimeError, "the ledger holds no write marks");
        return -1;
    }
    *was = PyObject_GetAttr(ledger, s_thread);
    int r = *was == NULL ? -1 : PyObject_SetAttr(ledger, s_thread, PyTuple_GET_ITEM(marks, event));
    Py_DECREF(marks);
    if (r < 0) Py_CLEAR(*was);
    return r;
}

int ledger_unmark(PyObject *ledger, PyObject *was) {
    int r = PyObject_SetAttr(ledger, s_thread, was);
    Py_DECREF(was);
    return r;
}

/* The record's own copy of the n ids the last move named: their range when the kernel found them one
 * run (`Mover.last_run`), else their bytes. What the recorder keeps stays small whatever the batch. */
PyObject *kept_ids(const Mover *m, const int64_t *ids, Py_ssize_t n) {
    if (n < 2 || m->run_hi - m->run_lo != n) return PyBytes_FromStringAndSize((const char *)ids, n * 8);
    return PyObject_CallFunction((PyObject *)&PyRange_Type, "LL", (long long)m->run_lo, (long long)m->run_hi);
}

/* One batch into the ledger's flight recorder: `FlightRecorder.record` inline (seq += 1, then the
 * entry onto its ring) when the ledger's recorder is a plain one (`record_func` its method's
 * function), else a call of its own `record` (a trace's). -1 on an error. */
int record_batch(PyObject *ledger, PyObject *record_func, PyObject *event, PyObject *actor, PyObject *target,
                 PyObject *epoch, PyObject *raw, PyObject *before, PyObject *after) {
    PyObject *rec = PyObject_GetAttr(ledger, s_recorder), *res = NULL;
    if (rec == NULL) return -1;
    PyObject *bound = PyObject_GetAttr(rec, s_record);
    if (bound == NULL) goto done;
    int plain = PyMethod_Check(bound) && PyMethod_GET_FUNCTION(bound) == record_func;
    if (!plain) { /* another recorder (a trace's): its own `record` */
        PyObject *argv[7] = {event, actor, target, epoch, raw, before, after};
        res = PyObject_Vectorcall(bound, argv, 7, NULL);
        Py_DECREF(bound);
        goto done;
    }
    Py_DECREF(bound);
    PyObject *ring = PyObject_GetAttr(rec, s_ring);
    if (ring == NULL) goto done;
    int failed = 0;
    int64_t seq = attr_int(rec, s_seq, &failed) + 1;
    PyObject *s = failed ? NULL : PyLong_FromLongLong(seq);
    PyObject *entry = s == NULL ? NULL : PyTuple_Pack(8, s, event, actor, target, epoch, raw, before, after);
    if (entry != NULL && PyObject_SetAttr(rec, s_seq, s) == 0) res = PyObject_CallMethodOneArg(ring, s_append, entry);
    Py_XDECREF(entry);
    Py_XDECREF(s);
    Py_DECREF(ring);
done:
    Py_DECREF(rec);
    if (res == NULL) return -1;
    Py_DECREF(res);
    return 0;
}

/* The record of a move of `raw` (the ids' range or bytes) by `actor`, every slot from state
 * `code >> 8` to `code & 0xFF` (the kernel's code), at step `epoch`. -1 on an error. */
int record_move(PyObject *ledger, PyObject *record_func, PyObject *event, PyObject *actor, PyObject *target,
                int64_t epoch, PyObject *raw, long code) {
    PyObject *e = PyLong_FromLongLong(epoch), *b = PyLong_FromLong(code >> 8), *a = PyLong_FromLong(code & 0xFF);
    int r = e && b && a ? record_batch(ledger, record_func, event, actor, target, e, raw, b, a) : -1;
    Py_XDECREF(e);
    Py_XDECREF(b);
    Py_XDECREF(a);
    return r;
}

/* After a write: the slots filed if they wait for a fence, then the record, as `apply_raw` does
 * (`raw` the ids' bytes or range, the recorder's own copy). -1 on an error (the write's mark then stays). */
static int settle_and_record(Lane *l, long event, PyObject *actor, int64_t epoch, PyObject *raw, long code) {
    const long after = code & 0xFF;
    const uint8_t *waits = (const uint8_t *)l->per_state.buf + 2 * l->nstates;
    PyObject *ev = PyTuple_GET_ITEM(l->events, event);
    if (after < l->nstates && waits[after]) {
        PyObject *a = PyLong_FromLong(after);
        PyObject *res = a == NULL ? NULL : PyObject_CallMethodObjArgs(l->ledger, s_settle_raw, raw, a, ev, NULL);
        Py_XDECREF(a);
        if (res == NULL) return -1;
        Py_DECREF(res);
    }
    return record_move(l->ledger, l->record_func, ev, actor, l->nobody, epoch, raw, code);
}

/* The write left interrupted after its columns were written: the mark stays (`WriteInterrupted`). */
static PyObject *interrupted(Lane *l, long event) {
    PyObject *was = NULL, *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (ledger_mark(l->ledger, event, &was) == 0) Py_DECREF(was);
    PyErr_Restore(type, value, tb);
    return NULL;
}

static PyObject *slow(PyObject *func, PyObject *guarded, PyObject *arg) {
    PyObject *argv[2] = {guarded, arg};
    return PyObject_Vectorcall(func, argv, 2, NULL);
}

/* alloc(need_size): see the module's contract. */
static PyObject *lane_alloc(Lane *l, PyObject *arg) {
    if (!PyLong_CheckExact(arg) || l->nstates == 0) return slow(l->cls_alloc, l->guarded, arg);
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return slow(l->cls_alloc, l->guarded, arg);
    }
    PyObject *actor = NULL;
    if (PyContextVar_Get(l->acting, Py_None, &actor) < 0) return NULL;
    int64_t me = 0;
    long kind = actor == Py_None || n < 1 ? -1 : usual_actor(l, actor, &me);
    const uint8_t *actor_of = l->per_event.buf;
    int mine = kind >= 0 && kind == actor_of[l->alloc_event] ? owns_ledger(l->ledger) : 0;
    int same = mine > 0 ? same_mover(l->ledger, l->mover) : mine;
    if (same <= 0) {
        Py_DECREF(actor);
        return same < 0 ? NULL : slow(l->cls_alloc, l->guarded, arg);
    }
    /* the usual call: the engine allocates */
    PyObject *engine = PyObject_GetAttr(l->guard, s_allocator), *ids = NULL, *raw = NULL, *out = NULL;
    if (engine == NULL) goto done;
    ids = PyObject_CallMethodOneArg(engine, s_alloc, arg);
    if (ids == NULL || ids == Py_None) {
        out = ids;
        ids = NULL;
        goto done;
    }
    Py_ssize_t got = n;
    const int64_t *at = host_ids(l, ids, &got);
    if (at == (const int64_t *)-1) goto undo;
    if (at == NULL) goto rest; /* not a 1-D int64 CPU tensor of n: the guard's Python */
    int failed = 0;
    int64_t epoch = attr_int(l->ledger, s_launched, &failed);
    if (failed) goto undo;
    /* the ids read where they lie: nothing runs between the check and the write */
    long code = move_ids(l->mover, l->alloc_event, at, n, me, NULL, K_NOBODY, epoch, NULL, NULL, NULL, 1, 1, NULL,
                         NULL, -1, &failed);
    if (failed) goto undo;
    if (code < 0 || code >= MIXED) goto rest; /* refused, nothing written: the guard's Python raises */
    if ((raw = kept_ids(l->mover, at, n)) == NULL || settle_and_record(l, l->alloc_event, actor, epoch, raw, code) < 0) {
        interrupted(l, l->alloc_event);
        goto done;
    }
    if (l->has_fills) /* the slots taken hold their previous tenant's state: ids checked in 1..capacity */
        for (Py_ssize_t i = 0; i < n; i++) ((uint8_t *)l->fills.buf)[at[i]] = (uint8_t)l->stale;
    if (attr_is(l->guard, s_device, l->cpu) == 0 && PyObject_SetAttr(l->guard, s_device, l->cpu) < 0) goto done;
    if (PyErr_Occurred()) goto done;
    out = Py_NewRef(ids);
    goto done;
rest:
    out = PyObject_CallMethodObjArgs(l->guard, s_record_alloc, ids, arg, actor, NULL);
    goto done;
undo: /* an error before anything was written: the engine takes its slots back */
    {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *r = PyObject_CallMethodOneArg(engine, s_free, ids);
        if (r == NULL) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
        } else {
            Py_DECREF(r);
            PyErr_Restore(type, value, tb);
        }
    }
done:
    Py_XDECREF(raw);
    Py_XDECREF(ids);
    Py_XDECREF(engine);
    Py_DECREF(actor);
    return out;
}

/* free(free_index): see the module's contract. */
static PyObject *lane_free(Lane *l, PyObject *arg) {
    if (l->nstates == 0) return slow(l->cls_free, l->guarded, arg);
    PyObject *actor = NULL;
    if (PyContextVar_Get(l->acting, Py_None, &actor) < 0) return NULL;
    PyObject *raw = NULL, *give = NULL, *engine = NULL, *was = NULL, *out = NULL;
    int64_t me = 0;
    long kind = actor == Py_None ? -1 : usual_actor(l, actor, &me);
    if (kind < 0) goto python;
    Py_ssize_t n = -1;
    const int64_t *at = host_ids(l, arg, &n);
    if (at == (const int64_t *)-1) goto done;
    const Mover *m = l->mover;
    if (at == NULL || n > m->capacity) goto python;
    int ok = attr_is(l->guard, s_device, l->cpu);
    if (ok > 0) ok = same_mover(l->ledger, l->mover);
    if (ok > 0) ok = owns_ledger(l->ledger);
    if (ok < 0) goto done;
    const int64_t first = at[0];
    if (!ok || first < 1 || first > m->capacity) goto python;
    /* the free table's event for the first slot, by the actor's relation to it */
    const long st = m->state[first * m->state_step];
    if (st >= l->nstates) goto python;
    const uint8_t *owner_kind = l->per_state.buf, *lent = owner_kind + l->nstates;
    long rel = l->rel_none;
    if (kind == l->request_kind && lent[st] && m->borrower[first] == me)
        rel = l->rel_borrower;
    else if (owner_kind[st] == kind && m->owner[first] == me)
        rel = l->rel_owner;
    const int64_t move = ((const int64_t *)l->free_event.buf)[(kind * l->nstates + st) * l->nrel + rel];
    if (move < 0 || move >= l->nevents) goto python;
    const uint8_t *one = l->one_move.buf, *actor_of = l->per_event.buf, *targets = actor_of + l->nevents;
    if (n > 1 && !one[(kind * l->nevents + move) * l->nstates + st]) goto python;
    if (actor_of[move] != kind || targets[move] || move == l->fence_event || move == l->alloc_event) goto python;
    int failed = 0;
    int64_t epoch = attr_int(l->ledger, s_launched, &failed), done_steps = attr_int(l->ledger, s_completed, &failed);
    PyObject *waiting = failed ? NULL : PyObject_GetAttr(l->ledger, s_waiting);
    if (waiting == NULL) goto done;
    const int quiet = PyDict_Check(waiting) && PyDict_GET_SIZE(waiting) == 0 && epoch == done_steps;
    Py_DECREF(waiting);
    /* the ids read once, into the lane's scratch (the engine's `free` may write into its tensor) */
    const int64_t *ids = l->scratch;
    memcpy(l->scratch, at, n * 8);
    if ((engine = PyObject_GetAttr(l->guard, s_allocator)) == NULL) goto done;
    if ((give = PyObject_GetAttr(engine, s_free)) == NULL) goto done;
    if (ledger_mark(l->ledger, move, &was) < 0) goto done;
    /* the kernel checks; the engine's `free` is handed the caller's tensor; then the write */
    long code = move_ids(l->mover, move, ids, n, me, NULL, K_NOBODY, epoch, NULL, NULL, NULL, 1, 1, give, arg,
                         l->free_state, &failed);
    if (failed || code < 0 || code >= MIXED) { /* nothing written */
        if (ledger_unmark(l->ledger, was) < 0 || failed) goto done;
        goto python; /* refused, or not one move: the guard's Python raises or splits it */
    }
    if ((raw = kept_ids(l->mover, ids, n)) == NULL || settle_and_record(l, move, actor, epoch, raw, code) < 0) {
        Py_DECREF(was); /* the write's mark stays: interrupted */
        goto done;
    }
    if (ledger_unmark(l->ledger, was) < 0) goto done;
    if ((code & 0xFF) == l->free_state && quiet) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    /* released slots whose step has finished go to the engine now (the guard's fence) */
    PyObject *f = PyLong_FromLongLong(first);
    if (f != NULL)
        out = PyObject_CallMethodObjArgs(l->guarded, s_fence_after, f, raw, arg, quiet ? Py_True : Py_False, NULL);
    Py_XDECREF(f);
    goto done;
python:
    out = slow(l->cls_free, l->guarded, arg);
done:
    Py_XDECREF(raw);
    Py_XDECREF(give);
    Py_XDECREF(engine);
    Py_DECREF(actor);
    return out;
}

static PyMethodDef lane_methods[] = {
    {"alloc", (PyCFunction)lane_alloc, METH_O, "alloc(need_size): the guard's usual alloc (see the module's contract)"},
    {"free", (PyCFunction)lane_free, METH_O, "free(free_index): the guard's usual free (see the module's contract)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "slotwarden.runtime.ledger._move.Lane",
    .tp_basicsize = sizeof(Lane),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A guarded allocator's usual alloc and free in one call each (see runtime/ledger/lane.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)lane_init,
    .tp_dealloc = (destructor)lane_dealloc,
    .tp_traverse = (traverseproc)lane_traverse,
    .tp_clear = (inquiry)lane_clear,
    .tp_methods = lane_methods,
};

int lane_ready(void) { return intern_names() < 0 ? -1 : PyType_Ready(&LaneType); }
