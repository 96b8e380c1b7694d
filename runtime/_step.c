/* The launched step's write-set check over the ledger's columns (see runtime/launch_compiled.py).
   Every table (write, read, owner kind, lent, shared, readable) and every code is handed in:
   nothing about the lifecycle is restated here.

   A `Check` holds one ledger's columns, the tables and its scratch, bound once; a call hands in
   only the step: `check(cols, tables, ids, who, pad, src, fills)`. It returns None when every
   row may and no two rows write one slot; False when it cannot judge the call as given (`cols`
   or `tables` not the ones bound, `pad` not the bound pad slot as an int, an argument not a
   C-contiguous native numpy array of int64 ids, of one length, or of uint8 fills, one per slot
   id; src and fills may be None): then the caller converts, or binds again; else
   (bad row or -1, (row, slot, ...) of the rows reading a locked slot before it, first, second):
   the rows `first` < `second` write one slot (-1, -1: none). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { C_NONE, C_READER, C_FULL, C_BORROWER, C_OWNER, C_REQUEST, C_MAX_READERS, C_NOBODY, C_NREL, C_COUNT };
enum { B_STATE, B_OWNER, B_BORROWER, B_READERS, B_WRITE, B_READ, B_OWNER_KIND, B_LENT, B_SHARED, B_READABLE, B_COUNT };

typedef struct {
    const uint8_t *state, *readers, *write, *read, *owner_kind, *lent, *shared, *readable, *fills;
    const int64_t *owner, *borrower;
    int64_t cap, stride, k[C_COUNT];
} Cols;

typedef struct {
    PyObject_HEAD
    PyObject *cols, *tables, *ndarray; /* what a call must hand in (by identity) to be judged here */
    Py_buffer held[B_COUNT];
    int nheld, request_rows, pad_rows;
    int64_t pad;
    Cols c;
    int64_t *seen;  /* per slot id: the last row writing it, -1 between calls */
    int64_t *locks; /* (row, slot) pairs of the rows reading a locked slot */
    Py_ssize_t room;
} Check;

/* 1: the row may address `slot` (writing it when `writes`); 0: refused; 2: only if it holds a lock */
static int judge(const Cols *c, int64_t slot, int64_t who, int writes) {
    if (slot < 1 || slot > c->cap) return 0;
    uint8_t s = c->state[slot * c->stride];
    int64_t rel = c->k[C_NONE];
    if (c->owner_kind[s] == c->k[C_REQUEST] && c->owner[slot] == who) rel = c->k[C_OWNER];
    else if (c->lent[s] && c->borrower[slot] == who) rel = c->k[C_BORROWER];
    else if (c->shared[s] && c->readers[slot] > 0)
        rel = c->readers[slot] >= c->k[C_MAX_READERS] ? c->k[C_FULL] : c->k[C_READER];
    size_t at = (size_t)s * (size_t)c->k[C_NREL] + (size_t)rel;
    if (!c->read[at] || (writes && !c->write[at])) return 0;
    if (c->fills && !c->readable[c->fills[slot]]) return 0;
    return rel == c->k[C_READER] || rel == c->k[C_FULL] ? 2 : 1;
}

static void check_release(Check *m) {
    for (int i = 0; i < m->nheld; i++) PyBuffer_Release(&m->held[i]);
    m->nheld = 0;
    Py_CLEAR(m->cols);
    Py_CLEAR(m->tables);
    Py_CLEAR(m->ndarray);
    PyMem_Free(m->seen);
    PyMem_Free(m->locks);
    m->seen = m->locks = NULL;
    m->room = 0;
}

static void check_dealloc(Check *m) {
    check_release(m);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

/* Check(cols, tables, ndarray, state bytes, stride, owner, borrower, readers, write, read, owner kind, lent,
         shared, readable, codes, pad, request rows, pad rows) */
static int check_init(Check *m, PyObject *args, PyObject *Py_UNUSED(kw)) {
    PyObject *cols, *tables, *ndarray, *obj[B_COUNT], *consts;
    Py_ssize_t stride;
    long long pad;
    int request_rows, pad_rows;
    check_release(m);
    if (!PyArg_ParseTuple(args, "OOOOnOOOOOOOOOO!Lpp", &cols, &tables, &ndarray, &obj[B_STATE], &stride,
                          &obj[B_OWNER], &obj[B_BORROWER], &obj[B_READERS], &obj[B_WRITE], &obj[B_READ],
                          &obj[B_OWNER_KIND], &obj[B_LENT], &obj[B_SHARED], &obj[B_READABLE], &PyTuple_Type, &consts,
                          &pad, &request_rows, &pad_rows))
        return -1;
    for (int i = 0; i < B_COUNT; i++) {
        if (PyObject_GetBuffer(obj[i], &m->held[i], PyBUF_C_CONTIGUOUS) < 0) return -1;
        m->nheld++;
    }
    if (PyTuple_GET_SIZE(consts) != C_COUNT) {
        PyErr_SetString(PyExc_ValueError, "the codes: none, reader, full, borrower, owner, request, max, nobody, nrel");
        return -1;
    }
    Cols *c = &m->c;
    for (int i = 0; i < C_COUNT; i++) c->k[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(consts, i));
    if (PyErr_Occurred()) return -1;
    Py_buffer *b = m->held;
    c->stride = stride < 1 ? 1 : stride;
    c->cap = b[B_OWNER].len / 8 - 1;
    if (c->cap < 0 || b[B_STATE].len < (c->cap * c->stride + 1) || b[B_BORROWER].len != b[B_OWNER].len ||
        b[B_READERS].len != c->cap + 1 || c->k[C_NREL] < 1 || b[B_WRITE].len != 256 * c->k[C_NREL] ||
        b[B_READ].len != b[B_WRITE].len || b[B_OWNER_KIND].len < 256 || b[B_LENT].len < 256 ||
        b[B_SHARED].len < 256 || b[B_READABLE].len < 256) {
        PyErr_SetString(PyExc_ValueError, "arrays of the wrong sizes");
        return -1;
    }
    c->state = b[B_STATE].buf, c->owner = b[B_OWNER].buf, c->borrower = b[B_BORROWER].buf;
    c->readers = b[B_READERS].buf, c->write = b[B_WRITE].buf, c->read = b[B_READ].buf;
    c->owner_kind = b[B_OWNER_KIND].buf, c->lent = b[B_LENT].buf, c->shared = b[B_SHARED].buf;
    c->readable = b[B_READABLE].buf, c->fills = NULL;
    m->seen = PyMem_Malloc((size_t)(c->cap + 1) * sizeof(int64_t));
    if (!m->seen) {
        PyErr_NoMemory();
        return -1;
    }
    for (int64_t s = 0; s <= c->cap; s++) m->seen[s] = -1;
    m->pad = pad, m->request_rows = request_rows, m->pad_rows = pad_rows;
    Py_INCREF(cols), Py_INCREF(tables), Py_INCREF(ndarray);
    m->cols = cols, m->tables = tables, m->ndarray = ndarray;
    return 0;
}

/* Take `obj`'s buffer when it is an exact numpy array of native items of format `f0` or `f1` (1: taken) */
static int take(Check *m, PyObject *obj, Py_buffer *view, const char *f0, const char *f1, Py_ssize_t itemsize) {
    if ((PyObject *)Py_TYPE(obj) != m->ndarray) return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return 0;
    }
    const char *f = view->format ? view->format : "B";
    if (view->ndim == 1 && view->itemsize == itemsize && (strcmp(f, f0) == 0 || strcmp(f, f1) == 0)) return 1;
    PyBuffer_Release(view);
    return 0;
}

static PyObject *check_call(Check *m, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "check(cols, tables, ids, who, pad, src, fills)");
        return NULL;
    }
    if (!m->cols || args[0] != m->cols || args[1] != m->tables || !PyLong_CheckExact(args[4])) Py_RETURN_FALSE;
    int overflow = 0;
    if (PyLong_AsLongLongAndOverflow(args[4], &overflow) != m->pad || overflow) Py_RETURN_FALSE;
    Py_buffer v[4]; /* ids, who, src, fills */
    int got = 0, same = args[5] == Py_None, has_fills = args[6] != Py_None;
    PyObject *out = NULL;
    if (!take(m, args[2], &v[0], "l", "q", 8)) Py_RETURN_FALSE;
    got = 1;
    if (!take(m, args[3], &v[1], "l", "q", 8)) goto unsure;
    got = 2;
    if (!same) {
        if (!take(m, args[5], &v[2], "l", "q", 8)) goto unsure;
        got = 3;
    }
    if (has_fills) {
        if (!take(m, args[6], &v[3], "B", "B", 1)) goto unsure;
        got = 4;
    }
    Cols c = m->c;
    Py_ssize_t n = v[0].len / 8;
    if (v[1].len != v[0].len || (!same && v[2].len != v[0].len) || (has_fills && v[3].len != c.cap + 1)) goto unsure;
    const int64_t *ids = v[0].buf, *who = v[1].buf, *src = same ? ids : v[2].buf;
    c.fills = has_fills ? v[3].buf : NULL;
    if (m->room < 4 * n) {
        int64_t *grown = PyMem_Realloc(m->locks, (size_t)(4 * n) * sizeof(int64_t));
        if (!grown) {
            PyErr_NoMemory();
            goto done;
        }
        m->locks = grown, m->room = 4 * n;
    }
    int64_t *locks = m->locks, *seen = m->seen, pad = m->pad;
    Py_ssize_t bad = -1, nlock = 0, first = -1, second = -1;
    for (Py_ssize_t i = 0; i < n && bad < 0; i++) {
        if (who[i] == c.k[C_NOBODY]) {
            if (!m->pad_rows || ids[i] != pad || src[i] != pad) bad = i;
            continue;
        }
        if (!m->request_rows) {
            bad = i;
            break;
        }
        int w = judge(&c, ids[i], who[i], 1);
        int r = same ? 1 : judge(&c, src[i], who[i], 0);
        if (!w || !r) {
            bad = i;
            break;
        }
        if (w == 2) locks[2 * nlock] = i, locks[2 * nlock + 1] = ids[i], nlock++;
        if (r == 2) locks[2 * nlock] = i, locks[2 * nlock + 1] = src[i], nlock++;
    }
    if (bad < 0) { /* a slot written by two rows: the earliest second row, and the row before it writing it */
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t s = ids[i];
            if (s == pad || s < 0 || s > c.cap) continue;
            if (seen[s] >= 0 && second < 0) first = seen[s], second = i;
            seen[s] = i;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] <= c.cap) seen[ids[i]] = -1;
    }
    if (bad < 0 && nlock == 0 && second < 0) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    PyObject *pairs = PyTuple_New(2 * nlock);
    if (!pairs) goto done;
    for (Py_ssize_t i = 0; i < 2 * nlock; i++) {
        PyObject *x = PyLong_FromLongLong(locks[i]);
        if (!x) {
            Py_DECREF(pairs);
            goto done;
        }
        PyTuple_SET_ITEM(pairs, i, x);
    }
    out = Py_BuildValue("(nNnn)", bad, pairs, first, second);
    goto done;
unsure:
    out = Py_False;
    Py_INCREF(out);
done:
    for (int i = 0; i < got; i++)
        if (i != 2 || !same) PyBuffer_Release(&v[i]);
    return out;
}

static PyMethodDef check_methods[] = {
    {"check", (PyCFunction)(void (*)(void))check_call, METH_FASTCALL,
     "check(cols, tables, ids, who, pad, src, fills): None, False, or (bad, lock pairs, first, second)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject CheckType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "slotwarden.runtime._step.Check",
    .tp_basicsize = sizeof(Check),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One ledger's columns, the tables and scratch, bound once for the launch check.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)check_init,
    .tp_dealloc = (destructor)check_dealloc,
    .tp_methods = check_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_step", "The launched step's compiled check.", -1, NULL};

PyMODINIT_FUNC PyInit__step(void) {
    if (PyType_Ready(&CheckType) < 0) return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (!mod) return NULL;
    Py_INCREF(&CheckType);
    if (PyModule_AddObject(mod, "Check", (PyObject *)&CheckType) < 0) {
        Py_DECREF(&CheckType);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
