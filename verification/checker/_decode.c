/* The checker's decoding in C (see decode_compiled.py), a part of the `_key` extension.
   `Decoder(...)` binds one codec's fixed facts (the slots, the cache flag, its actors and where
   each one's block lies, the record types, the node each slot names, the slot sets of
   `packing.SLOT_SETS`, the codec's `_slot_back`); `Decoder.world(key)` returns the World
   `decoding.Decoding.world(key)` returns for a packed key: equal, of the same record types,
   built in the same order. It returns None for any key it is unsure of (not bytes, another
   length, a mask naming no slot or step, a slot code not in `_slot_back`): the caller then
   decodes it in Python. Requests, sessions and pools already built are kept and handed out
   again, as the Python keeps them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "../_records.h"
#include <stdint.h>
#include <string.h>

enum { MAX_SLOTS = 8, MAX_STEPS = 8, MAX_PLACES = 64, POOLS_KEPT = 1 << 17 };
enum { WORLD, POOL, SLOT, REQUEST, SESSION, STEP, RECORDS }; /* decode_compiled.RECORDS' order */
static const Py_ssize_t SIZE[RECORDS] = {10, 3, 5, 7, 5, 4};  /* each record's fields */

typedef struct { /* an actor's block: (is a request, its index, its id, the offset) */
    int is_request, index, offset;
    long actor_id;                /* the actor's id as a C long (its lock pairs are sorted by it) */
    PyObject *actor, *id, *other; /* id, other: the record's (id, session id) or (id, turns) */
} Place;

typedef struct {
    PyObject_HEAD
    int ready, n, cache, nplaces, nreq, nses, req_block, ses_block, tail;
    Py_ssize_t blocks; /* the actor blocks' length */
    PyTypeObject *type[RECORDS];
    Place place[MAX_PLACES];
    PyObject *node[MAX_SLOTS + 1], *nobody, *cache_owned, *slot_sets, *slot_back, *nodes;
    PyObject *actors, *pools; /* (place, plain part) -> Request or Session; pool part -> Pool */
} Decoder;

static PyObject *value_of(uint8_t b) { return b == 0 ? Py_NewRef(Py_None) : PyLong_FromLong(b - 3); } /* packing */
static PyObject *flag_of(uint8_t b) { return PyBool_FromLong(b != 0 && b != 3); } /* bool(value_of(b)) */

/* the Request or Session of place `p` with plain part `plain`: kept, or made; NULL + no error: unsure */
static PyObject *actor_of(Decoder *d, int p, const uint8_t *plain) {
    const Place *pl = &d->place[p];
    uint64_t code = (uint64_t)p << 40;
    for (int i = 0; i < (pl->is_request ? 5 : 3); i++) code |= (uint64_t)plain[i] << (8 * i);
    PyObject *key = PyLong_FromUnsignedLongLong(code), *found;
    if (key == NULL) return NULL;
    if ((found = PyDict_GetItemWithError(d->actors, key)) != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return Py_XNewRef(found);
    }
    if (pl->is_request) {
        PyObject *f[7] = {Py_NewRef(pl->id), Py_NewRef(pl->other), value_of(plain[0]), value_of(plain[1]),
                          flag_of(plain[2]), flag_of(plain[3]), value_of(plain[4])};
        found = record(d->type[REQUEST], f, 7);
    } else {
        Py_ssize_t turn = plain[2];
        if (turn > PyTuple_GET_SIZE(pl->other)) return Py_DECREF(key), NULL;
        PyObject *f[5] = {Py_NewRef(pl->id), value_of(plain[0]), value_of(plain[1]),
                          Py_NewRef(turn ? PyTuple_GET_ITEM(pl->other, turn - 1) : Py_None), Py_NewRef(pl->other)};
        found = record(d->type[SESSION], f, 5);
    }
    if (found != NULL && PyDict_SetItem(d->actors, key, found) < 0) Py_CLEAR(found);
    Py_DECREF(key);
    return found;
}

typedef struct { /* the actors' masks, read from their blocks */
    int owner[MAX_SLOTS], borrower[MAX_SLOTS]; /* a place, or -1: nobody */
    uint8_t locks[MAX_PLACES], copy[2][MAX_PLACES];
    uint64_t members[MAX_STEPS];
} Masks;

/* Decoding._pool_of: the pool of header part `head` (`len` bytes) and the masks; NULL + no error: unsure */
static PyObject *pool_of(Decoder *d, const uint8_t *head, Py_ssize_t len, const Masks *m) {
    PyObject *slots = PyTuple_New(d->n), *free = PyTuple_New(len - 3 * d->n - 1), *locks = Py_None;
    PyObject *code = NULL, *value;
    if (slots == NULL || free == NULL) goto fail;
    for (int k = 0; k < d->n; k++) {
        code = Py_BuildValue("(iii)", head[3 * k], head[3 * k + 1], head[3 * k + 2]);
        if (code == NULL || (value = PyDict_GetItemWithError(d->slot_back, code)) == NULL) goto fail;
        Py_CLEAR(code);
        if (!PyTuple_CheckExact(value) || PyTuple_GET_SIZE(value) != 3) goto fail;
        PyObject *state = PyTuple_GET_ITEM(value, 0);
        int owned = PySet_Contains(d->cache_owned, state);
        if (owned < 0) goto fail;
        PyObject *who = owned ? d->node[k + 1] : m->owner[k] < 0 ? d->nobody : d->place[m->owner[k]].actor;
        PyObject *lent = m->borrower[k] < 0 ? d->nobody : d->place[m->borrower[k]].actor;
        PyObject *f[5] = {Py_NewRef(state), Py_NewRef(who), Py_NewRef(lent), Py_NewRef(PyTuple_GET_ITEM(value, 1)),
                          Py_NewRef(PyTuple_GET_ITEM(value, 2))};
        PyObject *slot = record(d->type[SLOT], f, 5);
        if (slot == NULL) goto fail;
        PyTuple_SET_ITEM(slots, k, slot);
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(free); i++) {
        PyObject *id = PyLong_FromLong(head[3 * d->n + 1 + i]);
        if (id == NULL) goto fail;
        PyTuple_SET_ITEM(free, i, id);
    }
    if (d->cache) {
        long pairs[MAX_PLACES * 8][2];
        int count = 0;
        for (int p = 0; p < d->nplaces; p++)
            for (int k = 0; k < 8; k++)
                if (m->locks[p] >> k & 1) pairs[count][0] = d->place[p].actor_id, pairs[count++][1] = k + 1;
        qsort(pairs, (size_t)count, sizeof pairs[0], by_pair); /* (actor id, slot) pairs */
        if ((locks = PyTuple_New(count)) == NULL) goto fail;
        for (int i = 0; i < count; i++) {
            PyObject *pair = Py_BuildValue("(ll)", pairs[i][0], pairs[i][1]);
            if (pair == NULL) goto fail;
            PyTuple_SET_ITEM(locks, i, pair);
        }
    } else {
        Py_INCREF(locks);
    }
    PyObject *f[3] = {slots, free, locks};
    return record(d->type[POOL], f, 3);
fail:
    Py_XDECREF(code), Py_XDECREF(slots), Py_XDECREF(free);
    if (locks != Py_None) Py_XDECREF(locks);
    return NULL;
}

/* the pool kept for this header and these masks, or made and kept */
static PyObject *pool_kept(Decoder *d, const uint8_t *head, Py_ssize_t len, const Masks *m) {
    Py_ssize_t size = len + 2 * d->n + (d->cache ? d->nplaces : 0);
    PyObject *key = PyBytes_FromStringAndSize(NULL, size), *found;
    if (key == NULL) return NULL;
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(key);
    memcpy(o, head, (size_t)len), o += len;
    for (int k = 0; k < d->n; k++) *o++ = (uint8_t)(m->owner[k] + 1), *o++ = (uint8_t)(m->borrower[k] + 1);
    if (d->cache) memcpy(o, m->locks, (size_t)d->nplaces);
    if ((found = PyDict_GetItemWithError(d->pools, key)) != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return Py_XNewRef(found);
    }
    found = pool_of(d, head, len, m);
    if (found != NULL && PyDict_GET_SIZE(d->pools) >= POOLS_KEPT) PyDict_Clear(d->pools);
    if (found != NULL && PyDict_SetItem(d->pools, key, found) < 0) Py_CLEAR(found);
    Py_DECREF(key);
    return found;
}

/* Decoding.world's steps: (epoch, its slot set, the actors it advances, its copies), in place order */
static PyObject *steps_of(Decoder *d, const uint8_t *code, int nsteps, const Masks *m) {
    PyObject *steps = PyTuple_New(nsteps);
    for (int s = 0; steps != NULL && s < nsteps; s++) {
        PyObject *members = PyFrozenSet_New(NULL), *copies = PyFrozenSet_New(NULL);
        for (int p = 0; members != NULL && copies != NULL && p < d->nplaces; p++) {
            if (m->members[s] >> p & 1 && PySet_Add(members, d->place[p].actor) < 0) Py_CLEAR(members);
            if (d->cache && m->copy[s][p] && copies != NULL) {
                PyObject *pair = Py_BuildValue("(Oi)", d->place[p].actor, m->copy[s][p]);
                if (pair == NULL || PySet_Add(copies, pair) < 0) Py_CLEAR(copies);
                Py_XDECREF(pair);
            }
        }
        PyObject *f[4] = {PyLong_FromLong(code[2 * s] - 8), Py_NewRef(PyTuple_GET_ITEM(d->slot_sets, code[2 * s + 1])),
                          members, copies};
        PyObject *step = record(d->type[STEP], f, 4);
        if (step == NULL) Py_CLEAR(steps);
        else PyTuple_SET_ITEM(steps, s, step);
    }
    return steps;
}

static int bits_below(unsigned mask, int bound) { return (mask >> bound) == 0; }

static PyObject *decoder_world(Decoder *d, PyObject *key) {
    if (!d->ready) return PyErr_Format(PyExc_RuntimeError, "a Decoder made without its codec");
    if (!PyBytes_CheckExact(key)) Py_RETURN_NONE;
    const uint8_t *k = (const uint8_t *)PyBytes_AS_STRING(key);
    Py_ssize_t len = PyBytes_GET_SIZE(key), end_pool = 3 + 3 * d->n;
    if (len <= end_pool) Py_RETURN_NONE;
    int nsteps = k[2];
    end_pool += 1 + k[end_pool];
    Py_ssize_t at = end_pool + 2 * nsteps;
    if (nsteps > (d->cache ? 2 : MAX_STEPS) || len != at + d->blocks) Py_RETURN_NONE;
    Masks m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < d->n; i++) m.owner[i] = m.borrower[i] = -1;
    PyObject *requests = PyTuple_New(d->nreq), *sessions = PyTuple_New(d->nses), *pool = NULL, *steps = NULL;
    int sure = requests != NULL && sessions != NULL;
    for (int p = 0; sure && p < d->nplaces; p++) {
        const Place *pl = &d->place[p];
        const uint8_t *b = k + at + pl->offset, *tail;
        unsigned owns, borrows;
        PyObject *rec = actor_of(d, p, b);
        if (rec == NULL) {
            sure = 0;
            break;
        }
        if (pl->is_request) {
            PyTuple_SET_ITEM(requests, pl->index, rec);
            tail = b + d->req_block - d->tail;
            unsigned steps_mask = b[d->req_block - 1];
            if (!bits_below(steps_mask, nsteps)) sure = 0;
            for (int s = 0; s < nsteps; s++) m.members[s] |= (uint64_t)(steps_mask >> s & 1) << p;
            if (d->cache) {
                m.locks[p] = b[d->req_block - 4];
                for (int s = 0; s < nsteps; s++) m.copy[s][p] = b[d->req_block - 3 + s];
            }
        } else {
            PyTuple_SET_ITEM(sessions, pl->index, rec);
            tail = b + d->ses_block - 2;
        }
        owns = tail[0], borrows = tail[1];
        if (!bits_below(owns | borrows, d->n)) sure = 0;
        for (int i = 0; i < d->n; i++) {
            if (owns >> i & 1) m.owner[i] = p;
            if (borrows >> i & 1) m.borrower[i] = p;
        }
    }
    if (sure && (pool = pool_kept(d, k + 3, end_pool - 3, &m)) != NULL)
        steps = steps_of(d, k + end_pool, nsteps, &m);
    if (steps == NULL) {
        Py_XDECREF(requests), Py_XDECREF(sessions), Py_XDECREF(pool);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    /* the world's fields after its steps (the cache's bound and what is fixed or empty for a packed
       world) are the `rest` tuple handed in at binding */
    Py_ssize_t nrest = PyTuple_GET_SIZE(d->nodes);
    PyObject *f[16] = {pool, requests, sessions, PyLong_FromLong(k[0] - 8), PyLong_FromLong(k[1] - 8), steps};
    for (Py_ssize_t i = 0; i < nrest; i++) f[6 + i] = Py_NewRef(PyTuple_GET_ITEM(d->nodes, i));
    return record(d->type[WORLD], f, 6 + nrest);
}

/* -- the codec, bound once ------------------------------------------------------------------- */
static int bad(const char *what) {
    PyErr_Format(PyExc_ValueError, "Decoder: %s", what);
    return -1;
}

static int bind_places(Decoder *d, PyObject *places, PyObject *requests, PyObject *sessions) {
    uint8_t seen[2][MAX_PLACES] = {{0}};
    if (!PyTuple_Check(places) || PyTuple_GET_SIZE(places) > MAX_PLACES) return bad("places");
    d->nplaces = (int)PyTuple_GET_SIZE(places);
    d->nreq = (int)PyTuple_GET_SIZE(requests), d->nses = (int)PyTuple_GET_SIZE(sessions);
    d->blocks = (Py_ssize_t)d->nreq * d->req_block + (Py_ssize_t)d->nses * d->ses_block;
    if (d->nplaces != d->nreq + d->nses) return bad("places");
    for (int p = 0; p < d->nplaces; p++) {
        Place *pl = &d->place[p];
        PyObject *actors = NULL, *item = PyTuple_GET_ITEM(places, p);
        if (!PyArg_ParseTuple(item, "piOi", &pl->is_request, &pl->index, &pl->actor, &pl->offset)) return -1;
        Py_INCREF(pl->actor);
        actors = pl->is_request ? requests : sessions;
        if (pl->index < 0 || pl->index >= PyTuple_GET_SIZE(actors) || seen[pl->is_request][pl->index]++)
            return bad("places");
        if (pl->offset < 0 || pl->offset + (pl->is_request ? d->req_block : d->ses_block) > d->blocks)
            return bad("places");
        PyObject *pair = PyTuple_GET_ITEM(actors, pl->index);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(pair, 0)))
            return bad("actors");
        pl->id = Py_NewRef(PyTuple_GET_ITEM(pair, 0)), pl->other = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
        if (!pl->is_request && !PyTuple_Check(pl->other)) return bad("turns");
        if (!PyLong_CheckExact(pl->actor) || (pl->actor_id = PyLong_AsLong(pl->actor)) == -1)
            return PyErr_Clear(), bad("actor ids");
    }
    return 0;
}

static int decoder_init(Decoder *d, PyObject *args, PyObject *kwds) {
    PyObject *types, *sizes, *requests, *sessions, *places, *nodes, *nobody, *owned, *sets, *slot_back, *bound;
    (void)kwds;
    if (d->ready || d->actors != NULL) return bad("bound already");
#if PY_VERSION_HEX >= 0x030E0000 /* a tuple keeps its hash there: `record` would need tuple.__new__'s reset */
    return bad("records made as Python 3.11 to 3.13 make them");
#endif
    if (!PyArg_ParseTuple(args, "ipO!O!O!O!O!iiiO!OO!O!O!O", &d->n, &d->cache, &PyTuple_Type, &types, &PyTuple_Type,
                          &sizes, &PyTuple_Type, &requests, &PyTuple_Type, &sessions, &PyTuple_Type, &places,
                          &d->req_block, &d->ses_block, &d->tail, &PyTuple_Type, &nodes, &nobody, &PyFrozenSet_Type,
                          &owned, &PyTuple_Type, &sets, &PyDict_Type, &slot_back, &bound))
        return -1;
    d->nobody = Py_NewRef(nobody), d->cache_owned = Py_NewRef(owned), d->slot_sets = Py_NewRef(sets);
    if (!PyTuple_Check(bound) || PyTuple_GET_SIZE(bound) < 1 || PyTuple_GET_SIZE(bound) > 10)
        return bad("the world's fields after its steps, as a tuple");
    d->slot_back = Py_NewRef(slot_back), d->nodes = Py_NewRef(bound);
    if ((d->actors = PyDict_New()) == NULL || (d->pools = PyDict_New()) == NULL) return -1;
    if (d->n < 1 || d->n > MAX_SLOTS || PyTuple_GET_SIZE(nodes) != d->n + 1) return bad("a pool of another size");
    if (d->tail != (d->cache ? 6 : 3) || d->req_block != 5 + d->tail || d->ses_block != 5)
        return bad("blocks of another layout");
    if (PyTuple_GET_SIZE(d->slot_sets) != 256) return bad("slot sets");
    if (PyTuple_GET_SIZE(types) != RECORDS || PyTuple_GET_SIZE(sizes) != RECORDS) return bad("records");
    for (int r = 0; r < RECORDS; r++) {
        PyObject *t = PyTuple_GET_ITEM(types, r);
        if (!PyType_Check(t) || !PyType_IsSubtype((PyTypeObject *)t, &PyTuple_Type) ||
            PyLong_AsSsize_t(PyTuple_GET_ITEM(sizes, r)) != SIZE[r])
            return PyErr_Clear(), bad("records");
        d->type[r] = (PyTypeObject *)Py_NewRef(t);
    }
    for (int k = 0; k <= d->n; k++) d->node[k] = Py_NewRef(PyTuple_GET_ITEM(nodes, k));
    if (bind_places(d, places, requests, sessions) < 0) return -1;
    d->ready = 1;
    return 0;
}

static void decoder_dealloc(Decoder *d) {
    for (int r = 0; r < RECORDS; r++) Py_CLEAR(d->type[r]);
    for (int p = 0; p < MAX_PLACES; p++) {
        Py_CLEAR(d->place[p].actor);
        Py_CLEAR(d->place[p].id);
        Py_CLEAR(d->place[p].other);
    }
    for (int k = 0; k <= MAX_SLOTS; k++) Py_CLEAR(d->node[k]);
    PyObject **owned[] = {&d->nobody, &d->cache_owned, &d->slot_sets, &d->slot_back, &d->nodes, &d->actors, &d->pools};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) Py_CLEAR(*owned[i]);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyMethodDef decoder_methods[] = {
    {"world", (PyCFunction)decoder_world, METH_O, "The world of a packed key; None: decode it in Python."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "slotwarden.verification.checker._key.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One codec's fixed facts, bound once for decoding its keys.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)decoder_init,
    .tp_dealloc = (destructor)decoder_dealloc,
    .tp_methods = decoder_methods,
};

int add_decoder(PyObject *module) { /* called by _key.c's module init */
    if (PyType_Ready(&DecoderType) < 0) return -1;
    Py_INCREF(&DecoderType);
    if (PyModule_AddObject(module, "Decoder", (PyObject *)&DecoderType) < 0) {
        Py_DECREF(&DecoderType);
        return -1;
    }
    return 0;
}
