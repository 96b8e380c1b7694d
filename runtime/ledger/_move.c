/* The ledger's compiled move: one lifecycle event on a batch of slots, checked whole, then
 * written, in C over the ledger's columns.
 *
 * It restates nothing about the lifecycle: a `Mover` is built from the ledger's own columns
 * and from the tables `kernels.transition` compiled from the model (per event the next state
 * and the four field sources of every key, per state the relation bits the event reads), and
 * from the key's bit layout and the source codes, handed in by `kernels.compiled`. A slot's
 * key is computed as `look_up` computes it; its fields are written as `write` writes them.
 *
 * Contract of `Mover.move(event, ids, actor, target, epoch, before, after, keys, write, dup)`:
 *   ids     a C-contiguous int64 buffer of n >= 1 slot ids, the bytes of one, or one id (an int);
 *   actor   one actor id (int) or a C-contiguous int64 buffer of n, one per slot;
 *   before, after   uint8 buffers of n, filled with each slot's state before and after; or both
 *           None, when the caller needs them only if the slots differ: a batch whose slots were
 *           in different states, or move to different ones, is then refused with
 *           ASK_WITH_STATES (131072), nothing written, for the caller to ask again with buffers;
 *   keys    None or an int64 buffer of n, filled with each slot's key;
 *   write   whether to write when every check passes (False: check only);
 *   dup     whether to refuse a slot named twice (False: the caller knows they are distinct);
 *   give, given, when   (optional, all three or none) with `write`, when every check has passed and
 *           every slot moves to state `when`, `give(given)` is called before anything is written (the
 *           guard hands its engine the freed slots there): if it raises, the move returns NULL with
 *           nothing written. Slots in, or moving to, different states are then refused with
 *           ASK_WITH_STATES, nothing written and `give` not called. `give` must not move this
 *           ledger's slots (the ledger holds its write mark over the call: a call into it raises).
 * Returns, when every check passes, `after + 256 * before` when every slot was in one state and
 * moved to one state, or MIXED (65536) otherwise; else -(1 + 4 * p + why) for the first refused
 * position p, why 0: not a slot of the pool, 1: named twice, 2: a move the table refuses, 3: a
 * state code the table does not know (a corrupt record). A refused batch changes nothing (the
 * ledger then asks its vectorised path, which raises the model's typed error). Every id is
 * checked against the capacity whatever `dup` says: no access lands outside the columns.
 *
 * A batch that is a few runs of consecutive slots (what a free ring in order hands out, and
 * what comes back together), moved by one actor, is checked and written a run at a time through
 * contiguous memory (loops the compiler vectorises); any other batch a slot at a time.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "_move.h"

static void mover_release(Mover *m) {
    Py_buffer *all[9];
    for (int i = 0; i < 7; i++) all[i] = &m->cols[i];
    all[7] = &m->tables;
    all[8] = &m->probes;
    for (int i = 0; i < m->held; i++) PyBuffer_Release(all[i]);
    m->held = 0;
    m->events = m->capacity = 0; /* unbound: `move` refuses every event until bound again */
}

static void mover_dealloc(Mover *m) {
    mover_release(m);
    PyMem_Free(m->from);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

/* Hold `obj`'s buffer: C-contiguous, or (`strided`) one-dimensional with any stride. */
static int take(Mover *m, Py_buffer *view, PyObject *obj, Py_ssize_t itemsize, int writable, int strided,
                const char *what) {
    int flags = (strided ? PyBUF_STRIDES : PyBUF_C_CONTIGUOUS) | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    m->held++;
    if (view->itemsize != itemsize || view->ndim < 1 || (strided && view->ndim != 1)) {
        PyErr_Format(PyExc_ValueError, "%s: an array of %zd-byte items", what, itemsize);
        return -1;
    }
    return 0;
}

/* Mover(columns, tables, probes, layout, sources)
 *   columns: (state u8, last_event u8, owner i64, borrower i64, fence i32, readers u8, stamp i32), capacity + 1
 *            each; state and last_event may be strided (the two bytes of one 16-bit word), the rest contiguous
 *   tables:  uint8 array [events, 5, keys];  probes: uint8 array [events, states]
 *   layout:  (BITS, OWN, BOR, DUE, IDLE, FULL, MAX_READERS, NOBODY, ILLEGAL)
 *   sources: (KEEP, ACTOR, TARGET, EPOCH, CLEAR, INC, DEC) */
static int mover_init(Mover *m, PyObject *args, PyObject *Py_UNUSED(kw)) {
    PyObject *columns, *tables, *probes;
    static const Py_ssize_t sizes[7] = {1, 1, 8, 8, 4, 1, 4};
    static const char *names[7] = {"state", "last_event", "owner", "borrower", "fence", "readers", "stamp"};
    mover_release(m);
    if (!PyArg_ParseTuple(args, "O!OO(lllllllLl)(iiiiiii)", &PyTuple_Type, &columns, &tables, &probes, &m->bits,
                          &m->own, &m->bor, &m->due, &m->idle, &m->full, &m->max_readers, &m->nobody, &m->illegal,
                          &m->src[0], &m->src[1], &m->src[2], &m->src[3], &m->src[4], &m->src[5], &m->src[6]))
        return -1;
    if (PyTuple_GET_SIZE(columns) != 7) {
        PyErr_SetString(PyExc_ValueError, "columns: the seven columns");
        return -1;
    }
    for (int i = 0; i < 7; i++)
        if (take(m, &m->cols[i], PyTuple_GET_ITEM(columns, i), sizes[i], 1, i < 2, names[i]) < 0) return -1;
    Py_ssize_t n = m->cols[0].shape[0];
    for (int i = 1; i < 7; i++)
        if (m->cols[i].shape[0] != n) {
            PyErr_Format(PyExc_ValueError, "column %s: %zd rows, not %zd", names[i], m->cols[i].shape[0], n);
            return -1;
        }
    if (take(m, &m->tables, tables, 1, 0, 0, "tables") < 0 || take(m, &m->probes, probes, 1, 0, 0, "probes") < 0)
        return -1;
    if (m->tables.ndim != 3 || m->tables.shape[1] != 5 || m->probes.ndim != 2 ||
        m->probes.shape[0] != m->tables.shape[0] || m->tables.shape[0] > MAX_EVENTS ||
        m->probes.shape[1] * m->bits != m->tables.shape[2]) {
        PyErr_SetString(PyExc_ValueError, "tables [events, 5, states * bits] and probes [events, states]");
        return -1;
    }
    if (m->bits != K_BITS || m->own != K_OWN || m->bor != K_BOR || m->due != K_DUE || m->idle != K_IDLE ||
        m->full != K_FULL || m->max_readers != K_MAX_READERS || m->nobody != K_NOBODY || m->illegal != K_ILLEGAL) {
        PyErr_SetString(PyExc_ValueError,
                        "layout: not the key layout this kernel was built for (runtime/ledger/_move.c)");
        return -1;
    }
    m->state = m->cols[0].buf;
    m->last = m->cols[1].buf;
    m->state_step = m->cols[0].strides[0];
    m->last_step = m->cols[1].strides[0];
    m->mark = -1;
    m->runs = RUNS_MAX;
    m->gather = 1;
    m->word = m->state_step == 2 && m->last_step == 2 && m->last == m->state + 1 && ((uintptr_t)m->state & 1) == 0;

    m->owner = m->cols[2].buf;
    m->borrower = m->cols[3].buf;
    m->fence = m->cols[4].buf;
    m->readers = m->cols[5].buf;
    m->stamp = m->cols[6].buf;
    m->capacity = n - 1;
    m->events = m->tables.shape[0];
    m->states = m->probes.shape[1];
    m->keys = m->tables.shape[2];
    /* the sources, renumbered once: the moves switch on constants */
    PyMem_Free(m->from);
    m->from = PyMem_Malloc(m->events * m->keys * FIELDS);
    if (m->from == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    const uint8_t *rows = m->tables.buf;
    for (Py_ssize_t e = 0; e < m->events; e++)
        for (Py_ssize_t k = 0; k < m->keys; k++)
            for (int f = 0; f < FIELDS; f++) {
                int code = rows[(e * 5 + 1 + f) * m->keys + k], mine = -1;
                for (int c = 0; c < SOURCES; c++)
                    if (m->src[c] == code) mine = c;
                if (mine < 0) {
                    PyErr_Format(PyExc_ValueError, "source code %d of event %zd, key %zd: not one of the sources",
                                 code, e, k);
                    return -1;
                }
                m->from[(e * m->keys + k) * FIELDS + f] = (uint8_t)mine;
            }
    return 0;
}

enum { KEEP, ACTOR, TARGET, EPOCH, CLEAR, INC, DEC }; /* the kernel's own numbering of `sources` */

/* One field's next value by its source (the kernel's numbering). */
static inline int64_t value_of(int code, int64_t old, int64_t me, int64_t target, int64_t epoch, int64_t clear) {
    switch (code) {
    case ACTOR: return me;
    case TARGET: return target;
    case EPOCH: return epoch;
    case CLEAR: return clear;
    case INC: return old + 1;
    case DEC: return old - 1;
    default: return old;
    }
}


/* The key of slot s in state b, moved by actor me, as `transition.look_up` computes it: only the
 * relation bits in `probe` are read. */
#define KEY_OF(s, b, me, probe)                                                                                      \
    ({                                                                                                             \
        long key_ = (long)(b) * K_BITS;                                                                            \
        long p_ = (probe);                                                                                         \
        if (p_) {                                                                                                  \
            if ((p_ & K_OWN) && (me) != K_NOBODY && owner[s] == (me)) key_ += K_OWN;                               \
            if ((p_ & K_BOR) && (me) != K_NOBODY && borrower[s] == (me)) key_ += K_BOR;                            \
            if ((p_ & K_DUE) && (int64_t)fence[s] <= (me)) key_ += K_DUE;                                          \
            if (p_ & (K_IDLE | K_FULL)) {                                                                          \
                long c_ = readers[s];                                                                              \
                if (c_ == 0) key_ += K_IDLE;                                                                       \
                if (c_ >= K_MAX_READERS) key_ += K_FULL;                                                           \
            }                                                                                                      \
        }                                                                                                          \
        key_;                                                                                                      \
    })


typedef struct {
    int64_t lo[RUNS_MAX], hi[RUNS_MAX]; /* run r is slots lo[r] .. hi[r] - 1 */
    int count;                          /* RUNS_MAX + 1: more runs than that */
} Runs;

/* The runs of `ids` (n >= 1). With at most RUNS_MAX runs, each checked against the capacity
 * (-1 if all are real, else the first position naming no slot) and against the others (two
 * runs that overlap name a slot twice: then `runs->count` is RUNS_MAX + 1, as it is for more
 * runs, and the slot-at-a-time loop checks the ids one by one). */
static Py_ssize_t runs_of(const int64_t *restrict ids, Py_ssize_t n, uint64_t cap, Runs *runs) {
    Py_ssize_t breaks = 0;
    uint64_t differ = 0; /* one run (the usual batch): an OR of differences, which the compiler vectorises */
    for (Py_ssize_t i = 1; i < n; i++) differ |= (uint64_t)(ids[i] ^ (ids[i - 1] + 1));
    if (differ)
        for (Py_ssize_t i = 1; i < n; i++) breaks += ids[i] != ids[i - 1] + 1;
    runs->count = RUNS_MAX + 1;
    if (breaks >= RUNS_MAX) return -1;
    int r = 0;
    runs->lo[0] = ids[0];
    for (Py_ssize_t at = 1; breaks && at < n; at += 16) { /* where the breaks are: 16 ids at a time */
        const Py_ssize_t end = at + 16 < n ? at + 16 : n;
        int64_t differ = 0;
        for (Py_ssize_t i = at; i < end; i++) differ |= ids[i] ^ (ids[i - 1] + 1);
        if (!differ) continue;
        for (Py_ssize_t i = at; i < end; i++)
            if (ids[i] != ids[i - 1] + 1) {
                runs->hi[r++] = ids[i - 1] + 1;
                runs->lo[r] = ids[i];
                breaks--;
            }
    }
    runs->hi[r++] = ids[n - 1] + 1;
    for (int a = 0; a < r; a++)
        if ((uint64_t)(runs->lo[a] - 1) >= cap || (uint64_t)(runs->hi[a] - 2) >= cap) {
            for (Py_ssize_t i = 0; i < n; i++)
                if ((uint64_t)(ids[i] - 1) >= cap) return i;
        }
    for (int a = 0; a < r; a++) /* distinct runs: no slot named twice */
        for (int b = a + 1; b < r; b++)
            if (runs->lo[a] < runs->hi[b] && runs->lo[b] < runs->hi[a]) return -1;
    runs->count = r;
    return -1;
}

/* The one key of a batch in runs moved by one actor `me`, every slot in state b0, or -1 when
 * the slots differ in state or relation (the slot-at-a-time loop then looks each one up). */
static long run_key(Mover *m, const Runs *runs, Py_ssize_t n, long b0, int64_t me, long probe) {
    const uint8_t *restrict state = m->state, *restrict readers = m->readers;
    const int64_t *restrict owner = m->owner, *restrict borrower = m->borrower;
    const int32_t *restrict fence = m->fence;
    const Py_ssize_t step = m->state_step;
    Py_ssize_t own = 0, bor = 0, due = 0, idle = 0, full = 0;
    for (int r = 0; r < runs->count; r++) {
        const int64_t lo = runs->lo[r], hi = runs->hi[r];
        unsigned differ = 0;
        if (m->word) { /* the state is one byte of each 16-bit word: compare the words, masked */
            const uint16_t *restrict word = (const uint16_t *)m->state;
            uint16_t mask, want;
            const uint8_t ones[2] = {0xFF, 0}, wanted[2] = {(uint8_t)b0, 0};
            memcpy(&mask, ones, 2);
            memcpy(&want, wanted, 2);
            for (int64_t s = lo; s < hi; s++) differ |= (unsigned)((word[s] & mask) ^ want);
        } else {
            for (int64_t s = lo; s < hi; s++) differ |= state[s * step] ^ (uint8_t)b0;
        }
        if (differ) return -1;
        if (probe & K_OWN && me != K_NOBODY)
            for (int64_t s = lo; s < hi; s++) own += owner[s] == me;
        if (probe & K_BOR && me != K_NOBODY)
            for (int64_t s = lo; s < hi; s++) bor += borrower[s] == me;
        if (probe & K_DUE)
            for (int64_t s = lo; s < hi; s++) due += (int64_t)fence[s] <= me;
        if (probe & (K_IDLE | K_FULL))
            for (int64_t s = lo; s < hi; s++) {
                idle += readers[s] == 0;
                full += readers[s] >= K_MAX_READERS;
            }
    }
    if ((own && own != n) || (bor && bor != n) || (due && due != n) || (idle && idle != n) || (full && full != n))
        return -1;
    return b0 * K_BITS + (own ? K_OWN : 0) + (bor ? K_BOR : 0) + (due ? K_DUE : 0) + (idle ? K_IDLE : 0) +
           (full ? K_FULL : 0);
}

/* The one key of a batch of scattered slots moved by one actor `me`, or -1 when a slot is not
 * real, or the slots differ in state or relation (the slot-at-a-time loop then finds which). One
 * pass per column it reads, none with a branch per slot: a gather each, no chain of loads. */
static long scatter_key(Mover *m, const int64_t *restrict ids, Py_ssize_t n, int64_t me, const uint8_t *probe,
                        long *b_out) {
    const uint64_t cap = (uint64_t)m->capacity;
    unsigned bad = 0;
    for (Py_ssize_t i = 0; i < n; i++) bad |= (uint64_t)(ids[i] - 1) >= cap;
    if (bad) return -1;
    const uint8_t *restrict state = m->state, *restrict readers = m->readers;
    const int64_t *restrict owner = m->owner, *restrict borrower = m->borrower;
    const int32_t *restrict fence = m->fence;
    const Py_ssize_t step = m->state_step;
    const long b0 = state[ids[0] * step];
    unsigned differ = 0;
    for (Py_ssize_t i = 0; i < n; i++) differ |= state[ids[i] * step] ^ (uint8_t)b0;
    if (differ || b0 >= m->states) return -1;
    const long p = probe[b0];
    Py_ssize_t own = 0, bor = 0, due = 0, idle = 0, full = 0;
    if (p & K_OWN && me != K_NOBODY)
        for (Py_ssize_t i = 0; i < n; i++) own += owner[ids[i]] == me;
    if (p & K_BOR && me != K_NOBODY)
        for (Py_ssize_t i = 0; i < n; i++) bor += borrower[ids[i]] == me;
    if (p & K_DUE)
        for (Py_ssize_t i = 0; i < n; i++) due += (int64_t)fence[ids[i]] <= me;
    if (p & (K_IDLE | K_FULL))
        for (Py_ssize_t i = 0; i < n; i++) {
            idle += readers[ids[i]] == 0;
            full += readers[ids[i]] >= K_MAX_READERS;
        }
    if ((own && own != n) || (bor && bor != n) || (due && due != n) || (idle && idle != n) || (full && full != n))
        return -1;
    *b_out = b0;
    return b0 * K_BITS + (own ? K_OWN : 0) + (bor ? K_BOR : 0) + (due ? K_DUE : 0) + (idle ? K_IDLE : 0) +
           (full ? K_FULL : 0);
}

/* Whether `ids` (real slots) name a slot twice: a fresh mark of this call's own in the scratch column. */
static int named_twice(Mover *m, const int64_t *restrict ids, Py_ssize_t n) {
    int32_t *restrict stamp = m->stamp;
    if (m->mark <= INT32_MIN + 1) { /* the marks are used up: clear the column, start again */
        for (Py_ssize_t s = 0; s <= m->capacity; s++) stamp[s] = -1;
        m->mark = -1;
    }
    const int32_t mark = --m->mark; /* below -1: marks the other path never writes */
    unsigned twice = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        twice |= stamp[ids[i]] == mark;
        stamp[ids[i]] = mark;
    }
    return twice != 0;
}

/* Write a batch in runs, every slot by one key: each field its one source, a run at a time. */
static void run_write(Mover *m, const Runs *runs, const uint8_t *f, uint8_t a, uint8_t e, int64_t me, int64_t target,
                      int64_t epoch) {
    for (int k = 0; k < FIELDS; k++) {
        int code = f[k];
        if (code == KEEP) continue;
        const int64_t v = value_of(code, 0, me, target, epoch, k < 2 ? K_NOBODY : 0);
        const int step = code == INC ? 1 : code == DEC ? -1 : 0;
        for (int r = 0; r < runs->count; r++) {
            const int64_t lo = runs->lo[r], hi = runs->hi[r];
            switch (k) {
            case 0:
                for (int64_t s = lo; s < hi; s++) m->owner[s] = step ? m->owner[s] + step : v;
                break;
            case 1:
                for (int64_t s = lo; s < hi; s++) m->borrower[s] = step ? m->borrower[s] + step : v;
                break;
            case 2:
                for (int64_t s = lo; s < hi; s++) m->fence[s] = (int32_t)(step ? m->fence[s] + step : v);
                break;
            default:
                for (int64_t s = lo; s < hi; s++) m->readers[s] = (uint8_t)(step ? m->readers[s] + step : v);
            }
        }
    }
    for (int r = 0; r < runs->count; r++) {
        const int64_t lo = runs->lo[r], hi = runs->hi[r];
        if (m->word) { /* the state and the last event: one 16-bit word */
            uint16_t *restrict word = (uint16_t *)m->state;
            const uint8_t pair[2] = {a, e}; /* as they lie in memory: the state, then the last event */
            uint16_t w;
            memcpy(&w, pair, 2);
            for (int64_t s = lo; s < hi; s++) word[s] = w;
        } else {
            for (int64_t s = lo; s < hi; s++) {
                m->state[s * m->state_step] = a;
                m->last[s * m->last_step] = e;
            }
        }
    }
}

/* Whether `view` is a buffer of int64 in the host's byte order (a signed 8-byte integer format). */
int is_int64(const Py_buffer *view) {
    const char *f = view->format ? view->format : "B";
    const int native = PY_LITTLE_ENDIAN ? *f == '<' : (*f == '>' || *f == '!');
    if (*f == '@' || *f == '=' || native) /* the host's byte order: an id reads as it is */
        f++;
    else if (*f == '<' || *f == '>' || *f == '!') /* swapped bytes: not ids as they are */
        return 0;
    return view->itemsize == 8 && (strcmp(f, "q") == 0 || strcmp(f, "l") == 0);
}

/* Whether `len` bytes at `p` overlap any of the columns the kernel writes. */
int overlaps_columns(const Mover *m, const void *p, Py_ssize_t len) {
    const char *a = p, *b = (const char *)p + len;
    for (int i = 0; i < 7; i++) {
        const char *lo = m->cols[i].buf, *hi = lo + m->cols[i].len;
        if (m->cols[i].strides && m->cols[i].ndim == 1 && m->cols[i].strides[0] > m->cols[i].itemsize)
            hi = lo + m->cols[i].shape[0] * m->cols[i].strides[0]; /* a strided column spans its steps */
        if (a < hi && lo < b) return 1;
    }
    return 0;
}

/* `*data` (n int64 values) copied to memory of the kernel's own when they lie in a column the
 * move writes (a view of the ledger's own owner column as ids, say): the loops must not read ids
 * or actor ids that their own writes change. Returns the copy to free (NULL: none), or sets
 * `*failed`. */
static int64_t *own_copy(const Mover *m, const int64_t **data, Py_ssize_t n, int *failed) {
    if (!overlaps_columns(m, *data, n * 8)) return NULL;
    int64_t *copy = PyMem_Malloc(n * 8);
    if (copy == NULL) {
        PyErr_NoMemory();
        *failed = 1;
        return NULL;
    }
    memcpy(copy, *data, n * 8);
    *data = copy;
    return copy;
}

/* The caller's give(given), between the checks and the write: -1 if it raised (nothing written). */
static int call_give(PyObject *give, PyObject *given) {
    PyObject *r = PyObject_CallOneArg(give, given);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* Write a batch of slots by one key (`f` its sources) and one actor: one loop per field the key
 * rewrites, then the state and the last event. */
static void one_key_write(Mover *m, const int64_t *restrict ids, Py_ssize_t n, const uint8_t *f, uint8_t a,
                          uint8_t e, int64_t me, int64_t target, int64_t epoch) {
    uint8_t *restrict state = m->state, *restrict last = m->last, *restrict readers = m->readers;
    int64_t *restrict owner = m->owner, *restrict borrower = m->borrower;
    int32_t *restrict fence = m->fence;
    Py_ssize_t i;
    for (int k = 0; k < FIELDS; k++) {
        const int code = f[k];
        if (code == KEEP) continue;
        const int64_t v = value_of(code, 0, me, target, epoch, k < 2 ? K_NOBODY : 0);
        const int step = code == INC ? 1 : code == DEC ? -1 : 0;
        switch (k) {
        case 0:
            if (step) for (i = 0; i < n; i++) owner[ids[i]] += step;
            else for (i = 0; i < n; i++) owner[ids[i]] = v;
            break;
        case 1:
            if (step) for (i = 0; i < n; i++) borrower[ids[i]] += step;
            else for (i = 0; i < n; i++) borrower[ids[i]] = v;
            break;
        case 2:
            if (step) for (i = 0; i < n; i++) fence[ids[i]] += step;
            else for (i = 0; i < n; i++) fence[ids[i]] = (int32_t)v;
            break;
        default:
            if (step) for (i = 0; i < n; i++) readers[ids[i]] += step;
            else for (i = 0; i < n; i++) readers[ids[i]] = (uint8_t)v;
        }
    }
    if (m->word) { /* the state and the last event: one 16-bit word */
        uint16_t *restrict word = (uint16_t *)state;
        const uint8_t pair[2] = {a, e}; /* as they lie in memory */
        uint16_t w;
        memcpy(&w, pair, 2);
        for (i = 0; i < n; i++) word[ids[i]] = w;
    } else {
        const Py_ssize_t sstep = m->state_step, lstep = m->last_step;
        for (i = 0; i < n; i++) {
            state[ids[i] * sstep] = a;
            last[ids[i] * lstep] = e;
        }
    }
}

/* The move of the module's contract on ids and actor ids already read (`ids_in`: n ids; `actors_in`:
 * NULL for `one_actor`, or n actor ids; `before_in`, `after_in`, `keys_in`: NULL, or n entries): the
 * outcome code; -1 with `*failed` set when a Python error is raised (`give` raised, or no memory). */
long move_ids(Mover *m, long event, const int64_t *ids_in, Py_ssize_t n, int64_t one_actor,
              const int64_t *actors_in, int64_t target, int64_t epoch, uint8_t *before_in, uint8_t *after_in,
              int64_t *keys_in, int write, int dup, PyObject *give, PyObject *given, long when, int *failed) {
    /* everything the loops read, in locals: the compiler keeps them in registers (a byte
     * written through a uint8_t pointer may alias anything, so fields of `m` would be
     * read again after every write) */
    const int64_t *ids_at = ids_in, *actors_at = actors_in;
    long code = -1;
    m->run_lo = m->run_hi = 0; /* the batch's one run, once its runs are known (below) */
    int64_t *ids_copy = own_copy(m, &ids_at, n, failed);
    int64_t *actors_copy = actors_at && !*failed ? own_copy(m, &actors_at, n, failed) : NULL;
    if (*failed) {
        PyMem_Free(ids_copy);
        return -1;
    }
    const int64_t *restrict ids = ids_at;
    const int64_t *restrict actors = actors_at;
    uint8_t *restrict before = before_in;
    uint8_t *restrict after = after_in;
    int64_t *restrict keys = keys_in;
    uint8_t *restrict state = m->state, *restrict last = m->last, *restrict readers = m->readers;
    int64_t *restrict owner = m->owner, *restrict borrower = m->borrower;
    int32_t *restrict fence = m->fence, *restrict stamp = m->stamp;
    const Py_ssize_t sstep = m->state_step, lstep = m->last_step;
    const Py_ssize_t nkeys = m->keys, nstates = m->states;
    const uint8_t *next = (const uint8_t *)m->tables.buf + event * 5 * nkeys;
    const uint8_t *from = m->from + event * FIELDS * nkeys; /* the kernel's source codes */
    const uint8_t *probe = (const uint8_t *)m->probes.buf + event * nstates;
    long refused = -1;
    Py_ssize_t i;
    /* 1. the runs the ids make (and, if they are few, whether they name real slots) */
    Runs runs;
    Py_ssize_t bad = runs_of(ids, n, (uint64_t)m->capacity, &runs);
    if (bad >= 0) {
        code = -1 - 4 * bad;
        goto done_copies;
    }
    if (runs.count == 1) { /* ids[i] == ids[0] + i: the caller may keep the batch as its slice */
        m->run_lo = runs.lo[0];
        m->run_hi = runs.hi[0];
    }
    /* 2a. a batch in a few runs, by one actor, every slot in one state and relation: one key */
    const int by_runs = runs.count <= RUNS_MAX && runs.count <= m->runs && !actors;
    const long b0 = by_runs ? state[ids[0] * sstep] : -1; /* read once its runs showed ids[0] is a slot */
    if (by_runs && b0 < nstates) {
        long key = run_key(m, &runs, n, b0, one_actor, probe[b0]);
        long a = key < 0 ? K_ILLEGAL : next[key];
        if (a != K_ILLEGAL) {
            if (before) {
                memset(before, (int)b0, n);
                memset(after, (int)a, n);
            }
            if (keys)
                for (i = 0; i < n; i++) keys[i] = key;
            if (write && give && a == when && call_give(give, given) < 0) {
                *failed = 1;
                goto done_copies;
            }
            if (write)
                run_write(m, &runs, from + key * FIELDS, (uint8_t)a, (uint8_t)event, one_actor, target, epoch);
            code = a | b0 << 8;
            goto done_copies;
        }
    }
    /* 2b. scattered slots by one actor, every slot in one state and relation: one key, found a
     * column at a time (the slot-at-a-time loop below finds the first refused slot otherwise) */
    if (!by_runs && !actors && !keys && m->gather) {
        long b_one = -1;
        long key = scatter_key(m, ids, n, one_actor, probe, &b_one);
        long a = key < 0 ? K_ILLEGAL : next[key];
        if (a != K_ILLEGAL && !(dup && named_twice(m, ids, n))) {
            if (before) {
                memset(before, (int)b_one, n);
                memset(after, (int)a, n);
            }
            if (write && give && a == when && call_give(give, given) < 0) {
                *failed = 1;
                goto done_copies;
            }
            if (write) one_key_write(m, ids, n, from + key * FIELDS, (uint8_t)a, (uint8_t)event, one_actor, target, epoch);
            code = a | b_one << 8;
            goto done_copies;
        }
    }
    /* 2c. any other batch: a slot at a time (a real slot, named once: a mark of this call's
     * own in the scratch column, unless its runs showed it already) */
    dup = dup && runs.count > RUNS_MAX;
    int32_t mark = 0;
    if (dup) {
        if (m->mark <= INT32_MIN + 1) { /* the marks are used up: clear the column, start again */
            for (Py_ssize_t s = 0; s <= m->capacity; s++) stamp[s] = -1;
            m->mark = -1;
        }
        mark = --m->mark; /* below -1: marks the other path never writes */
    }
    long first = -1, b_first = -1;
    int uniform = 1, one_key = 1;
    long key0 = -1;
    const uint64_t cap = (uint64_t)m->capacity;
    if (!actors && !before && !keys) { /* the usual batch: one actor, nothing per slot to hand back */
        const int64_t me = one_actor;
        for (i = 0; i < n; i++) {
            const int64_t s = ids[i];
            if ((uint64_t)(s - 1) >= cap) {
                refused = 4 * i + 0;
                break;
            }
            if (dup) {
                if (stamp[s] == mark) {
                    refused = 4 * i + 1;
                    break;
                }
                stamp[s] = mark;
            }
            const long b = state[s * sstep];
            if (b >= nstates) {
                refused = 4 * i + 3;
                break;
            }
            const long key = KEY_OF(s, b, me, probe[b]);
            const long a = next[key];
            if (a == K_ILLEGAL) {
                refused = 4 * i + 2;
                break;
            }
            if (key != key0) { /* the first slot (key0 is -1 before it), or a second key */
                if (i == 0) {
                    first = a;
                    b_first = b;
                    key0 = key;
                } else {
                    one_key = 0;
                    if (a != first || b != b_first) uniform = 0;
                }
            }
        }
    } else
    for (i = 0; i < n; i++) {
        int64_t s = ids[i];
        if ((uint64_t)(s - 1) >= cap) {
            refused = 4 * i + 0;
            break;
        }
        if (dup) {
            if (stamp[s] == mark) {
                refused = 4 * i + 1;
                break;
            }
            stamp[s] = mark;
        }
        long b = state[s * sstep];
        if (b >= nstates) {
            refused = 4 * i + 3;
            break;
        }
        int64_t me = actors ? actors[i] : one_actor;
        long key = KEY_OF(s, b, me, probe[b]);
        long a = next[key];
        if (a == K_ILLEGAL) {
            refused = 4 * i + 2;
            break;
        }
        if (before) {
            before[i] = (uint8_t)b;
            after[i] = (uint8_t)a;
        }
        if (keys) keys[i] = key;
        if (i == 0) {
            first = a;
            b_first = b;
            key0 = key;
        } else if (key != key0) {
            one_key = 0;
            if (a != first || b != b_first) uniform = 0;
        }
    }
    if (refused >= 0) {
        code = -1 - refused;
        goto done_copies;
    }
    if (!uniform && (!before || (write && give))) { /* the caller must see each slot's states: it asks again */
        code = ASK_WITH_STATES;
        goto done_copies;
    }
    if (write && give && first == when && call_give(give, given) < 0) {
        *failed = 1;
        goto done_copies;
    }
    /* 3. the writes: every field the key's sources rewrite, the state and the last event; with one
     * key and one actor (the usual batch), one loop per field the key rewrites, all alike */
    if (write && one_key && !actors) {
        one_key_write(m, ids, n, from + key0 * FIELDS, (uint8_t)first, (uint8_t)event, one_actor, target, epoch);
    } else if (write) {
        for (i = 0; i < n; i++) {
            int64_t s = ids[i];
            int64_t me = actors ? actors[i] : one_actor;
            long b = before ? before[i] : state[s * sstep], a = after ? after[i] : first;
            long key = one_key ? key0 : keys ? (long)keys[i] : KEY_OF(s, b, me, probe[b]);
            const uint8_t *f = from + key * FIELDS;
            if (f[0] != KEEP) owner[s] = value_of(f[0], owner[s], me, target, epoch, K_NOBODY);
            if (f[1] != KEEP) borrower[s] = value_of(f[1], borrower[s], me, target, epoch, K_NOBODY);
            if (f[2] != KEEP) fence[s] = (int32_t)value_of(f[2], fence[s], me, target, epoch, 0);
            if (f[3] != KEEP) readers[s] = (uint8_t)value_of(f[3], readers[s], me, target, epoch, 0);
            state[s * sstep] = (uint8_t)a;
            last[s * lstep] = (uint8_t)event;
        }
    }
    code = uniform ? first | b_first << 8 : MIXED;
done_copies:
    PyMem_Free(ids_copy);
    PyMem_Free(actors_copy);
    return code;
}

static PyObject *mover_move(Mover *m, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10 && nargs != 13) {
        PyErr_SetString(PyExc_TypeError,
                        "move(event, ids, actor, target, epoch, before, after, keys, write, dup[, give, given, when])");
        return NULL;
    }
    /* give(given) once every check has passed and before the write, when the slots move to state `when` */
    PyObject *give = nargs == 13 && args[10] != Py_None ? args[10] : NULL, *given = nargs == 13 ? args[11] : NULL;
    long when = nargs == 13 ? PyLong_AsLong(args[12]) : -1;
    long event = PyLong_AsLong(args[0]);
    int64_t target = PyLong_AsLongLong(args[3]), epoch = PyLong_AsLongLong(args[4]);
    int write = PyObject_IsTrue(args[8]), dup = PyObject_IsTrue(args[9]);
    if (PyErr_Occurred()) return NULL;
    if (event < 0 || event >= m->events) {
        PyErr_Format(PyExc_ValueError, "event %ld: not one of the %zd compiled", event, m->events);
        return NULL;
    }
    if (epoch < INT32_MIN || epoch > INT32_MAX) { /* the fence column holds int32 steps */
        PyErr_Format(PyExc_OverflowError, "step %lld does not fit the fence column (int32)", (long long)epoch);
        return NULL;
    }
    Py_buffer ids_view, actor_view, before_view, after_view, keys_view;
    int have_actors = 0, have_keys = 0, have_ids = 0;
    int64_t one_actor = 0, one_id = 0;
    const int64_t *ids_in = &one_id;
    PyObject *result = NULL;
    Py_ssize_t n = 1;
    if (PyLong_CheckExact(args[1])) { /* one slot, named by an int */
        int overflow = 0;
        one_id = PyLong_AsLongLongAndOverflow(args[1], &overflow);
        if (one_id == -1 && PyErr_Occurred()) return NULL;
        if (overflow) return PyLong_FromLong(-1 - 0); /* past int64: not a slot of the pool, at position 0 */
    } else {
        if (PyObject_GetBuffer(args[1], &ids_view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
        have_ids = 1;
        n = ids_view.len / 8;
        /* an int64 array, or the bytes of one (the copy `read` makes) */
        int raw = PyBytes_CheckExact(args[1]) && ids_view.len % 8 == 0;
        if ((!raw && !is_int64(&ids_view)) || n < 1) {
            PyErr_SetString(PyExc_ValueError, "ids: a C-contiguous int64 array (or its bytes) of at least one id");
            goto done_ids;
        }
        ids_in = ids_view.buf;
    }
    if (PyLong_Check(args[2])) {
        one_actor = PyLong_AsLongLong(args[2]);
        if (PyErr_Occurred()) goto done_ids;
    } else {
        if (PyObject_GetBuffer(args[2], &actor_view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done_ids;
        have_actors = 1;
        if (!is_int64(&actor_view) || actor_view.len != n * 8) {
            PyErr_SetString(PyExc_ValueError, "actor: an id, or an int64 array of one id per slot");
            goto done_actor;
        }
    }
    int have_states = args[5] != Py_None;
    if (have_states != (args[6] != Py_None)) {
        PyErr_SetString(PyExc_ValueError, "before, after: both None, or both uint8 arrays of one byte per slot");
        goto done_actor;
    }
    if (!have_states) goto states_done;
    if (PyObject_GetBuffer(args[5], &before_view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto done_actor;
    if (PyObject_GetBuffer(args[6], &after_view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto done_before;
    if (before_view.len != n || after_view.len != n) {
        PyErr_SetString(PyExc_ValueError, "before, after: uint8 arrays of one byte per slot");
        goto done_after;
    }
states_done:
    if (args[7] != Py_None) {
        if (PyObject_GetBuffer(args[7], &keys_view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto done_after;
        have_keys = 1;
        if (keys_view.len != n * 8) {
            PyErr_SetString(PyExc_ValueError, "keys: an int64 array of one key per slot");
            goto done_keys;
        }
    }
    {
        int failed = 0;
        long code = move_ids(m, event, ids_in, n, one_actor, have_actors ? actor_view.buf : NULL, target, epoch,
                             have_states ? before_view.buf : NULL, have_states ? after_view.buf : NULL,
                             have_keys ? keys_view.buf : NULL, write, dup, give, given, when, &failed);
        if (!failed) result = PyLong_FromLong(code);
    }
done_keys:
    if (have_keys) PyBuffer_Release(&keys_view);
done_after:
    if (have_states) PyBuffer_Release(&after_view);
done_before:
    if (have_states) PyBuffer_Release(&before_view);
done_actor:
    if (have_actors) PyBuffer_Release(&actor_view);
done_ids:
    if (have_ids) PyBuffer_Release(&ids_view);
    return result;
}

/* read(address, n) -> bytes: a copy of the n int64 values at `address`. The caller vouches for
 * the memory: a CPU tensor's data (`data_ptr()`) of at least n contiguous int64 values, which it
 * holds alive for the call. The ledger's guard reads an engine's index tensor with it (the copy
 * is what the ledger checks, writes and records: later writes into the tensor change nothing). */
static PyObject *mover_read(Mover *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "read(address, n)");
        return NULL;
    }
    void *at = PyLong_AsVoidPtr(args[0]);
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (n < 0 || n > PY_SSIZE_T_MAX / 8 || (at == NULL && n > 0)) {
        PyErr_SetString(PyExc_ValueError, "read: a non-null address and a count of int64 values");
        return NULL;
    }
    return PyBytes_FromStringAndSize(at, n * 8);
}

static PyMethodDef mover_methods[] = {
    {"move", (PyCFunction)(void (*)(void))mover_move, METH_FASTCALL,
     "move(event, ids, actor, target, epoch, before, after, keys, write, dup) -> int: see the module's contract"},
    {"read", (PyCFunction)(void (*)(void))mover_read, METH_FASTCALL,
     "read(address, n) -> bytes: a copy of the n int64 values at address (a CPU tensor's data_ptr())"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef mover_members[] = {
    {"runs", T_INT, offsetof(Mover, runs), 0,
     "the most runs of consecutive slots a batch may make to be moved a run at a time (0 to 16; 0: never)"},
    {"gather", T_INT, offsetof(Mover, gather), 0,
     "whether a batch of scattered slots moved by one actor is checked a column at a time (1, the default) or a slot "
     "at a time (0); both give the same results"},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *mark_get(Mover *m, void *Py_UNUSED(closure)) { return PyLong_FromLong(m->mark); }

/* Marks only move on (down): a mark set back up could meet a mark an earlier check left. */
static int mark_set(Mover *m, PyObject *value, void *Py_UNUSED(closure)) {
    long v = value ? PyLong_AsLong(value) : 0;
    if (value == NULL || (v == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "mark: an int");
        return -1;
    }
    if (v > m->mark || v < (long)INT32_MIN + 1) {
        PyErr_Format(PyExc_ValueError, "mark: from %d down to %ld (INT32_MIN + 1), not %ld", m->mark,
                     (long)INT32_MIN + 1, v);
        return -1;
    }
    m->mark = (int32_t)v;
    return 0;
}

/* The slice of slots the last `move` named, when its ids were one run in increasing order (else None). */
static PyObject *last_run_get(Mover *m, void *Py_UNUSED(closure)) {
    if (m->run_hi <= m->run_lo) Py_RETURN_NONE;
    PyObject *lo = PyLong_FromLongLong(m->run_lo), *hi = lo ? PyLong_FromLongLong(m->run_hi) : NULL;
    PyObject *run = hi ? PySlice_New(lo, hi, NULL) : NULL;
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    return run;
}

static PyGetSetDef mover_getset[] = {
    {"last_run", (getter)last_run_get, NULL,
     "slice(first, end) when the last move's ids were exactly first, first + 1, ..., end - 1 (else None)", NULL},
    {"mark", (getter)mark_get, (setter)mark_set,
     "the duplicate mark the last check used (marks count down from -2; at INT32_MIN + 1 the next check clears "
     "the scratch column and starts again); it may be set further down only",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject MoverType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "slotwarden.runtime.ledger._move.Mover",
    .tp_basicsize = sizeof(Mover),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A ledger's columns and compiled tables, moved a batch at a time (see the module's contract).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)mover_init,
    .tp_dealloc = (destructor)mover_dealloc,
    .tp_methods = mover_methods,
    .tp_members = mover_members,
    .tp_getset = mover_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_move", "The ledger's compiled move (see runtime/ledger/compiled.py).", -1,
    NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__move(void) {
    if (PyType_Ready(&MoverType) < 0 || lane_ready() < 0 || ledger_lane_ready() < 0) return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL) return NULL;
    Py_INCREF(&MoverType);
    if (PyModule_AddObject(mod, "Mover", (PyObject *)&MoverType) < 0) {
        Py_DECREF(&MoverType);
        Py_DECREF(mod);
        return NULL;
    }
    Py_INCREF(&LaneType);
    if (PyModule_AddObject(mod, "Lane", (PyObject *)&LaneType) < 0) {
        Py_DECREF(&LaneType);
        Py_DECREF(mod);
        return NULL;
    }
    Py_INCREF(&LedgerLaneType);
    if (PyModule_AddObject(mod, "LedgerLane", (PyObject *)&LedgerLaneType) < 0) {
        Py_DECREF(&LedgerLaneType);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
