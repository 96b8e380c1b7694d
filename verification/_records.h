/* What the verification's C extensions share (verification/checker/_decode.c,
   verification/abstract/_successors.c): building a record as the Python builds it, and the
   order Python's sorted() gives pairs of ints. */
#ifndef SLOTWARDEN_RECORDS_H
#define SLOTWARDEN_RECORDS_H
#include <Python.h>

/* a record of `type` from `n` new references (stolen; NULL if one failed), as tuple.__new__ makes it */
static inline PyObject *record(PyTypeObject *type, PyObject **items, Py_ssize_t n) {
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i] == NULL) goto done;
    if ((out = type->tp_alloc(type, n)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(out, i, items[i]), items[i] = NULL;
done:
    for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(items[i]);
    return out;
}

/* qsort's comparison of (long, long) pairs, in the order sorted() gives them */
static inline int by_pair(const void *a, const void *b) {
    const long *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

#endif
