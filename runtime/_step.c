/* The launched step's write-set check over the ledger's columns (see runtime/launch_compiled.py).
   Every table (write, read, owner kind, lent, shared, readable) and every code is handed in:
   nothing about the lifecycle is restated here. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { C_NONE, C_READER, C_FULL, C_BORROWER, C_OWNER, C_REQUEST, C_MAX_READERS, C_NOBODY, C_NREL, C_COUNT };

typedef struct {
    const uint8_t *state, *readers, *write, *read, *owner_kind, *lent, *shared, *readable, *fills;
    const int64_t *owner, *borrower;
    int64_t cap, stride, k[C_COUNT];
} Cols;

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

static PyObject *first_bad(PyObject *self, PyObject *args) {
    Py_buffer b[16];
    long long pad;
    int same, request_rows, pad_rows, has_fills;
    PyObject *consts; /* flat: CPython 3.11 sizes its buffer cleanup list by the top-level units only */
    Py_ssize_t stride;
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "y*y*y*Lppppny*y*y*y*y*y*y*y*y*y*y*w*w*O", &b[0], &b[1], &b[2], &pad, &same,
                          &request_rows, &pad_rows, &has_fills, &stride, &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9],
                          &b[10], &b[11], &b[12], &b[13], &b[14], &b[15], &consts))
        return NULL;
    PyObject *out = NULL;
    Cols c;
    Py_ssize_t n = b[0].len / 8;
    const int64_t *ids = b[0].buf, *who = b[1].buf, *src = b[2].buf;
    c.state = b[3].buf, c.owner = b[4].buf, c.borrower = b[5].buf, c.readers = b[6].buf, c.fills = b[7].buf;
    c.write = b[8].buf, c.read = b[9].buf, c.owner_kind = b[10].buf, c.lent = b[11].buf, c.shared = b[12].buf;
    c.readable = b[13].buf;
    int64_t *locks = b[14].buf, *seen = b[15].buf;
    c.stride = stride < 1 ? 1 : stride;
    c.cap = b[4].len / 8 - 1;
    if (!has_fills) c.fills = NULL;
    if (!PyTuple_Check(consts) || PyTuple_GET_SIZE(consts) != C_COUNT) {
        PyErr_SetString(PyExc_ValueError, "the codes: none, reader, full, borrower, owner, request, max, nobody, nrel");
        goto done;
    }
    for (int i = 0; i < C_COUNT; i++) c.k[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(consts, i));
    if (PyErr_Occurred()) goto done;
    if (b[1].len != b[0].len || b[2].len != b[0].len || b[3].len < (c.cap * c.stride + 1) || b[5].len != b[4].len ||
        b[6].len != c.cap + 1 || (has_fills && b[7].len != c.cap + 1) || b[8].len != 256 * c.k[C_NREL] ||
        b[9].len != b[8].len || b[10].len < 256 || b[11].len < 256 || b[12].len < 256 || b[13].len < 256 ||
        b[14].len < 16 * 2 * n || b[15].len != b[4].len) {
        PyErr_SetString(PyExc_ValueError, "arrays of the wrong sizes");
        goto done;
    }
    Py_ssize_t bad = -1, nlock = 0, first = -1, second = -1;
    for (Py_ssize_t i = 0; i < n && bad < 0; i++) {
        if (who[i] == c.k[C_NOBODY]) {
            if (!pad_rows || ids[i] != pad || src[i] != pad) bad = i;
            continue;
        }
        if (!request_rows) { bad = i; break; }
        int w = judge(&c, ids[i], who[i], 1);
        int r = same ? 1 : judge(&c, src[i], who[i], 0);
        if (!w || !r) { bad = i; break; }
        if (w == 2) locks[2 * nlock] = i, locks[2 * nlock + 1] = ids[i], nlock++;
        if (r == 2) locks[2 * nlock] = i, locks[2 * nlock + 1] = src[i], nlock++;
    }
    if (bad < 0) {  /* a slot written by two rows: the earliest second row, and the row before it writing it */
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t s = ids[i];
            if (s == pad || s < 0 || s > c.cap) continue;
            if (seen[s] >= 0 && second < 0) first = seen[s], second = i;
            seen[s] = i;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] <= c.cap) seen[ids[i]] = -1;
    }
    out = Py_BuildValue("(nnnn)", bad, nlock, first, second);
done:
    for (int i = 0; i < 16; i++)
        if (b[i].obj) PyBuffer_Release(&b[i]);
    return out;
}

static PyMethodDef methods[] = {
    {"first_bad", first_bad, METH_VARARGS, "The first bad row, the lock checks owed, the first pair writing one slot."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_step", "The launched step's compiled check.", -1, methods};

PyMODINIT_FUNC PyInit__step(void) { return PyModule_Create(&module); }
