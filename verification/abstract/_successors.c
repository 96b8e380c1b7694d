/* The abstract scheduler's successors in C, for the correct policy (see successors_compiled.py).
   `Successors(...)` binds one run's fixed facts: the record types, the events, the actors of
   each request and session, the model's memoised pool operations (their tables and their
   Python functions, called on a miss, so every slot move is still the model's), `memo.FORGOTTEN`
   and the states the cache owns. `Successors.expand(world)` returns the list of outcomes
   `actions.successors(world, Policy(), overlap)` yields: equal, of the same record types, in
   the same order. On any error (the model refusing a move, a value of an unexpected type) it
   returns None and the caller asks the Python, which reports the refusal as it always has. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "../_records.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_REQ = 32, MAX_SES = 16, MAX_SLOTS = 64 };
enum { PENDING, WAITING, CANDIDATE, RUNNING, DONE };
enum { OPEN, CLOSING, CLOSED };
enum { WORLD, REQUEST, SESSION, STEP, MOVE, OUTCOME, ACTION, RECORDS };
static const Py_ssize_t SIZE[RECORDS] = {10, 7, 5, 4, 5, 4, 3};
/* the events fired, in the order the binding hands them in */
enum { E_ALLOC, E_LEND, E_ADMIT, E_ROLLBACK, E_PARK, E_FINISH, E_RETRACT, E_ABORT, E_CLOSE, E_LOCK, E_UNLOCK,
       E_INSERT, E_EVICT, E_FENCE, EVENTS };
/* the actions, in the order the binding hands their names in */
enum { A_SUBMIT, A_TAKE, A_MATCH, A_ADMIT, A_ROLLBACK, A_FINISH, A_DONATE, A_RETRACT, A_ABORT, A_EVICT,
       A_LAUNCH, A_COMPLETE, A_CLOSE, ACTIONS };
/* the memoised pool operations: their tables and the Python functions that fill them */
enum { M_APPLY, M_ALLOC, M_FENCE, M_SHIFTED, MEMOS };

/* a memo's answers by the identity of its arguments: the same objects give the same answer
   within a run, and hashing a pool's records again costs more than the move. Each entry holds
   its key objects and its answer, so no address is reused while it stands. */
enum { KEYS = 6, KEPT = 1 << 20 }; /* KEPT: the answers a table holds at most */
typedef struct {
    PyObject *key[KEYS], *value;
} Entry;
typedef struct {
    Entry *entry;
    size_t capacity, used;
} Table;

/* an int key by its value (tagged: never an object's address, which is aligned), else the object */
static PyObject *tag(PyObject *v) {
#if UINTPTR_MAX > 0xffffffffu /* a tag holds 40 bits and two more: only where a pointer has 64 */
    if (v != NULL && PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow); /* sets no error for an int */
        if (!overflow && x > -(1LL << 40) && x < (1LL << 40)) return (PyObject *)(uintptr_t)(((uint64_t)x << 2) | 2);
    }
#endif
    return v;
}

static int tagged(PyObject *v) { return ((uintptr_t)v & 2) != 0; }

static size_t mix(PyObject *const *key) {
    uint64_t h = 0;
    for (int i = 0; i < KEYS; i++) h = (h ^ ((uintptr_t)key[i] >> 4)) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29));
}

/* the entry of `key`, or the empty one where it would go */
static Entry *place(Table *t, PyObject *const *key) {
    for (size_t at = mix(key) & (t->capacity - 1);; at = (at + 1) & (t->capacity - 1)) {
        Entry *e = &t->entry[at];
        if (e->value == NULL || memcmp(e->key, key, sizeof e->key) == 0) return e;
    }
}

static PyObject *recall(Table *t, PyObject *const *key) {
    if (t->capacity == 0) return NULL;
    Entry *e = place(t, key);
    return e->value;
}

/* remember `value` for `key` (both borrowed: the table takes its own references); -1: no memory */
static void forget_all(Table *t);

static int remember(Table *t, PyObject *const *key, PyObject *value) {
    if (t->used >= KEPT) forget_all(t); /* its key objects kept alive no longer: it starts again */
    if (2 * (t->used + 1) > t->capacity) {
        Table bigger = {PyMem_Calloc(t->capacity ? 2 * t->capacity : 1024, sizeof(Entry)), 0, 0};
        if (bigger.entry == NULL) return PyErr_NoMemory(), -1;
        bigger.capacity = t->capacity ? 2 * t->capacity : 1024;
        for (size_t i = 0; i < t->capacity; i++)
            if (t->entry[i].value != NULL) *place(&bigger, t->entry[i].key) = t->entry[i];
        bigger.used = t->used;
        PyMem_Free(t->entry);
        *t = bigger;
    }
    Entry *e = place(t, key);
    for (int i = 0; i < KEYS; i++) e->key[i] = tagged(key[i]) ? key[i] : Py_XNewRef(key[i]);
    e->value = Py_NewRef(value);
    t->used++;
    return 0;
}

static void forget_all(Table *t) {
    for (size_t i = 0; i < t->capacity; i++)
        if (t->entry[i].value != NULL) {
            for (int k = 0; k < KEYS; k++)
                if (!tagged(t->entry[i].key[k])) Py_XDECREF(t->entry[i].key[k]);
            Py_DECREF(t->entry[i].value);
        }
    PyMem_Free(t->entry);
    t->entry = NULL, t->capacity = 0, t->used = 0;
}

typedef struct {
    PyObject_HEAD
    int ready, overlap, nreq, nses;
    long session_base, node_base, max_readers;
    PyTypeObject *type[RECORDS];
    PyObject *event[EVENTS], *kind[ACTIONS], *memo[MEMOS], *fill[MEMOS];
    Table known[MEMOS];        /* each memo's answers by identity */
    PyObject *forgotten, *seen; /* memo.FORGOTTEN (a list), and its count when last read */
    PyObject *req_actor[MAX_REQ], *ses_actor[MAX_SES];
    PyObject *actor_cache, *actor_fence; /* Actor.cache, Actor.fence */
    PyObject *cached, *cache_owned;      /* State.CACHED; the states the cache owns (a frozenset) */
    PyObject *nobody, *phase[DONE + 1], *status[CLOSED + 1];
} Successors;

/* the next world under construction (actions._Txn): new references throughout */
typedef struct {
    Successors *s;
    PyObject *world, *pool, *steps, *moves, *epoch; /* world, epoch (its `launched`): borrowed */
    PyObject *req[MAX_REQ], *ses[MAX_SES];
    long launched, completed;
} Txn;

#define F(rec, i) PyTuple_GET_ITEM((rec), (i))
/* the fields read (their order is checked by the binding against the records' `_fields`) */
enum { W_POOL, W_REQUESTS, W_SESSIONS, W_LAUNCHED, W_COMPLETED, W_STEPS, W_NODES, W_DRAFTS, W_WINDOWS, W_BEHIND };
enum { R_ID, R_SESSION, R_PHASE, R_HANDLE, R_LENT, R_RAN, R_SRC };
enum { S_ID, S_STATUS, S_HANDLE, S_TURN, S_TURNS };
enum { ST_EPOCH, ST_SLOTS, ST_REQUESTS, ST_COPIES };
enum { P_SLOTS, P_FREE, P_LOCKS };
enum { SL_STATE, SL_OWNER, SL_BORROWER, SL_FENCE, SL_READERS };

/* a copy of record `rec` with field `at` set to `v` (stolen), as `_renewed` makes it */
static PyObject *renewed(PyObject *rec, Py_ssize_t at, PyObject *v) {
    if (v == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(rec);
    PyObject *items[8];
    for (Py_ssize_t i = 0; i < n; i++) items[i] = i == at ? v : Py_NewRef(F(rec, i));
    return record(Py_TYPE(rec), items, n);
}

static void set(PyObject **slot, PyObject *v) { Py_XSETREF(*slot, v); }

static long as_long(PyObject *v) { return PyLong_Check(v) ? PyLong_AsLong(v) : (PyErr_SetString(PyExc_TypeError, "not an int"), -1); }

static int phase_of(PyObject *r) { return (int)as_long(F(r, R_PHASE)); }

/* a tuple of `n` borrowed items (new), or NULL with an error */
static PyObject *pack(PyObject *const *items, Py_ssize_t n) {
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) PyTuple_SET_ITEM(out, i, Py_NewRef(items[i]));
    return out;
}

/* the memo's answer for `key` (`nkey` borrowed items), filling its table by calling its Python with
   `args` (`nargs` items) on a miss: a new reference, NULL on error. `objects`: what the answer is
   remembered by, by identity (ints by value) */
static PyObject *memo(Successors *s, int which, PyObject *const *objects, PyObject *const *key_items, Py_ssize_t nkey,
                      PyObject *const *arg_items, Py_ssize_t nargs) {
    PyObject *ids[KEYS];
    for (int i = 0; i < KEYS; i++) ids[i] = tag(objects[i]);
    PyObject *found = recall(&s->known[which], ids);
    if (found != NULL) return Py_NewRef(found);
    PyObject *key = pack(key_items, nkey), *args = key == NULL ? NULL : pack(arg_items, nargs);
    if (args == NULL) goto done;
    found = PyDict_GetItemWithError(s->memo[which], key);
    if (found != NULL) {
        Py_INCREF(found);
    } else if (!PyErr_Occurred()) {
        found = PyObject_Call(s->fill[which], args, NULL);
    }
    if (found != NULL && remember(&s->known[which], ids, found) < 0) Py_CLEAR(found);
done:
    Py_XDECREF(key);
    Py_XDECREF(args);
    return found;
}

static int txn_start(Txn *t, Successors *s, PyObject *world) {
    memset(t, 0, sizeof *t);
    t->s = s;
    t->world = world;
    t->pool = Py_NewRef(F(world, W_POOL));
    t->steps = Py_NewRef(F(world, W_STEPS));
    t->epoch = F(world, W_LAUNCHED);
    for (int i = 0; i < s->nreq; i++) t->req[i] = Py_NewRef(F(F(world, W_REQUESTS), i));
    for (int j = 0; j < s->nses; j++) t->ses[j] = Py_NewRef(F(F(world, W_SESSIONS), j));
    t->launched = as_long(F(world, W_LAUNCHED));
    t->completed = as_long(F(world, W_COMPLETED));
    return (t->moves = PyList_New(0)) == NULL || PyErr_Occurred() ? -1 : 0;
}

static void txn_end(Txn *t) {
    Py_XDECREF(t->pool);
    Py_XDECREF(t->steps);
    Py_XDECREF(t->moves);
    for (int i = 0; i < t->s->nreq; i++) Py_XDECREF(t->req[i]);
    for (int j = 0; j < t->s->nses; j++) Py_XDECREF(t->ses[j]);
}

/* record the moves of slots `ids` from pool `before` to the transaction's pool */
static int moved(Txn *t, PyObject *before, PyObject *ids, PyObject *event, PyObject *actor) {
    PyObject *b = F(before, P_SLOTS), *a = F(t->pool, P_SLOTS);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(ids); k++) {
        PyObject *id = F(ids, k);
        long i = as_long(id);
        if (i < 1 || i > PyTuple_GET_SIZE(b) || PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a slot id outside the pool");
            return -1;
        }
        PyObject *f[5] = {Py_NewRef(id), Py_NewRef(F(b, i - 1)), Py_NewRef(event), Py_NewRef(actor),
                          Py_NewRef(F(a, i - 1))};
        PyObject *m = record(t->s->type[MOVE], f, 5);
        if (m == NULL || PyList_Append(t->moves, m) < 0) return Py_XDECREF(m), -1;
        Py_DECREF(m);
    }
    return 0;
}

/* a Fire decision: `event` by `actor` on the one slot `id` (target `target`, or NOBODY) */
static int fire(Txn *t, int event, PyObject *actor, PyObject *id, PyObject *target) {
    Successors *s = t->s;
    PyObject *ev = s->event[event], *ids = PyTuple_Pack(1, id);
    if (ids == NULL) return -1;
    target = target == NULL ? s->nobody : target;
    PyObject *known[KEYS] = {t->pool, id, ev, actor, target, t->epoch};
    PyObject *key[6] = {t->pool, ids, ev, actor, target, t->epoch}, *args[6] = {t->pool, ev, ids, actor, target, t->epoch};
    PyObject *after = memo(s, M_APPLY, known, key, 6, args, 6);
    if (after == NULL) return Py_DECREF(ids), -1;
    PyObject *before = t->pool;
    t->pool = after;
    int rc = moved(t, before, ids, ev, actor);
    Py_DECREF(before);
    Py_DECREF(ids);
    return rc;
}

/* an Alloc decision of one slot by `actor`: 1 and the slot id in `*got` (new), 0 with no free slot */
static int take_one(Txn *t, PyObject *actor, PyObject **got) {
    Successors *s = t->s;
    PyObject *one = PyLong_FromLong(1);
    PyObject *known[KEYS] = {t->pool, actor}, *key[3] = {t->pool, one, actor};
    PyObject *found = one == NULL ? NULL : memo(s, M_ALLOC, known, key, 3, key, 3);
    Py_XDECREF(one);
    if (found == NULL) return -1;
    if (found == Py_None) return Py_DECREF(found), 0;
    if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 2 || !PyTuple_Check(F(found, 1)) ||
        PyTuple_GET_SIZE(F(found, 1)) != 1) {
        Py_DECREF(found);
        PyErr_SetString(PyExc_TypeError, "an alloc of one slot gave another shape");
        return -1;
    }
    PyObject *before = t->pool;
    t->pool = Py_NewRef(F(found, 0));
    int rc = moved(t, before, F(found, 1), s->event[E_ALLOC], actor);
    Py_DECREF(before);
    *got = rc < 0 ? NULL : Py_NewRef(F(F(found, 1), 0));
    Py_DECREF(found);
    return rc < 0 ? -1 : 1;
}

/* the request at index `i` becomes `rec` (stolen) */
static int put(Txn *t, int i, PyObject *rec) {
    if (rec == NULL) return -1;
    set(&t->req[i], rec);
    return 0;
}

/* a request record (id, session, phase, handle, lent, ran, src), each a new reference */
static int put_request(Txn *t, int i, int phase, PyObject *handle, PyObject *lent, PyObject *ran, PyObject *src) {
    PyObject *r = t->req[i];
    PyObject *f[7] = {Py_NewRef(F(r, R_ID)), Py_NewRef(F(r, R_SESSION)), Py_NewRef(t->s->phase[phase]), handle,
                      lent, ran, src};
    return put(t, i, record(t->s->type[REQUEST], f, 7));
}

/* the index of session id `sid`, or -1 with an error */
static int session_index(Successors *s, PyObject *sid) {
    long j = as_long(sid) - s->session_base;
    if (PyErr_Occurred()) return -1;
    if (j < 0 || j >= s->nses) return PyErr_SetString(PyExc_IndexError, "not a session of this world"), -1;
    return (int)j;
}

static int put_session(Txn *t, int j, Py_ssize_t at, PyObject *v) {
    PyObject *rec = renewed(t->ses[j], at, v);
    if (rec == NULL) return -1;
    set(&t->ses[j], rec);
    return 0;
}

/* actions._Txn.leave_steps: no step in flight advances request `rid` any more */
static int leave_steps(Txn *t, PyObject *rid) {
    Py_ssize_t n = PyTuple_GET_SIZE(t->steps), k;
    for (k = 0; k < n; k++) {
        int c = PySet_Contains(F(F(t->steps, k), ST_REQUESTS), rid);
        if (c < 0) return -1;
        if (c) break;
    }
    if (k == n) return 0;
    PyObject *out = PyTuple_New(n);
    if (out == NULL) return -1;
    for (k = 0; k < n; k++) {
        PyObject *st = F(t->steps, k), *item;
        int c = PySet_Contains(F(st, ST_REQUESTS), rid);
        if (c < 0) return Py_DECREF(out), -1;
        if (!c) {
            item = Py_NewRef(st);
        } else {
            PyObject *gone = PyTuple_Pack(1, rid), *one = gone == NULL ? NULL : PyFrozenSet_New(gone);
            PyObject *left = one == NULL ? NULL : PyNumber_Subtract(F(st, ST_REQUESTS), one); /* as `-` makes it */
            Py_XDECREF(gone);
            Py_XDECREF(one);
            PyObject *f[4] = {Py_NewRef(F(st, ST_EPOCH)), Py_NewRef(F(st, ST_SLOTS)), left, Py_NewRef(F(st, ST_COPIES))};
            item = record(t->s->type[STEP], f, 4);
        }
        if (item == NULL) return Py_DECREF(out), -1;
        PyTuple_SET_ITEM(out, k, item);
    }
    set(&t->steps, out);
    return 0;
}

/* actions._Txn.close: the session at `j` releases the slot it owns, if any, and is closed */
static int close_session(Txn *t, int j) {
    Successors *s = t->s;
    PyObject *handle = F(t->ses[j], S_HANDLE);
    if (handle != Py_None && fire(t, E_CLOSE, s->ses_actor[j], handle, NULL) < 0) return -1;
    PyObject *rec = renewed(t->ses[j], S_STATUS, Py_NewRef(s->status[CLOSED]));
    if (rec == NULL) return -1;
    set(&t->ses[j], rec);
    return put_session(t, j, S_HANDLE, Py_NewRef(Py_None));
}

/* actions._Txn.turn_over: the session's turn in flight is now `turn`; with none left, a deferred close runs */
static int turn_over(Txn *t, int j, PyObject *turn) {
    if (put_session(t, j, S_TURN, Py_NewRef(turn)) < 0) return -1;
    if (turn == Py_None && as_long(F(t->ses[j], S_STATUS)) == CLOSING) return close_session(t, j);
    return PyErr_Occurred() ? -1 : 0;
}

/* Policy.unmatch_events: a request leaving before its copy step lets go of its match's lock */
static int unmatch(Txn *t, int i, PyObject *src) {
    return src == Py_None ? 0 : fire(t, E_UNLOCK, t->s->req_actor[i], src, NULL);
}

/* -- the actions: 1 enabled (the transaction holds the next world), 0 not enabled, -1 error -- */
static int act_submit(Txn *t, int i, PyObject *unused) {
    PyObject *r = t->req[i];
    if (phase_of(r) != PENDING) return PyErr_Occurred() ? -1 : 0;
    int j = session_index(t->s, F(r, R_SESSION));
    if (j < 0) return -1;
    PyObject *s = t->ses[j], *turns = F(s, S_TURNS);
    if (as_long(F(s, S_STATUS)) != OPEN || F(s, S_TURN) != Py_None) return PyErr_Occurred() ? -1 : 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(turns); k++) {
        long other = as_long(F(turns, k));
        if (other < 0 || other >= t->s->nreq) return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_IndexError, "a turn"), -1);
        if (phase_of(t->req[other]) == PENDING) {
            if (other != i) return 0;
            if (put(t, i, renewed(r, R_PHASE, Py_NewRef(t->s->phase[WAITING]))) < 0) return -1;
            return put_session(t, j, S_TURN, Py_NewRef(F(t->req[i], R_ID))) < 0 ? -1 : 1;
        }
    }
    PyErr_SetString(PyExc_RuntimeError, "a pending turn missing from its session");
    return -1;
}

static int act_take(Txn *t, int i, PyObject *unused) {
    PyObject *r = t->req[i], *handle, *lent = Py_False;
    if (phase_of(r) != WAITING) return PyErr_Occurred() ? -1 : 0;
    int j = -1;
    if (F(r, R_SESSION) != Py_None && (j = session_index(t->s, F(r, R_SESSION))) < 0) return -1;
    if (j >= 0 && F(t->ses[j], S_HANDLE) != Py_None) {
        handle = Py_NewRef(F(t->ses[j], S_HANDLE));
        if (fire(t, E_LEND, t->s->ses_actor[j], handle, F(r, R_ID)) < 0) return Py_DECREF(handle), -1;
        lent = Py_True;
    } else {
        int rc = take_one(t, t->s->req_actor[i], &handle);
        if (rc <= 0) return rc;
    }
    r = t->req[i];
    return put_request(t, i, CANDIDATE, handle, Py_NewRef(lent), Py_NewRef(F(r, R_RAN)), Py_NewRef(F(r, R_SRC))) < 0 ? -1 : 1;
}

static int act_match(Txn *t, int i, PyObject *slot) {
    Successors *s = t->s;
    PyObject *r = t->req[i], *handle;
    if (phase_of(r) != WAITING) return PyErr_Occurred() ? -1 : 0;
    long k = as_long(slot);
    PyObject *slots = F(t->pool, P_SLOTS);
    if (k < 1 || k > PyTuple_GET_SIZE(slots)) return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_IndexError, "a slot"), -1);
    PyObject *rec = F(slots, k - 1);
    if (F(rec, SL_STATE) != s->cached) return 0;
    long readers = as_long(F(rec, SL_READERS));
    if (PyErr_Occurred()) return -1;
    if (readers >= s->max_readers) return 0;
    PyObject *pair = PyTuple_Pack(2, F(r, R_ID), slot);
    int held = pair == NULL ? -1 : PySequence_Contains(F(t->pool, P_LOCKS), pair);
    Py_XDECREF(pair);
    if (held != 0) return held < 0 ? -1 : 0;
    if (F(r, R_SESSION) != Py_None) {
        int j = session_index(s, F(r, R_SESSION));
        if (j < 0) return -1;
        if (F(t->ses[j], S_HANDLE) != Py_None) return 0;
    }
    if (fire(t, E_LOCK, s->req_actor[i], slot, NULL) < 0) return -1;
    int rc = take_one(t, s->req_actor[i], &handle);
    if (rc <= 0) return rc;
    r = t->req[i];
    return put_request(t, i, CANDIDATE, handle, Py_NewRef(Py_False), Py_NewRef(F(r, R_RAN)), Py_NewRef(slot)) < 0 ? -1 : 1;
}

static int act_admit(Txn *t, int i, PyObject *unused) {
    PyObject *r = t->req[i];
    if (phase_of(r) != CANDIDATE) return PyErr_Occurred() ? -1 : 0;
    if (fire(t, E_ADMIT, t->s->req_actor[i], F(r, R_HANDLE), NULL) < 0) return -1;
    return put_request(t, i, RUNNING, Py_NewRef(F(r, R_HANDLE)), Py_NewRef(F(r, R_LENT)), Py_NewRef(Py_False),
                       Py_NewRef(F(r, R_SRC))) < 0 ? -1 : 1;
}

static int act_rollback(Txn *t, int i, PyObject *unused) {
    PyObject *r = t->req[i];
    if (phase_of(r) != CANDIDATE) return PyErr_Occurred() ? -1 : 0;
    if (fire(t, E_ROLLBACK, t->s->req_actor[i], F(r, R_HANDLE), NULL) < 0 || unmatch(t, i, F(r, R_SRC)) < 0) return -1;
    return put_request(t, i, WAITING, Py_NewRef(Py_None), Py_NewRef(Py_False), Py_NewRef(F(r, R_RAN)),
                       Py_NewRef(Py_None)) < 0 ? -1 : 1;
}

/* a running request that has been in a completed step: 1, 0 or -1 */
static int finishing(PyObject *r) {
    if (phase_of(r) != RUNNING) return PyErr_Occurred() ? -1 : 0;
    return PyObject_IsTrue(F(r, R_RAN));
}

static int act_finish(Txn *t, int i, PyObject *unused) {
    PyObject *r = t->req[i], *sid = F(r, R_SESSION);
    int rc = finishing(r), j = -1;
    if (rc <= 0) return rc;
    if (sid != Py_None && (j = session_index(t->s, sid)) < 0) return -1;
    int lent = PyObject_IsTrue(F(r, R_LENT));
    if (lent < 0) return -1;
    Py_INCREF(r); /* kept while the request's record is replaced */
    if (j >= 0 && !lent) {
        rc = fire(t, E_PARK, t->s->req_actor[i], F(r, R_HANDLE), sid);
        if (rc == 0) rc = put_session(t, j, S_HANDLE, Py_NewRef(F(r, R_HANDLE)));
    } else {
        rc = fire(t, E_FINISH, t->s->req_actor[i], F(r, R_HANDLE), NULL);
    }
    if (rc == 0)
        rc = put_request(t, i, DONE, Py_NewRef(Py_None), Py_NewRef(Py_False), Py_NewRef(Py_False), Py_NewRef(F(r, R_SRC)));
    if (rc == 0) rc = leave_steps(t, F(r, R_ID));
    if (rc == 0 && j >= 0) rc = turn_over(t, j, Py_None);
    Py_DECREF(r);
    return rc < 0 ? -1 : 1;
}

/* how many slots the prefix cache owns */
static int cached_count(Successors *s, PyObject *pool, int *count) {
    PyObject *slots = F(pool, P_SLOTS);
    *count = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(slots); k++) {
        int c = PySet_Contains(s->cache_owned, F(F(slots, k), SL_STATE));
        if (c < 0) return -1;
        *count += c;
    }
    return 0;
}

static int act_donate(Txn *t, int i, PyObject *unused) {
    PyObject *r = t->req[i];
    int rc = finishing(r), lent, count;
    if (rc <= 0) return rc;
    if (F(r, R_SESSION) != Py_None) return 0;
    if ((lent = PyObject_IsTrue(F(r, R_LENT))) != 0) return lent < 0 ? -1 : 0;
    if (cached_count(t->s, t->pool, &count) < 0) return -1;
    long nodes = as_long(F(t->world, W_NODES));
    if (PyErr_Occurred()) return -1;
    if (count >= nodes) return 0;
    long handle = as_long(F(r, R_HANDLE));
    if (PyErr_Occurred()) return -1;
    PyObject *node = PyLong_FromLong(t->s->node_base + handle);
    if (node == NULL) return -1;
    rc = fire(t, E_INSERT, t->s->req_actor[i], F(r, R_HANDLE), node);
    Py_DECREF(node);
    if (rc < 0) return -1;
    Py_INCREF(r);
    rc = put_request(t, i, DONE, Py_NewRef(Py_None), Py_NewRef(Py_False), Py_NewRef(Py_False), Py_NewRef(F(r, R_SRC)));
    if (rc == 0) rc = leave_steps(t, F(r, R_ID));
    Py_DECREF(r);
    return rc < 0 ? -1 : 1;
}

static int act_evict(Txn *t, int unused, PyObject *slot) {
    long k = as_long(slot);
    PyObject *slots = F(t->pool, P_SLOTS);
    if (k < 1 || k > PyTuple_GET_SIZE(slots)) return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_IndexError, "a slot"), -1);
    PyObject *rec = F(slots, k - 1);
    long readers = as_long(F(rec, SL_READERS));
    if (PyErr_Occurred()) return -1;
    if (readers != 0) return 0;
    PyObject *actor = PyObject_CallOneArg(t->s->actor_cache, F(rec, SL_OWNER));
    if (actor == NULL) return -1;
    int rc = fire(t, E_EVICT, actor, slot, NULL);
    Py_DECREF(actor);
    return rc < 0 ? -1 : 1;
}

/* retract (`done` = 0) or abort (1): the request gives back what it holds and waits again, or is done */
static int leave(Txn *t, int i, int event, int phase) {
    PyObject *r = t->req[i];
    int rc = fire(t, event, t->s->req_actor[i], F(r, R_HANDLE), NULL);
    if (rc == 0) rc = unmatch(t, i, F(r, R_SRC));
    if (rc < 0) return -1;
    Py_INCREF(r);
    rc = put_request(t, i, phase, Py_NewRef(Py_None), Py_NewRef(Py_False), Py_NewRef(Py_False), Py_NewRef(Py_None));
    if (rc == 0) rc = leave_steps(t, F(r, R_ID));
    Py_DECREF(r);
    return rc;
}

static int act_retract(Txn *t, int i, PyObject *unused) {
    if (phase_of(t->req[i]) != RUNNING) return PyErr_Occurred() ? -1 : 0;
    return leave(t, i, E_RETRACT, WAITING) < 0 ? -1 : 1;
}

static int act_abort(Txn *t, int i, PyObject *unused) {
    PyObject *r = t->req[i], *sid = F(r, R_SESSION);
    int phase = phase_of(r), rc, j = -1;
    if (phase == DONE || PyErr_Occurred()) return PyErr_Occurred() ? -1 : 0;
    if (sid != Py_None && (j = session_index(t->s, sid)) < 0) return -1;
    Py_INCREF(r);
    if (phase == PENDING || phase == WAITING || F(r, R_HANDLE) == Py_None) {
        rc = put_request(t, i, DONE, Py_NewRef(Py_None), Py_NewRef(Py_False), Py_NewRef(Py_False), Py_NewRef(Py_None));
        if (rc == 0) rc = leave_steps(t, F(r, R_ID));
    } else {
        rc = leave(t, i, E_ABORT, DONE);
    }
    if (rc == 0 && j >= 0) { /* Policy.turn_after_abort: none if this was the turn in flight, else unchanged */
        PyObject *turn = F(t->ses[j], S_TURN);
        int same = PyObject_RichCompareBool(turn, F(r, R_ID), Py_EQ);
        rc = same < 0 ? -1 : turn_over(t, j, same ? Py_None : turn);
    }
    Py_DECREF(r);
    return rc < 0 ? -1 : 1;
}

static int act_close(Txn *t, int j, PyObject *unused) {
    PyObject *s = t->ses[j], *turns = F(s, S_TURNS);
    if (as_long(F(s, S_STATUS)) != OPEN) return PyErr_Occurred() ? -1 : 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(turns); k++) { /* its turns not yet submitted will never be */
        long i = as_long(F(turns, k));
        if (i < 0 || i >= t->s->nreq) return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_IndexError, "a turn"), -1);
        if (phase_of(t->req[i]) == PENDING && put(t, i, renewed(t->req[i], R_PHASE, Py_NewRef(t->s->phase[DONE]))) < 0)
            return -1;
    }
    if (F(s, S_TURN) == Py_None) return close_session(t, j) < 0 ? -1 : 1;
    return put_session(t, j, S_STATUS, Py_NewRef(t->s->status[CLOSING])) < 0 ? -1 : 1;
}

static int act_launch(Txn *t, int unused, PyObject *unused2) {
    Successors *s = t->s;
    if (PyTuple_GET_SIZE(t->steps) >= (s->overlap ? 2 : 1)) return 0;
    /* brand-new frozensets, filled in the Python's order: the same table, so the same iteration order */
    PyObject *used = PyFrozenSet_New(NULL), *ids = PyFrozenSet_New(NULL), *copies = PyFrozenSet_New(NULL), *f[4] = {NULL};
    int rc = -1, running = 0;
    if (used == NULL || ids == NULL || copies == NULL) goto done;
    for (int i = 0; i < s->nreq; i++) {
        PyObject *r = t->req[i];
        int phase = phase_of(r);
        if (PyErr_Occurred()) goto done;
        if (phase != RUNNING) continue;
        running = 1;
        if (F(r, R_HANDLE) != Py_None && PySet_Add(used, F(r, R_HANDLE)) < 0) goto done;
        if (PySet_Add(ids, F(r, R_ID)) < 0) goto done;
        if (F(r, R_SRC) != Py_None) { /* the step performs the copy: its fence lets go of the lock */
            PyObject *pair = PyTuple_Pack(2, F(r, R_ID), F(r, R_SRC));
            if (pair == NULL || PySet_Add(copies, pair) < 0) { Py_XDECREF(pair); goto done; }
            Py_DECREF(pair);
            if (put(t, i, renewed(r, R_SRC, Py_NewRef(Py_None))) < 0) goto done;
        }
    }
    if (!running) { rc = 0; goto done; }
    t->launched += 1;
    f[0] = PyLong_FromLong(t->launched), f[1] = Py_NewRef(used), f[2] = Py_NewRef(ids), f[3] = Py_NewRef(copies);
    PyObject *step = record(s->type[STEP], f, 4), *steps = NULL;
    if (step == NULL) goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(t->steps);
    if ((steps = PyTuple_New(n + 1)) == NULL) { Py_DECREF(step); goto done; }
    for (Py_ssize_t k = 0; k < n; k++) PyTuple_SET_ITEM(steps, k, Py_NewRef(F(t->steps, k)));
    PyTuple_SET_ITEM(steps, n, step);
    set(&t->steps, steps);
    rc = 1; /* Policy.launch_events: nothing fires */
done:
    Py_XDECREF(used);
    Py_XDECREF(ids);
    Py_XDECREF(copies);
    return rc;
}

static int act_complete(Txn *t, int unused, PyObject *unused2) {
    Successors *s = t->s;
    Py_ssize_t n = PyTuple_GET_SIZE(t->steps);
    if (n == 0) return 0;
    PyObject *done = Py_NewRef(F(t->steps, 0)), *rest = PyTuple_GetSlice(t->steps, 1, n);
    long pairs[MAX_REQ * MAX_SLOTS][2];
    int count = 0, rc = -1;
    if (rest == NULL) goto fail;
    set(&t->steps, rest);
    PyObject *item, *it = PyObject_GetIter(F(done, ST_REQUESTS));
    if (it == NULL) goto fail;
    while ((item = PyIter_Next(it)) != NULL) { /* Policy.requeued_at_fence: never */
        long i = as_long(item);
        Py_DECREF(item);
        if (!PyErr_Occurred() && (i < 0 || i >= s->nreq)) PyErr_SetString(PyExc_IndexError, "a request");
        if (PyErr_Occurred() || put(t, (int)i, renewed(t->req[i], R_RAN, Py_NewRef(Py_True))) < 0) {
            Py_DECREF(it);
            goto fail;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) goto fail;
    if ((it = PyObject_GetIter(F(done, ST_COPIES))) == NULL) goto fail;
    while ((item = PyIter_Next(it)) != NULL) {
        if (count >= MAX_REQ * MAX_SLOTS || !PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            Py_DECREF(item), Py_DECREF(it);
            PyErr_SetString(PyExc_TypeError, "a copy");
            goto fail;
        }
        pairs[count][0] = as_long(F(item, 0)), pairs[count][1] = as_long(F(item, 1));
        count++;
        Py_DECREF(item);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) goto fail;
    qsort(pairs, (size_t)count, sizeof pairs[0], by_pair);
    for (int k = 0; k < count; k++) { /* Policy.copy_done_events: the copy's lock goes */
        if (pairs[k][0] < 0 || pairs[k][0] >= s->nreq) { PyErr_SetString(PyExc_IndexError, "a request"); goto fail; }
        PyObject *slot = PyLong_FromLong(pairs[k][1]);
        if (slot == NULL) goto fail;
        int bad = fire(t, E_UNLOCK, s->req_actor[pairs[k][0]], slot, NULL);
        Py_DECREF(slot);
        if (bad < 0) goto fail;
    }
    t->completed = as_long(F(done, ST_EPOCH));
    rc = PyErr_Occurred() ? -1 : 1;
fail:
    Py_DECREF(done);
    return rc;
}

/* actions._Txn.freeze: fence what the device has finished, normalise epochs; the next world (new) */
static PyObject *freeze(Txn *t) {
    Successors *s = t->s;
    PyObject *completed = PyLong_FromLong(t->completed), *before = t->pool, *got, *actor = NULL;
    PyObject *pool = NULL, *steps = NULL, *f[10] = {NULL};
    if (completed == NULL) return NULL;
    PyObject *known[KEYS] = {before, completed};
    got = memo(s, M_FENCE, known, known, 2, known, 2);
    if (got == NULL) goto fail;
    if (got == Py_None) Py_SETREF(got, Py_NewRef(before)); /* the memo's mark of a pool the fence leaves */
    if (got != before) {
        PyObject *a = F(before, P_SLOTS), *b = F(got, P_SLOTS);
        if ((actor = PyObject_CallOneArg(s->actor_fence, completed)) == NULL) goto fail_got;
        if (PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b)) { PyErr_SetString(PyExc_ValueError, "a fence resized the pool"); goto fail_got; }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(a); k++) {
            int ne = PyObject_RichCompareBool(F(a, k), F(b, k), Py_NE);
            if (ne < 0) goto fail_got;
            if (!ne) continue;
            PyObject *m[5] = {PyLong_FromSsize_t(k + 1), Py_NewRef(F(a, k)), Py_NewRef(s->event[E_FENCE]),
                              Py_NewRef(actor), Py_NewRef(F(b, k))};
            PyObject *move = record(s->type[MOVE], m, 5);
            if (move == NULL || PyList_Append(t->moves, move) < 0) { Py_XDECREF(move); goto fail_got; }
            Py_DECREF(move);
        }
    }
    t->pool = got, got = NULL;
    Py_DECREF(before);
    long base = t->completed;
    pool = Py_NewRef(t->pool), steps = Py_NewRef(t->steps);
    if (base) {
        PyObject *b = PyLong_FromLong(base);
        PyObject *shift[KEYS] = {t->pool, b};
        Py_SETREF(pool, b == NULL ? NULL : memo(s, M_SHIFTED, shift, shift, 2, shift, 2));
        Py_XDECREF(b);
        if (pool == NULL) goto fail;
        Py_ssize_t n = PyTuple_GET_SIZE(t->steps);
        Py_SETREF(steps, PyTuple_New(n));
        if (steps == NULL) goto fail;
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *st = F(t->steps, k);
            long epoch = as_long(F(st, ST_EPOCH));
            if (PyErr_Occurred()) goto fail;
            PyObject *g[4] = {PyLong_FromLong(epoch - base), Py_NewRef(F(st, ST_SLOTS)), Py_NewRef(F(st, ST_REQUESTS)),
                              Py_NewRef(F(st, ST_COPIES))};
            PyObject *shifted = record(s->type[STEP], g, 4);
            if (shifted == NULL) goto fail;
            PyTuple_SET_ITEM(steps, k, shifted);
        }
    }
    f[1] = PyTuple_New(s->nreq), f[2] = PyTuple_New(s->nses);
    if (f[1] == NULL || f[2] == NULL) goto fail;
    for (int i = 0; i < s->nreq; i++) PyTuple_SET_ITEM(f[1], i, Py_NewRef(t->req[i]));
    for (int j = 0; j < s->nses; j++) PyTuple_SET_ITEM(f[2], j, Py_NewRef(t->ses[j]));
    f[0] = pool, f[3] = PyLong_FromLong(t->launched - base), f[4] = PyLong_FromLong(0), f[5] = steps;
    for (int k = W_NODES; k <= W_BEHIND; k++) f[k] = Py_NewRef(F(t->world, k)); /* fixed, or empty: see `fits` */
    Py_XDECREF(actor);
    Py_DECREF(completed);
    return record(s->type[WORLD], f, SIZE[WORLD]);
fail_got:
    Py_XDECREF(got);
fail:
    for (int k = 1; k < 3; k++) Py_XDECREF(f[k]);
    Py_XDECREF(pool);
    Py_XDECREF(steps);
    Py_XDECREF(actor);
    Py_DECREF(completed);
    return NULL;
}

typedef int (*Act)(Txn *, int, PyObject *);

/* actions._attempt: run action `fn` on (`i`, `o`) and add its outcome to `out` if it is enabled; -1: error */
static int attempt(Successors *s, PyObject *out, PyObject *world, int kind, PyObject *who, PyObject *slot, Act fn,
                   int i, PyObject *o) {
    Txn t;
    int rc = txn_start(&t, s, world);
    if (rc == 0) rc = fn(&t, i, o);
    if (rc == 1) {
        PyObject *next = freeze(&t), *a[3] = {Py_NewRef(s->kind[kind]), Py_NewRef(who), Py_NewRef(slot)};
        PyObject *action = record(s->type[ACTION], a, 3);
        PyObject *o4[4] = {action, next, PyList_AsTuple(t.moves), Py_NewRef(Py_None)};
        PyObject *outcome = record(s->type[OUTCOME], o4, 4);
        rc = outcome == NULL || PyList_Append(out, outcome) < 0 ? -1 : 0;
        Py_XDECREF(outcome);
    }
    txn_end(&t);
    return rc < 0 ? -1 : 0;
}

/* whether `world` has the shape this binding reads (else the Python expands it) */
static int fits(Successors *s, PyObject *world) {
    if (Py_TYPE(world) != s->type[WORLD] || PyTuple_GET_SIZE(world) != SIZE[WORLD]) return 0;
    PyObject *pool = F(world, W_POOL), *reqs = F(world, W_REQUESTS), *sess = F(world, W_SESSIONS);
    PyObject *steps = F(world, W_STEPS);
    /* speculative decoding (drafts, windows, verified state behind) is the Python's alone */
    if (!PyLong_CheckExact(F(world, W_DRAFTS)) || PyLong_AsLong(F(world, W_DRAFTS)) != 0 ||
        !PyAnySet_CheckExact(F(world, W_WINDOWS)) || PySet_GET_SIZE(F(world, W_WINDOWS)) != 0 ||
        !PyAnySet_CheckExact(F(world, W_BEHIND)) || PySet_GET_SIZE(F(world, W_BEHIND)) != 0)
        return 0;
    if (!PyTuple_Check(pool) || PyTuple_GET_SIZE(pool) != 3 || !PyTuple_Check(F(pool, P_SLOTS)) ||
        PyTuple_GET_SIZE(F(pool, P_SLOTS)) > MAX_SLOTS || !PyTuple_CheckExact(reqs) || PyTuple_GET_SIZE(reqs) != s->nreq ||
        !PyTuple_CheckExact(sess) || PyTuple_GET_SIZE(sess) != s->nses || !PyTuple_CheckExact(steps))
        return 0;
    PyObject *slots = F(pool, P_SLOTS);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(slots); k++)
        if (!PyTuple_Check(F(slots, k)) || PyTuple_GET_SIZE(F(slots, k)) != 5) return 0;
    for (int i = 0; i < s->nreq; i++) {
        PyObject *r = F(reqs, i);
        if (Py_TYPE(r) != s->type[REQUEST] || PyTuple_GET_SIZE(r) != SIZE[REQUEST]) return 0;
        int overflow;
        PyObject *id = F(r, R_ID);
        if (!PyLong_CheckExact(id) || PyLong_AsLongAndOverflow(id, &overflow) != i || overflow) return 0;
    }
    for (int j = 0; j < s->nses; j++) {
        PyObject *x = F(sess, j);
        if (Py_TYPE(x) != s->type[SESSION] || PyTuple_GET_SIZE(x) != SIZE[SESSION] || !PyTuple_CheckExact(F(x, S_TURNS)))
            return 0;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(steps); k++) {
        PyObject *st = F(steps, k);
        if (Py_TYPE(st) != s->type[STEP] || PyTuple_GET_SIZE(st) != SIZE[STEP] || !PyAnySet_Check(F(st, ST_REQUESTS)))
            return 0;
    }
    return 1;
}

static int expand_into(Successors *s, PyObject *world, PyObject *out) {
    PyObject *pool = F(world, W_POOL), *slots = F(pool, P_SLOTS), *none = Py_None;
    PyObject *ids[MAX_SLOTS];
    int cached[MAX_SLOTS], published[MAX_SLOTS], ncached = 0, npublished = 0, rc = 0;
    if (PyTuple_GET_SIZE(F(world, W_STEPS)) && !s->overlap) /* the one step in flight completes before anything else */
        return attempt(s, out, world, A_COMPLETE, none, none, act_complete, 0, NULL);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(slots); k++) ids[k] = NULL;
    if (F(pool, P_LOCKS) != Py_None)
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(slots); k++) {
            PyObject *state = F(F(slots, k), SL_STATE);
            int c = PySet_Contains(s->cache_owned, state);
            if (c < 0) return -1;
            if (c) cached[ncached++] = (int)k, published[npublished] = (int)k, npublished += state == s->cached;
        }
    for (int n = 0; n < ncached && rc == 0; n++)
        if ((ids[cached[n]] = PyLong_FromLong(cached[n] + 1)) == NULL) rc = -1;
    for (int i = 0; i < s->nreq && rc == 0; i++) {
        PyObject *r = F(F(world, W_REQUESTS), i), *who = F(r, R_ID);
        switch (phase_of(r)) {
        case PENDING:
            rc = attempt(s, out, world, A_SUBMIT, who, none, act_submit, i, NULL);
            if (rc == 0) rc = attempt(s, out, world, A_ABORT, who, none, act_abort, i, NULL);
            break;
        case WAITING:
            rc = attempt(s, out, world, A_TAKE, who, none, act_take, i, NULL);
            if (rc == 0) rc = attempt(s, out, world, A_ABORT, who, none, act_abort, i, NULL);
            for (int n = 0; n < npublished && rc == 0; n++)
                rc = attempt(s, out, world, A_MATCH, who, ids[published[n]], act_match, i, ids[published[n]]);
            break;
        case CANDIDATE:
            rc = attempt(s, out, world, A_ADMIT, who, none, act_admit, i, NULL);
            if (rc == 0) rc = attempt(s, out, world, A_ROLLBACK, who, none, act_rollback, i, NULL);
            if (rc == 0) rc = attempt(s, out, world, A_ABORT, who, none, act_abort, i, NULL);
            break;
        case RUNNING:
            rc = attempt(s, out, world, A_FINISH, who, none, act_finish, i, NULL);
            if (rc == 0) rc = attempt(s, out, world, A_DONATE, who, none, act_donate, i, NULL);
            if (rc == 0) rc = attempt(s, out, world, A_RETRACT, who, none, act_retract, i, NULL);
            if (rc == 0) rc = attempt(s, out, world, A_ABORT, who, none, act_abort, i, NULL);
            break;
        case DONE:
            break;
        default:
            rc = -1;
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "not a phase");
        }
    }
    for (int n = 0; n < ncached && rc == 0; n++)
        rc = attempt(s, out, world, A_EVICT, none, ids[cached[n]], act_evict, 0, ids[cached[n]]);
    if (rc == 0) rc = attempt(s, out, world, A_LAUNCH, none, none, act_launch, 0, NULL);
    if (rc == 0) rc = attempt(s, out, world, A_COMPLETE, none, none, act_complete, 0, NULL);
    for (int j = 0; j < s->nses && rc == 0; j++) {
        PyObject *x = F(F(world, W_SESSIONS), j);
        long status = as_long(F(x, S_STATUS));
        if (PyErr_Occurred()) rc = -1;
        else if (status == OPEN) rc = attempt(s, out, world, A_CLOSE, F(x, S_ID), none, act_close, j, NULL);
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(slots); k++) Py_XDECREF(ids[k]);
    return rc;
}

static PyObject *expand(Successors *s, PyObject *world) {
    if (!s->ready) return PyErr_SetString(PyExc_RuntimeError, "Successors is not bound"), NULL;
    if (!fits(s, world)) Py_RETURN_NONE;
    PyObject *count = PyList_GET_SIZE(s->forgotten) ? PyList_GET_ITEM(s->forgotten, 0) : NULL;
    if (count != s->seen) { /* `memo.forget` has run (perhaps for another model): the answers go too */
        for (int m = 0; m < MEMOS; m++) forget_all(&s->known[m]);
        Py_XSETREF(s->seen, Py_XNewRef(count));
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    if (expand_into(s, world, out) < 0) {
        Py_DECREF(out);
        if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL; /* an interrupt goes on up */
        PyErr_Clear(); /* a refusal or a surprise: the Python expands this world and reports it */
        Py_RETURN_NONE;
    }
    return out;
}

/* a tuple argument of exactly `n` items, or NULL with an error */
static PyObject *tuple_of(PyObject *v, Py_ssize_t n, const char *what) {
    if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != n) return PyErr_Format(PyExc_ValueError, "%s: %zd items expected", what, n), NULL;
    return v;
}

static int successors_init(Successors *s, PyObject *args, PyObject *kw) {
    PyObject *types, *events, *kinds, *memos, *fills, *reqs, *sess, *phases, *statuses;
    PyObject *actor_cache, *actor_fence, *cached, *cache_owned, *nobody, *forgotten;
    long session_base, node_base, max_readers;
    int overlap;
    if (s->ready || s->type[0] != NULL) return PyErr_SetString(PyExc_RuntimeError, "Successors is bound once"), -1;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOlllpO!", &types, &events, &kinds, &memos, &fills, &reqs, &sess,
                          &actor_cache, &actor_fence, &cached, &cache_owned, &nobody, &phases, &statuses,
                          &session_base, &node_base, &max_readers, &overlap, &PyList_Type, &forgotten))
        return -1;
    Py_XSETREF(s->forgotten, Py_NewRef(forgotten));
    Py_XSETREF(s->seen, PyList_GET_SIZE(forgotten) ? Py_NewRef(PyList_GET_ITEM(forgotten, 0)) : NULL);
    Py_XSETREF(s->actor_cache, Py_NewRef(actor_cache));
    Py_XSETREF(s->actor_fence, Py_NewRef(actor_fence));
    Py_XSETREF(s->cached, Py_NewRef(cached));
    Py_XSETREF(s->cache_owned, Py_NewRef(cache_owned));
    Py_XSETREF(s->nobody, Py_NewRef(nobody));
    s->session_base = session_base, s->node_base = node_base, s->max_readers = max_readers;
    if (!tuple_of(types, RECORDS, "types") || !tuple_of(events, EVENTS, "events") || !tuple_of(kinds, ACTIONS, "kinds") ||
        !tuple_of(memos, MEMOS, "memos") || !tuple_of(fills, MEMOS, "fills") || !tuple_of(phases, DONE + 1, "phases") ||
        !tuple_of(statuses, CLOSED + 1, "statuses") || !PyTuple_Check(reqs) || !PyTuple_Check(sess))
        return -1;
    if (PyTuple_GET_SIZE(reqs) > MAX_REQ || PyTuple_GET_SIZE(sess) > MAX_SES)
        return PyErr_SetString(PyExc_ValueError, "more actors than the C tables hold"), -1;
    if (!PyFrozenSet_Check(s->cache_owned)) return PyErr_SetString(PyExc_ValueError, "cache_owned: a frozenset"), -1;
    for (int r = 0; r < RECORDS; r++) {
        PyObject *t = F(types, r);
        if (!PyType_Check(t) || !PyType_IsSubtype((PyTypeObject *)t, &PyTuple_Type))
            return PyErr_SetString(PyExc_ValueError, "types: tuple subclasses"), -1;
        s->type[r] = (PyTypeObject *)Py_NewRef(t);
    }
    for (int e = 0; e < EVENTS; e++) s->event[e] = Py_NewRef(F(events, e));
    for (int a = 0; a < ACTIONS; a++) s->kind[a] = Py_NewRef(F(kinds, a));
    for (int m = 0; m < MEMOS; m++) {
        if (!PyDict_CheckExact(F(memos, m)) || !PyCallable_Check(F(fills, m)))
            return PyErr_SetString(PyExc_ValueError, "memos: dicts; fills: callables"), -1;
        s->memo[m] = Py_NewRef(F(memos, m)), s->fill[m] = Py_NewRef(F(fills, m));
    }
    s->nreq = (int)PyTuple_GET_SIZE(reqs), s->nses = (int)PyTuple_GET_SIZE(sess);
    for (int i = 0; i < s->nreq; i++) s->req_actor[i] = Py_NewRef(F(reqs, i));
    for (int j = 0; j < s->nses; j++) s->ses_actor[j] = Py_NewRef(F(sess, j));
    for (int p = 0; p <= DONE; p++) s->phase[p] = Py_NewRef(F(phases, p));
    for (int p = 0; p <= CLOSED; p++) s->status[p] = Py_NewRef(F(statuses, p));
    s->overlap = overlap;
    s->ready = 1;
    return 0;
}

static void successors_dealloc(Successors *s) {
    for (int r = 0; r < RECORDS; r++) Py_XDECREF(s->type[r]);
    for (int e = 0; e < EVENTS; e++) Py_XDECREF(s->event[e]);
    for (int a = 0; a < ACTIONS; a++) Py_XDECREF(s->kind[a]);
    for (int m = 0; m < MEMOS; m++) Py_XDECREF(s->memo[m]), Py_XDECREF(s->fill[m]), forget_all(&s->known[m]);
    for (int i = 0; i < s->nreq; i++) Py_XDECREF(s->req_actor[i]);
    for (int j = 0; j < s->nses; j++) Py_XDECREF(s->ses_actor[j]);
    for (int p = 0; p <= DONE; p++) Py_XDECREF(s->phase[p]);
    for (int p = 0; p <= CLOSED; p++) Py_XDECREF(s->status[p]);
    Py_XDECREF(s->actor_cache), Py_XDECREF(s->actor_fence), Py_XDECREF(s->cached), Py_XDECREF(s->cache_owned);
    Py_XDECREF(s->nobody), Py_XDECREF(s->forgotten), Py_XDECREF(s->seen);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyMethodDef successors_methods[] = {
    {"expand", (PyCFunction)expand, METH_O,
     "expand(world): the list of outcomes `actions.successors` yields for `world`, or None (the Python's to do)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SuccessorsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "slotwarden.verification.abstract._successors.Successors",
    .tp_basicsize = sizeof(Successors),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One run's fixed facts, bound once for expanding its worlds under the correct policy.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)successors_init,
    .tp_dealloc = (destructor)successors_dealloc,
    .tp_methods = successors_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_successors", "The abstract scheduler's successors.", -1, NULL};

PyMODINIT_FUNC PyInit__successors(void) {
    if (PyType_Ready(&SuccessorsType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObject(m, "Successors", Py_NewRef((PyObject *)&SuccessorsType)) < 0) {
        Py_DECREF(&SuccessorsType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
