/* The checker's canonical key in C (see key_compiled.py). `Key(...)` binds one workload's fixed
   facts (its requests and sessions, their classes, the slots, the cache flag, the cache-owned
   states, the node each slot names, the record fields read); `Key.key(world)` returns the bytes
   of `symmetry.Codec._layout(world, True)`: the slots renamed as `slot_order` renames them
   (holders described where like slots tie), the header, each class's session groups sorted,
   the plain requests sorted. It returns None for any world it cannot pack exactly so (anything
   `OutOfRange`, a value of an unexpected type): the caller then takes the Python path. Each new
   (state, fence, readers) code is recorded in the codec's `_slot_back` as the Python packer
   records it, for the decoder. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

enum { MAX_SLOTS = 8, MAX_STEPS = 8, MAX_IDS = 1024, MAX_TURNS = 16, MAX_ACTORS = 255 };
enum { DESC = 10 + 3 * MAX_TURNS, SIG = 6 + 2 * DESC }; /* a holder's description, a slot's */
#define NONE LONG_MIN                                       /* None, where an int may stand */

/* the fields read, per record, in key_compiled.READS's order */
enum { W_POOL, W_REQUESTS, W_SESSIONS, W_LAUNCHED, W_COMPLETED, W_STEPS, W_N };
enum { P_SLOTS, P_FREE, P_LOCKS, P_N };
enum { S_STATE, S_OWNER, S_BORROWER, S_FENCE, S_READERS, S_N };
enum { R_ID, R_SESSION, R_PHASE, R_HANDLE, R_LENT, R_RAN, R_SRC, R_N };
enum { E_ID, E_STATUS, E_HANDLE, E_TURN, E_TURNS, E_N };
enum { T_EPOCH, T_SLOTS, T_REQUESTS, T_COPIES, T_N };
enum { REC_WORLD, REC_POOL, REC_SLOT, REC_REQUEST, REC_SESSION, REC_STEP, REC_N };
static const int READ_COUNT[REC_N] = {W_N, P_N, S_N, R_N, E_N, T_N};

enum { NOONE = -1, NODE = 0, REQ = 1, SES = 2 }; /* who holds a slot: kind * 256 + index */

typedef struct { /* a request as read from a world */
    long phase, lent, ran, handle, src;
    uint8_t owns, borrows, locks, steps, copy[2];
} Req;

typedef struct { /* a session as read from a world */
    long status, handle, turn; /* turn: 0 none, else 1 + its position */
    uint8_t owns, borrows;
} Ses;

typedef struct { /* the rest of a world as read */
    long launched, completed, epoch[MAX_STEPS];
    long state[MAX_SLOTS + 1], fence[MAX_SLOTS + 1], readers[MAX_SLOTS + 1];
    int owner[MAX_SLOTS + 1], borrower[MAX_SLOTS + 1], place[MAX_SLOTS + 1], used[MAX_SLOTS + 1];
    int nfree, free[MAX_SLOTS], nsteps;
    uint8_t step_slots[MAX_STEPS];
    PyObject *slot[MAX_SLOTS + 1];
} Seen;

typedef struct {
    PyObject_HEAD
    int ready, n, cache, nreq, nses, nclasses, nplain, req_block, ses_block;
    Py_ssize_t size[REC_N];
    int at[REC_N][8];
    long nobody, node[MAX_SLOTS + 1];
    uint8_t cache_owned[256];
    short id_req[MAX_IDS], id_ses[MAX_IDS];
    long *req_id, *req_sid, *req_class, *ses_id; /* req_sid: NONE for a plain request */
    int *req_ses, *ses_nturns, *ses_turn;        /* ses_turn[j * MAX_TURNS + p]: turn p's index */
    int *class_start, *class_members, *plain;    /* class c: members class_start[c] .. [c + 1] */
    PyObject *state_type, *slot_back;
    uint8_t *seen[256]; /* per state: the (fence, readers) codes already recorded in slot_back */
    Req *req;
    Ses *ses;
    uint8_t *out, *blocks, *groups;
    int *order;
} Key;

/* -- reading values --------------------------------------------------------------------------- */
static int as_long(PyObject *o, long *v) {
    int over;
    *v = PyLong_AsLongAndOverflow(o, &over);
    if (over || (*v == -1 && PyErr_Occurred()) || *v == NONE) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}
static int exact_int(PyObject *o, long *v) { return PyLong_CheckExact(o) && as_long(o, v); }
static int some_int(PyObject *o, long *v) { return PyLong_Check(o) && as_long(o, v); } /* bools too */
static int small_ok(long v) { return -3 < v && v < 253; }                               /* packing.small */
static int epoch_ok(long v) { return -8 <= v && v < 248; }                              /* packing.epoch_byte */
static int small_int(PyObject *o, long *v) { return some_int(o, v) && small_ok(*v); }
static int slot_value(PyObject *o, long *v) { /* a handle or a source: None or a small int */
    if (o == Py_None) {
        *v = NONE;
        return 1;
    }
    return exact_int(o, v) && small_ok(*v);
}
static int id_of(const short *table, long id) { return 0 <= id && id < MAX_IDS ? table[id] : -1; }

static PyObject *get(Key *m, int rec, PyObject *o, int f) { return PyTuple_GET_ITEM(o, m->at[rec][f]); }
static int is_record(Key *m, int rec, PyObject *o) { return PyTuple_Check(o) && PyTuple_GET_SIZE(o) == m->size[rec]; }

static uint8_t slot_byte(const Key *m, long v, const int *new) { /* renamed, as one byte */
    if (v == NONE) return 0;
    if (1 <= v && v <= m->n) v = new[v];
    return (uint8_t)(v + 3);
}

static uint8_t renamed_mask(unsigned raw, const int *new) { /* bit i - 1 per old slot id i */
    unsigned out = 0;
    for (int i = 1; raw; i++, raw >>= 1)
        if (raw & 1) out |= 1u << (new[i] - 1);
    return (uint8_t)out;
}

/* -- the world, read and checked: 1 read, 0 not packed here, -1 an error ---------------------- */
static int read_holder(Key *m, PyObject *o, int *out) {
    long id;
    if (!exact_int(o, &id)) return 0;
    int r = id_of(m->id_req, id), j = id_of(m->id_ses, id);
    *out = id == m->nobody ? NOONE : r >= 0 ? REQ * 256 + r : j >= 0 ? SES * 256 + j : -2;
    return *out != -2;
}

static int read_pool(Key *m, PyObject *pool, Seen *s) {
    if (!is_record(m, REC_POOL, pool)) return 0;
    PyObject *slots = get(m, REC_POOL, pool, P_SLOTS), *free = get(m, REC_POOL, pool, P_FREE);
    PyObject *locks = get(m, REC_POOL, pool, P_LOCKS);
    if (!PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != m->n) return 0;
    for (int k = 1; k <= m->n; k++) {
        PyObject *rec = PyTuple_GET_ITEM(slots, k - 1);
        if (!is_record(m, REC_SLOT, rec)) return 0;
        PyObject *state = get(m, REC_SLOT, rec, S_STATE), *owner = get(m, REC_SLOT, rec, S_OWNER);
        if (Py_TYPE(state) != (PyTypeObject *)m->state_type || !some_int(state, &s->state[k])) return 0;
        if (s->state[k] < 0 || s->state[k] > 255) return 0;
        if (!exact_int(get(m, REC_SLOT, rec, S_FENCE), &s->fence[k]) || !small_ok(s->fence[k])) return 0;
        if (!exact_int(get(m, REC_SLOT, rec, S_READERS), &s->readers[k]) || !small_ok(s->readers[k])) return 0;
        if (m->cache_owned[s->state[k]]) { /* its owner is the node its slot names */
            long id;
            if (!exact_int(owner, &id) || id != m->node[k]) return 0;
            s->owner[k] = NODE * 256;
        } else if (!read_holder(m, owner, &s->owner[k])) {
            return 0;
        }
        if (!read_holder(m, get(m, REC_SLOT, rec, S_BORROWER), &s->borrower[k])) return 0;
        s->slot[k] = rec;
        s->place[k] = -1;
    }
    if (!PyTuple_Check(free) || PyTuple_GET_SIZE(free) > m->n) return 0;
    s->nfree = (int)PyTuple_GET_SIZE(free);
    for (int p = 0; p < s->nfree; p++) {
        long i;
        if (!exact_int(PyTuple_GET_ITEM(free, p), &i) || i < 1 || i > m->n || s->place[i] >= 0) return 0;
        s->free[p] = (int)i;
        s->place[i] = p;
    }
    if (!m->cache) return locks == Py_None;
    if (!PyTuple_Check(locks)) return 0;
    for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(locks); p++) {
        PyObject *pair = PyTuple_GET_ITEM(locks, p);
        long rid, i;
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) return 0;
        if (!exact_int(PyTuple_GET_ITEM(pair, 0), &rid) || !exact_int(PyTuple_GET_ITEM(pair, 1), &i)) return 0;
        int r = id_of(m->id_req, rid);
        if (r < 0 || i < 1 || i > m->n) return 0;
        m->req[r].locks |= (uint8_t)(1u << (i - 1));
    }
    return 1;
}

static int read_actors(Key *m, PyObject *requests, PyObject *sessions) {
    if (!PyTuple_Check(requests) || PyTuple_GET_SIZE(requests) != m->nreq) return 0;
    if (!PyTuple_Check(sessions) || PyTuple_GET_SIZE(sessions) != m->nses) return 0;
    for (int k = 0; k < m->nreq; k++) {
        PyObject *rec = PyTuple_GET_ITEM(requests, k), *sid;
        Req *r = &m->req[k];
        long id, ses;
        if (!is_record(m, REC_REQUEST, rec)) return 0;
        if (!exact_int(get(m, REC_REQUEST, rec, R_ID), &id) || id != m->req_id[k]) return 0;
        sid = get(m, REC_REQUEST, rec, R_SESSION);
        if (sid == Py_None ? m->req_sid[k] != NONE : !exact_int(sid, &ses) || ses != m->req_sid[k]) return 0;
        if (!small_int(get(m, REC_REQUEST, rec, R_PHASE), &r->phase)) return 0;
        if (!small_int(get(m, REC_REQUEST, rec, R_LENT), &r->lent)) return 0;
        if (!small_int(get(m, REC_REQUEST, rec, R_RAN), &r->ran)) return 0;
        if (!slot_value(get(m, REC_REQUEST, rec, R_HANDLE), &r->handle)) return 0;
        if (!slot_value(get(m, REC_REQUEST, rec, R_SRC), &r->src)) return 0;
    }
    for (int j = 0; j < m->nses; j++) {
        PyObject *rec = PyTuple_GET_ITEM(sessions, j), *turns, *turn;
        Ses *x = &m->ses[j];
        int nt = m->ses_nturns[j];
        long id, t;
        if (!is_record(m, REC_SESSION, rec)) return 0;
        if (!exact_int(get(m, REC_SESSION, rec, E_ID), &id) || id != m->ses_id[j]) return 0;
        turns = get(m, REC_SESSION, rec, E_TURNS);
        if (!PyTuple_Check(turns) || PyTuple_GET_SIZE(turns) != nt) return 0;
        for (int p = 0; p < nt; p++)
            if (!exact_int(PyTuple_GET_ITEM(turns, p), &t) || t != m->req_id[m->ses_turn[j * MAX_TURNS + p]]) return 0;
        if (!small_int(get(m, REC_SESSION, rec, E_STATUS), &x->status)) return 0;
        if (!slot_value(get(m, REC_SESSION, rec, E_HANDLE), &x->handle)) return 0;
        turn = get(m, REC_SESSION, rec, E_TURN);
        x->turn = 0;
        if (turn != Py_None) {
            if (!exact_int(turn, &t)) return 0;
            for (int p = nt - 1; p >= 0; p--)
                if (t == m->req_id[m->ses_turn[j * MAX_TURNS + p]]) x->turn = p + 1;
            if (!x->turn) return 0;
        }
    }
    return 1;
}

static int read_set(PyObject *set, int (*each)(Key *, Seen *, int, PyObject *), Key *m, Seen *s, int b) {
    if (!PyAnySet_Check(set)) return 0;
    if (PySet_GET_SIZE(set) == 0) return 1;
    PyObject *it = PyObject_GetIter(set), *item;
    if (it == NULL) return -1;
    int ok = 1;
    while (ok == 1 && (item = PyIter_Next(it)) != NULL) {
        ok = each(m, s, b, item);
        Py_DECREF(item);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : ok;
}

static int step_slot(Key *m, Seen *s, int b, PyObject *o) {
    long i;
    if (!exact_int(o, &i) || i < 1 || i > m->n) return 0;
    s->step_slots[b] |= (uint8_t)(1u << (i - 1));
    s->used[i] |= 1 << b;
    return 1;
}

static int step_request(Key *m, Seen *s, int b, PyObject *o) {
    long rid;
    int r;
    (void)s;
    if (!exact_int(o, &rid) || (r = id_of(m->id_req, rid)) < 0) return 0;
    m->req[r].steps |= (uint8_t)(1u << b);
    return 1;
}

static int step_copy(Key *m, Seen *s, int b, PyObject *o) {
    long rid, i;
    int r;
    (void)s;
    if (!m->cache || !PyTuple_CheckExact(o) || PyTuple_GET_SIZE(o) != 2) return 0;
    if (!exact_int(PyTuple_GET_ITEM(o, 0), &rid) || !exact_int(PyTuple_GET_ITEM(o, 1), &i)) return 0;
    if ((r = id_of(m->id_req, rid)) < 0 || m->req[r].copy[b] || i < 1 || i > m->n) return 0;
    m->req[r].copy[b] = (uint8_t)i; /* the old id: renamed when packed */
    return 1;
}

static int read_world(Key *m, PyObject *w, Seen *s) {
    if (!is_record(m, REC_WORLD, w)) return 0;
    memset(m->req, 0, sizeof(Req) * (size_t)m->nreq);
    memset(s->used, 0, sizeof s->used);
    memset(s->step_slots, 0, sizeof s->step_slots);
    if (!exact_int(get(m, REC_WORLD, w, W_LAUNCHED), &s->launched) || !epoch_ok(s->launched)) return 0;
    if (!exact_int(get(m, REC_WORLD, w, W_COMPLETED), &s->completed) || !epoch_ok(s->completed)) return 0;
    if (!read_pool(m, get(m, REC_WORLD, w, W_POOL), s)) return 0;
    if (!read_actors(m, get(m, REC_WORLD, w, W_REQUESTS), get(m, REC_WORLD, w, W_SESSIONS))) return 0;
    PyObject *steps = get(m, REC_WORLD, w, W_STEPS);
    if (!PyTuple_Check(steps) || PyTuple_GET_SIZE(steps) > (m->cache ? 2 : MAX_STEPS)) return 0;
    s->nsteps = (int)PyTuple_GET_SIZE(steps);
    for (int b = 0; b < s->nsteps; b++) {
        PyObject *st = PyTuple_GET_ITEM(steps, b);
        int ok;
        if (!is_record(m, REC_STEP, st)) return 0;
        if (!exact_int(get(m, REC_STEP, st, T_EPOCH), &s->epoch[b]) || !epoch_ok(s->epoch[b])) return 0;
        if ((ok = read_set(get(m, REC_STEP, st, T_SLOTS), step_slot, m, s, b)) != 1) return ok;
        if ((ok = read_set(get(m, REC_STEP, st, T_REQUESTS), step_request, m, s, b)) != 1) return ok;
        if ((ok = read_set(get(m, REC_STEP, st, T_COPIES), step_copy, m, s, b)) != 1) return ok;
    }
    return 1;
}

/* -- the slots' canonical order (slot_order.SlotOrder.slot_renaming) ------------------------ */
static void session_part(const Key *m, int j, long *d) { /* turns' count, status, turn, each turn */
    const Ses *x = &m->ses[j];
    d[0] = m->ses_nturns[j];
    d[1] = x->status;
    d[2] = x->turn;
    for (int p = 0; p < m->ses_nturns[j]; p++) {
        const Req *t = &m->req[m->ses_turn[j * MAX_TURNS + p]];
        d[3 + 3 * p] = t->phase;
        d[4 + 3 * p] = t->lent;
        d[5 + 3 * p] = t->ran;
    }
}

static void describe(const Key *m, int holder, int slot, long *d) { /* slot_order._holder, padded */
    memset(d, 0, sizeof(long) * DESC);
    if (holder == NOONE) {
        d[0] = -1;
    } else if (holder / 256 == REQ) {
        int k = holder % 256;
        const Req *r = &m->req[k];
        d[0] = 1, d[1] = m->req_class[k], d[2] = r->phase, d[3] = r->lent, d[4] = r->ran;
        d[5] = r->handle == slot, d[6] = r->src == NONE ? 0 : 1 + (r->src == slot);
        if (m->req_ses[k] >= 0) session_part(m, m->req_ses[k], d + 7);
    } else if (holder / 256 == SES) {
        int j = holder % 256;
        d[0] = 2, d[1] = m->ses[j].handle == slot;
        session_part(m, j, d + 2);
    }
}

static int before(const long *a, const long *b, int len) {
    for (int i = 0; i < len; i++)
        if (a[i] != b[i]) return a[i] < b[i];
    return 0;
}

static void slot_renaming(const Key *m, const Seen *s, int *new) {
    long sig[MAX_SLOTS][SIG], *rows[MAX_SLOTS];
    int n = m->n, tied = 0;
    for (int a = 1; a <= n && !tied; a++)
        for (int b = a + 1; b <= n && !tied; b++)
            if (s->state[a] == s->state[b] && s->fence[a] == s->fence[b] && s->readers[a] == s->readers[b] &&
                s->used[a] == s->used[b])
                tied = s->owner[a] != NOONE || s->borrower[a] != NOONE || s->owner[b] != NOONE ||
                       s->borrower[b] != NOONE;
    int len = tied ? SIG : 6;
    for (int k = 1; k <= n; k++) {
        long *row = rows[k - 1] = sig[k - 1];
        row[0] = s->state[k], row[1] = s->fence[k], row[2] = s->readers[k], row[3] = s->used[k];
        if (tied) {
            describe(m, s->owner[k], k, row + 4);
            describe(m, s->borrower[k], k, row + 4 + DESC);
        }
        row[len - 2] = s->place[k];
        row[len - 1] = k - 1;
    }
    for (int i = 1; i < n; i++) /* insertion sort: no two rows are equal (the last digit) */
        for (int j = i; j > 0 && before(rows[j], rows[j - 1], len); j--) {
            long *t = rows[j];
            rows[j] = rows[j - 1];
            rows[j - 1] = t;
        }
    new[0] = 0;
    for (int at = 0; at < n; at++) new[rows[at][len - 1] + 1] = at + 1;
}

/* -- packing (symmetry.Codec._parts and _layout) -------------------------------------------- */
static int record_slot(Key *m, const Seen *s, int k, uint8_t fence, uint8_t readers) {
    long state = s->state[k];
    if (m->seen[state] == NULL && (m->seen[state] = PyMem_Calloc(8192, 1)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    unsigned bit = (unsigned)fence << 8 | readers;
    if (m->seen[state][bit >> 3] >> (bit & 7) & 1) return 0;
    PyObject *rec = s->slot[k];
    PyObject *code = Py_BuildValue("(lii)", state, (int)fence, (int)readers);
    PyObject *value = code == NULL ? NULL
                                   : PyTuple_Pack(3, get(m, REC_SLOT, rec, S_STATE), get(m, REC_SLOT, rec, S_FENCE),
                                                  get(m, REC_SLOT, rec, S_READERS));
    int err = value == NULL || PyDict_SetItem(m->slot_back, code, value) < 0;
    Py_XDECREF(code);
    Py_XDECREF(value);
    if (err) return -1;
    m->seen[state][bit >> 3] |= (uint8_t)(1u << (bit & 7));
    return 0;
}

static uint8_t *pack_request(const Key *m, int k, const int *new, uint8_t *o) {
    const Req *r = &m->req[k];
    *o++ = (uint8_t)(r->phase + 3), *o++ = slot_byte(m, r->handle, new), *o++ = (uint8_t)(r->lent + 3);
    *o++ = (uint8_t)(r->ran + 3), *o++ = slot_byte(m, r->src, new), *o++ = r->owns, *o++ = r->borrows;
    if (m->cache) {
        *o++ = renamed_mask(r->locks, new);
        for (int b = 0; b < 2; b++) *o++ = r->copy[b] ? (uint8_t)new[r->copy[b]] : 0;
    }
    *o++ = r->steps;
    return o;
}

static uint8_t *pack_session(const Key *m, int j, const int *new, uint8_t *o) {
    const Ses *x = &m->ses[j];
    *o++ = (uint8_t)(x->status + 3), *o++ = slot_byte(m, x->handle, new), *o++ = (uint8_t)x->turn;
    *o++ = x->owns, *o++ = x->borrows;
    return o;
}

static void sort_blocks(uint8_t **blocks, int count, size_t size) {
    for (int i = 1; i < count; i++)
        for (int j = i; j > 0 && memcmp(blocks[j], blocks[j - 1], size) < 0; j--) {
            uint8_t *t = blocks[j];
            blocks[j] = blocks[j - 1];
            blocks[j - 1] = t;
        }
}

static PyObject *key_key(Key *m, PyObject *world) {
    Seen s;
    int new[MAX_SLOTS + 1], ok;
    if (!m->ready) return PyErr_Format(PyExc_RuntimeError, "a Key made without its workload");
    if ((ok = read_world(m, world, &s)) != 1) {
        if (ok < 0) return NULL;
        Py_RETURN_NONE;
    }
    slot_renaming(m, &s, new);
    for (int j = 0; j < m->nses; j++) m->ses[j].owns = m->ses[j].borrows = 0;
    uint8_t *o = m->out, *head = o + 3;
    *o++ = (uint8_t)(s.launched + 8), *o++ = (uint8_t)(s.completed + 8), *o++ = (uint8_t)s.nsteps;
    for (int k = 1; k <= m->n; k++) {
        int at = new[k] - 1, h;
        uint8_t fence = (uint8_t)(s.fence[k] + 3), readers = (uint8_t)(s.readers[k] + 3);
        head[3 * at] = (uint8_t)s.state[k], head[3 * at + 1] = fence, head[3 * at + 2] = readers;
        if (record_slot(m, &s, k, fence, readers) < 0) return NULL;
        if ((h = s.owner[k]) >= 0 && h / 256 != NODE) {
            if (h / 256 == REQ) m->req[h % 256].owns |= (uint8_t)(1u << at);
            else m->ses[h % 256].owns |= (uint8_t)(1u << at);
        }
        if ((h = s.borrower[k]) >= 0) {
            if (h / 256 == REQ) m->req[h % 256].borrows |= (uint8_t)(1u << at);
            else m->ses[h % 256].borrows |= (uint8_t)(1u << at);
        }
    }
    o = head + 3 * m->n;
    *o++ = (uint8_t)s.nfree;
    for (int p = 0; p < s.nfree; p++) *o++ = (uint8_t)new[s.free[p]];
    for (int b = 0; b < s.nsteps; b++) *o++ = (uint8_t)(s.epoch[b] + 8), *o++ = renamed_mask(s.step_slots[b], new);
    for (int k = 0; k < m->nreq; k++) pack_request(m, k, new, m->blocks + (size_t)k * m->req_block);
    uint8_t *sorted[MAX_ACTORS];
    for (int c = 0; c < m->nclasses; c++) {
        int first = m->class_start[c], count = m->class_start[c + 1] - first;
        int nt = m->ses_nturns[m->class_members[first]];
        size_t size = (size_t)m->ses_block + (size_t)nt * m->req_block;
        uint8_t *g = m->groups;
        for (int i = 0; i < count; i++) {
            int j = m->class_members[first + i];
            uint8_t *at = sorted[i] = g + (size_t)i * size, *end = pack_session(m, j, new, at);
            for (int p = 0; p < nt; p++)
                memcpy(end + (size_t)p * m->req_block, m->blocks + (size_t)m->ses_turn[j * MAX_TURNS + p] * m->req_block,
                       (size_t)m->req_block);
        }
        sort_blocks(sorted, count, size);
        for (int i = 0; i < count; i++) memcpy(o, sorted[i], size), o += size;
    }
    for (int i = 0; i < m->nplain; i++) sorted[i] = m->blocks + (size_t)m->plain[i] * m->req_block;
    sort_blocks(sorted, m->nplain, (size_t)m->req_block);
    for (int i = 0; i < m->nplain; i++) memcpy(o, sorted[i], (size_t)m->req_block), o += m->req_block;
    return PyBytes_FromStringAndSize((const char *)m->out, o - m->out);
}

/* -- the workload, bound once ------------------------------------------------------------------ */
static int bad(const char *what) {
    PyErr_Format(PyExc_ValueError, "Key: %s", what);
    return -1;
}

static int item_long(PyObject *seq, Py_ssize_t i, long *v) { /* seq[i] as an exact int */
    if (!PyTuple_Check(seq) || i >= PyTuple_GET_SIZE(seq) || !exact_int(PyTuple_GET_ITEM(seq, i), v)) return 0;
    return 1;
}

static int *int_array(PyObject *seq, Py_ssize_t *count, long bound) { /* a tuple of ints in 0 .. bound - 1 */
    if (!PyTuple_Check(seq)) return bad("not a tuple"), NULL;
    *count = PyTuple_GET_SIZE(seq);
    int *out = PyMem_Calloc((size_t)*count + 1, sizeof(int));
    if (out == NULL) return PyErr_NoMemory(), NULL;
    for (Py_ssize_t i = 0; i < *count; i++) {
        long v;
        if (!item_long(seq, i, &v) || v < 0 || v >= bound) return PyMem_Free(out), bad("an index out of range"), NULL;
        out[i] = (int)v;
    }
    return out;
}

static int id_table(PyObject *index, short *table, int count) { /* {id: index} -> table[id] = index */
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    long id, i;
    for (int t = 0; t < MAX_IDS; t++) table[t] = -1;
    if (!PyDict_Check(index) || PyDict_GET_SIZE(index) != count) return bad("an index of another size");
    while (PyDict_Next(index, &pos, &k, &v)) {
        if (!exact_int(k, &id) || !exact_int(v, &i) || id < 0 || id >= MAX_IDS || i < 0 || i >= count)
            return bad("an actor id outside the table");
        table[id] = (short)i;
    }
    return 0;
}

static int key_bind(Key *m, PyObject *reads, PyObject *requests, PyObject *sessions, PyObject *req_index,
                    PyObject *ses_index, PyObject *req_class, PyObject *req_turns, PyObject *classes, PyObject *plain,
                    PyObject *nodes, PyObject *cache_owned) {
    Py_ssize_t count;
    long v;
    if (m->n < 1 || m->n > MAX_SLOTS) return bad("a pool of another size");
    if (!PyTuple_Check(reads) || PyTuple_GET_SIZE(reads) != REC_N) return bad("reads");
    for (int rec = 0; rec < REC_N; rec++) {
        PyObject *r = PyTuple_GET_ITEM(reads, rec);
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 1 + READ_COUNT[rec] || !item_long(r, 0, &v)) return bad("reads");
        m->size[rec] = v;
        for (int f = 0; f < READ_COUNT[rec]; f++) {
            if (!item_long(r, 1 + f, &v) || v < 0 || v >= m->size[rec]) return bad("reads");
            m->at[rec][f] = (int)v;
        }
    }
    if (!PyTuple_Check(requests) || !PyTuple_Check(sessions)) return bad("actors");
    m->nreq = (int)PyTuple_GET_SIZE(requests), m->nses = (int)PyTuple_GET_SIZE(sessions);
    if (m->nreq > MAX_ACTORS || m->nses > MAX_ACTORS) return bad("too many actors");
    if (id_table(req_index, m->id_req, m->nreq) < 0 || id_table(ses_index, m->id_ses, m->nses) < 0) return -1;
    size_t nr = (size_t)m->nreq + 1, ns = (size_t)m->nses + 1;
    m->req_id = PyMem_Calloc(nr, sizeof(long)), m->req_sid = PyMem_Calloc(nr, sizeof(long));
    m->ses_id = PyMem_Calloc(ns, sizeof(long)), m->req_ses = PyMem_Calloc(nr, sizeof(int));
    m->ses_nturns = PyMem_Calloc(ns, sizeof(int)), m->ses_turn = PyMem_Calloc(ns * MAX_TURNS, sizeof(int));
    m->req = PyMem_Calloc(nr, sizeof(Req)), m->ses = PyMem_Calloc(ns, sizeof(Ses));
    if (!m->req_id || !m->req_sid || !m->ses_id || !m->req_ses || !m->ses_nturns || !m->ses_turn || !m->req || !m->ses) {
        PyErr_NoMemory();
        return -1;
    }
    for (int k = 0; k < m->nreq; k++) {
        PyObject *pair = PyTuple_GET_ITEM(requests, k);
        if (!item_long(pair, 0, &m->req_id[k]) || id_of(m->id_req, m->req_id[k]) != k) return bad("requests");
        if (PyTuple_GET_SIZE(pair) != 2) return bad("requests");
        if (PyTuple_GET_ITEM(pair, 1) == Py_None) m->req_sid[k] = NONE;
        else if (!item_long(pair, 1, &m->req_sid[k])) return bad("requests");
        m->req_ses[k] = m->req_sid[k] == NONE ? -1 : id_of(m->id_ses, m->req_sid[k]);
    }
    if (!PyTuple_Check(req_turns) || PyTuple_GET_SIZE(req_turns) != m->nses) return bad("turns");
    for (int j = 0; j < m->nses; j++) {
        PyObject *pair = PyTuple_GET_ITEM(sessions, j), *turns = PyTuple_GET_ITEM(req_turns, j);
        if (!item_long(pair, 0, &m->ses_id[j]) || id_of(m->id_ses, m->ses_id[j]) != j) return bad("sessions");
        if (!PyTuple_Check(turns) || PyTuple_GET_SIZE(turns) > MAX_TURNS) return bad("turns");
        m->ses_nturns[j] = (int)PyTuple_GET_SIZE(turns);
        for (int p = 0; p < m->ses_nturns[j]; p++) {
            if (!item_long(turns, p, &v) || v < 0 || v >= m->nreq) return bad("turns");
            m->ses_turn[j * MAX_TURNS + p] = (int)v;
        }
    }
    int *req_class_of = int_array(req_class, &count, INT_MAX);
    if (req_class_of == NULL) return -1;
    m->req_class = PyMem_Calloc(nr, sizeof(long));
    if (m->req_class == NULL) return PyMem_Free(req_class_of), PyErr_NoMemory(), -1;
    for (int k = 0; k < m->nreq && k < count; k++) m->req_class[k] = req_class_of[k];
    PyMem_Free(req_class_of);
    if (count != m->nreq) return bad("classes of requests");
    if (!(m->plain = int_array(plain, &count, m->nreq))) return -1;
    m->nplain = (int)count;
    if (!PyTuple_Check(classes)) return bad("classes");
    m->nclasses = (int)PyTuple_GET_SIZE(classes);
    m->class_start = PyMem_Calloc((size_t)m->nclasses + 1, sizeof(int));
    m->class_members = PyMem_Calloc(ns, sizeof(int));
    if (!m->class_start || !m->class_members) return PyErr_NoMemory(), -1;
    int at = 0;
    for (int c = 0; c < m->nclasses; c++) {
        int *members = int_array(PyTuple_GET_ITEM(classes, c), &count, m->nses);
        if (members == NULL) return -1;
        m->class_start[c] = at;
        if (count == 0 || at + count > m->nses) return PyMem_Free(members), bad("classes");
        for (Py_ssize_t i = 0; i < count; i++) m->class_members[at++] = members[i];
        PyMem_Free(members);
        for (int i = m->class_start[c]; i < at; i++)
            if (m->ses_nturns[m->class_members[i]] != m->ses_nturns[m->class_members[m->class_start[c]]])
                return bad("a class of sessions with unlike turns");
    }
    if (at != m->nses) return bad("classes");
    m->class_start[m->nclasses] = at;
    if (!PyTuple_Check(nodes) || PyTuple_GET_SIZE(nodes) != m->n + 1) return bad("nodes");
    for (int k = 1; k <= m->n; k++)
        if (!item_long(nodes, k, &m->node[k]) || m->node[k] == m->nobody || id_of(m->id_req, m->node[k]) >= 0 ||
            id_of(m->id_ses, m->node[k]) >= 0)
            return bad("a node named like an actor");
    int *owned = int_array(cache_owned, &count, 256);
    if (owned == NULL) return -1;
    for (Py_ssize_t i = 0; i < count; i++) m->cache_owned[owned[i]] = 1;
    PyMem_Free(owned);
    size_t blocks = (size_t)m->nreq * m->req_block + (size_t)m->nses * m->ses_block;
    m->out = PyMem_Malloc(blocks + 4 * MAX_SLOTS + 4 + 2 * MAX_STEPS);
    m->blocks = PyMem_Malloc((size_t)m->nreq * m->req_block + 1), m->groups = PyMem_Malloc(blocks + 1);
    if (!m->out || !m->blocks || !m->groups) return PyErr_NoMemory(), -1;
    return 0;
}

static void key_free(Key *m) {
    void *arrays[] = {m->req_id, m->req_sid, m->req_class, m->ses_id, m->req_ses, m->ses_nturns, m->ses_turn,
                      m->class_start, m->class_members, m->plain, m->req, m->ses, m->out, m->blocks, m->groups};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) PyMem_Free(arrays[i]);
    for (int s = 0; s < 256; s++) PyMem_Free(m->seen[s]);
    Py_CLEAR(m->state_type);
    Py_CLEAR(m->slot_back);
}

static int key_init(Key *m, PyObject *args, PyObject *kwds) {
    PyObject *reads, *requests, *sessions, *req_index, *ses_index, *req_class, *req_turns, *classes, *plain, *nodes;
    PyObject *cache_owned, *state_type, *slot_back;
    (void)kwds;
    if (m->ready) return bad("bound already");
    if (!PyArg_ParseTuple(args, "ipOOOOOOOOOOlOO!O!ii", &m->n, &m->cache, &reads, &requests, &sessions, &req_index,
                          &ses_index, &req_class, &req_turns, &classes, &plain, &nodes, &m->nobody, &cache_owned,
                          &PyType_Type, &state_type, &PyDict_Type, &slot_back, &m->req_block, &m->ses_block))
        return -1;
    if (m->req_block != 8 + 3 * m->cache || m->ses_block != 5) return bad("blocks of another layout");
    Py_INCREF(state_type), Py_INCREF(slot_back);
    m->state_type = state_type, m->slot_back = slot_back;
    if (key_bind(m, reads, requests, sessions, req_index, ses_index, req_class, req_turns, classes, plain, nodes,
                 cache_owned) < 0)
        return -1;
    m->ready = 1;
    return 0;
}

static void key_dealloc(Key *m) {
    key_free(m);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyMethodDef key_methods[] = {
    {"key", (PyCFunction)key_key, METH_O, "The canonical key of a world, as bytes; None: pack it in Python."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject KeyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "slotwarden.verification.checker._key.Key",
    .tp_basicsize = sizeof(Key),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One workload's fixed facts, bound once for its canonical keys.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)key_init,
    .tp_dealloc = (destructor)key_dealloc,
    .tp_methods = key_methods,
};

int add_decoder(PyObject *module); /* _decode.c: the Decoder type */

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_key", "The checker's canonical key and decoding.", -1, NULL};

PyMODINIT_FUNC PyInit__key(void) {
    if (PyType_Ready(&KeyType) < 0) return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL) return NULL;
    Py_INCREF(&KeyType);
    if (PyModule_AddObject(mod, "Key", (PyObject *)&KeyType) < 0) {
        Py_DECREF(&KeyType);
        Py_DECREF(mod);
        return NULL;
    }
    if (add_decoder(mod) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
