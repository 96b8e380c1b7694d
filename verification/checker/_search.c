/* The checker's bookkeeping of one expanded world in C (see search.py, `Absorb`).
   `Absorb(seen, judged, fired, keyof, compiled, judge_world, judge_launch, policy[, graph, codes,
   fair])` binds one search's tables (`compiled`: the codec's key in C, None where it gives none,
   or None; `graph`: a liveness.Graph, given each outcome's edge as `Graph.edge` would add it). `Absorb.world(outcomes, world, k, level_keys, parents)` does for the outcomes of the
   world at position `k` of its level what the search's Python loop does when nothing is wrong:
   every move's verdict read from `judged` (the rule it made added to `fired`), each launch
   judged, each next world keyed, and every key not yet in `seen` added to it, to `level_keys`
   and (with `k`) to `parents`, its world judged. It returns the number of outcomes. Where the
   Python has anything to say (no outcome, an error, a move not yet judged or judged bad, a
   launch or a next world that breaks a property) it undoes all it did and returns None: the
   search's Python loop then does the world itself, and reports. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { ACTION, WORLD, MOVES, ERROR }; /* an Outcome's fields */

typedef struct {
    PyObject_HEAD
    PyObject *seen, *judged, *fired, *keyof, *compiled, *judge_world, *judge_launch, *policy, *launch, *append;
    PyObject *graph, *codes, *fair; /* the liveness graph (None: none), each action kind's code, the fair codes */
} Absorb;

/* undo: the keys added to `seen` and the level, the rules added to `fired` */
static void undo(Absorb *a, PyObject *added, PyObject *rules, PyObject *level_keys, Py_ssize_t level_size,
                 PyObject *parents, PyObject *parents_size) {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace); /* kept across the undoing */
    for (Py_ssize_t i = 0; added != NULL && i < PyList_GET_SIZE(added); i++) PySet_Discard(a->seen, PyList_GET_ITEM(added, i));
    for (Py_ssize_t i = 0; rules != NULL && i < PyList_GET_SIZE(rules); i++) PySet_Discard(a->fired, PyList_GET_ITEM(rules, i));
    if (PyList_GET_SIZE(level_keys) > level_size) PyList_SetSlice(level_keys, level_size, PyList_GET_SIZE(level_keys), NULL);
    PyObject *tail = PySlice_New(parents_size, NULL, NULL);
    if (tail != NULL) PyObject_DelItem(parents, tail);
    Py_XDECREF(tail);
    PyErr_Clear();
    PyErr_Restore(type, value, trace);
}

/* liveness.Graph.edge for each outcome, in order (its target's id, the first time a key is met,
   with the world being expanded as its parent; its kind's code; whether it is fair) */
static int edges(Absorb *a, PyObject *outcomes, PyObject *keys) {
    PyObject *ids = PyObject_GetAttrString(a->graph, "ids"), *starts = PyObject_GetAttrString(a->graph, "starts");
    PyObject *targets = PyList_New(0), *kinds = PyList_New(0), *parents = PyList_New(0), *here = NULL;
    int rc = -1, fair = 0;
    if (ids == NULL || starts == NULL || targets == NULL || kinds == NULL || parents == NULL) goto done;
    if (!PyDict_CheckExact(ids)) { PyErr_SetString(PyExc_TypeError, "Graph.ids: a dict"); goto done; }
    Py_ssize_t opened = PyObject_Length(starts);
    if (opened < 1 || (here = PyLong_FromSsize_t(opened - 1)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(outcomes); i++) {
        PyObject *kind = PyTuple_GET_ITEM(PyTuple_GET_ITEM(PyList_GET_ITEM(outcomes, i), ACTION), 0);
        PyObject *code = PyDict_GetItemWithError(a->codes, kind), *key = PyList_GET_ITEM(keys, i);
        if (code == NULL) { if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, kind); goto done; }
        PyObject *id = PyDict_GetItemWithError(ids, key);
        if (id == NULL) {
            if (PyErr_Occurred()) goto done;
            PyObject *fresh = PyLong_FromSsize_t(PyDict_GET_SIZE(ids));
            int bad = fresh == NULL || PyDict_SetItem(ids, key, fresh) < 0 || PyList_Append(parents, here) < 0;
            Py_XDECREF(fresh);
            if (bad || (id = PyDict_GetItemWithError(ids, key)) == NULL) goto done;
        }
        if (PyList_Append(targets, id) < 0 || PyList_Append(kinds, code) < 0) goto done;
        int is_fair = PySet_Contains(a->fair, code);
        if (is_fair < 0) goto done;
        fair |= is_fair;
    }
    PyObject *r1 = PyObject_CallMethod(a->graph, "_extend", "OOO", targets, kinds, parents);
    if (r1 == NULL) goto done;
    Py_DECREF(r1);
    rc = fair && PyObject_SetAttrString(a->graph, "_fair", Py_True) < 0 ? -1 : 0;
done:
    Py_XDECREF(ids), Py_XDECREF(starts), Py_XDECREF(targets), Py_XDECREF(kinds), Py_XDECREF(parents), Py_XDECREF(here);
    return rc;
}

static PyObject *absorb_world(Absorb *a, PyObject *const *args, Py_ssize_t nargs) {
    if (a->seen == NULL) return PyErr_SetString(PyExc_RuntimeError, "Absorb is not bound"), NULL;
    if (nargs != 5) return PyErr_SetString(PyExc_TypeError, "world(outcomes, world, k, level_keys, parents)"), NULL;
    PyObject *outcomes = args[0], *world = args[1], *k = args[2], *level_keys = args[3], *parents = args[4];
    if (!PyList_CheckExact(outcomes) || !PyList_CheckExact(level_keys))
        return PyErr_SetString(PyExc_TypeError, "outcomes and level_keys: lists"), NULL;
    Py_ssize_t n = PyList_GET_SIZE(outcomes), level_size = PyList_GET_SIZE(level_keys);
    Py_ssize_t parents_len = PyObject_Length(parents);
    if (parents_len < 0) return NULL;
    if (n == 0) Py_RETURN_NONE; /* no action enabled: the Python judges whether the world is final */
    PyObject *added = PyList_New(0), *rules = PyList_New(0), *parents_size = PyLong_FromSsize_t(parents_len);
    PyObject *keys = a->graph == Py_None ? NULL : PyList_New(0); /* every next key, in order: the graph's edges */
    Py_ssize_t nmoves = 0, r = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *out = PyList_GET_ITEM(outcomes, i);
        if (PyTuple_Check(out) && PyTuple_GET_SIZE(out) == 4 && PyTuple_Check(PyTuple_GET_ITEM(out, MOVES)))
            nmoves += PyTuple_GET_SIZE(PyTuple_GET_ITEM(out, MOVES));
    }
    PyObject **fires = PyMem_Malloc(sizeof(PyObject *) * (size_t)(nmoves + 1)); /* borrowed from `judged` */
    int ok = added != NULL && rules != NULL && parents_size != NULL && fires != NULL, launched = 0;
    ok = ok && (keys != NULL || a->graph == Py_None);
    if (fires == NULL) PyErr_NoMemory();
    for (Py_ssize_t i = 0; ok == 1 && i < n; i++) { /* first every verdict the Python keeps */
        PyObject *out = PyList_GET_ITEM(outcomes, i);
        if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) != 4 || PyTuple_GET_ITEM(out, ERROR) != Py_None ||
            !PyTuple_Check(PyTuple_GET_ITEM(out, MOVES))) {
            ok = 0;
            break;
        }
        PyObject *moves = PyTuple_GET_ITEM(out, MOVES);
        for (Py_ssize_t m = 0; ok == 1 && m < PyTuple_GET_SIZE(moves); m++) {
            PyObject *verdict = PyDict_GetItemWithError(a->judged, PyTuple_GET_ITEM(moves, m));
            if (verdict == NULL) {
                ok = PyErr_Occurred() ? -1 : 0;
            } else if (!PyTuple_Check(verdict) || PyTuple_GET_SIZE(verdict) != 2) {
                ok = 0;
            } else {
                int bad = PyObject_IsTrue(PyTuple_GET_ITEM(verdict, 0));
                ok = bad < 0 ? -1 : !bad;
                fires[r++] = PyTuple_GET_ITEM(verdict, 1);
            }
        }
        PyObject *action = PyTuple_GET_ITEM(out, ACTION);
        if (ok == 1 && !launched && PyTuple_Check(action) && PyTuple_GET_SIZE(action) >= 1) {
            int is_launch = PyObject_RichCompareBool(PyTuple_GET_ITEM(action, 0), a->launch, Py_EQ);
            if (is_launch < 0) ok = -1;
            else if (is_launch) {
                launched = 1;
                PyObject *bad = PyObject_CallFunctionObjArgs(a->judge_launch, world, a->policy, NULL);
                int broken = bad == NULL ? -1 : PyObject_IsTrue(bad);
                Py_XDECREF(bad);
                ok = broken < 0 ? -1 : !broken;
            }
        }
    }
    for (Py_ssize_t f = 0; ok == 1 && f < r; f++) { /* then the rules fired */
        Py_ssize_t size = PySet_GET_SIZE(a->fired);
        if (PySet_Add(a->fired, fires[f]) < 0 || (PySet_GET_SIZE(a->fired) > size && PyList_Append(rules, fires[f]) < 0))
            ok = -1;
    }
    for (Py_ssize_t i = 0; ok == 1 && i < n; i++) { /* then the keys, each new world judged */
        PyObject *next = PyTuple_GET_ITEM(PyList_GET_ITEM(outcomes, i), WORLD);
        PyObject *key = a->compiled == Py_None ? Py_NewRef(Py_None) : PyObject_CallOneArg(a->compiled, next);
        if (key == Py_None) Py_SETREF(key, PyObject_CallOneArg(a->keyof, next)); /* the codec's Python packs it */
        if (key == NULL || (keys != NULL && PyList_Append(keys, key) < 0)) { Py_XDECREF(key); ok = -1; break; }
        Py_ssize_t size = PySet_GET_SIZE(a->seen);
        if (PySet_Add(a->seen, key) < 0) {
            ok = -1;
        } else if (PySet_GET_SIZE(a->seen) > size) {
            if (PyList_Append(added, key) < 0 || PyList_Append(level_keys, key) < 0) {
                ok = -1;
            } else {
                PyObject *done = PyObject_CallMethodOneArg(parents, a->append, k);
                PyObject *bad = done == NULL ? NULL : PyObject_CallOneArg(a->judge_world, next);
                int broken = bad == NULL ? -1 : PyObject_IsTrue(bad);
                Py_XDECREF(done);
                Py_XDECREF(bad);
                ok = broken < 0 ? -1 : !broken;
            }
        }
        Py_DECREF(key);
    }
    PyMem_Free(fires);
    PyObject *result = NULL;
    if (ok == 1 && (result = PyLong_FromSsize_t(n)) == NULL) ok = -1;
    if (ok == 1 && a->graph != Py_None && edges(a, outcomes, keys) < 0) { /* raised */
        Py_CLEAR(result);
        ok = -1;
    }
    if (ok != 1) {
        if (added != NULL && rules != NULL && parents_size != NULL)
            undo(a, added, rules, level_keys, level_size, parents, parents_size);
        if (ok == 0 && !PyErr_Occurred()) result = Py_NewRef(Py_None); /* the Python's to do and report */
    }
    Py_XDECREF(added);
    Py_XDECREF(rules);
    Py_XDECREF(parents_size);
    Py_XDECREF(keys);
    return result;
}

static int absorb_init(Absorb *a, PyObject *args, PyObject *kw) {
    PyObject *seen, *judged, *fired, *keyof, *compiled, *judge_world, *judge_launch, *policy;
    PyObject *graph = Py_None, *codes = Py_None, *fair = Py_None;
    if (a->seen != NULL) return PyErr_SetString(PyExc_RuntimeError, "Absorb is bound once"), -1;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOO|OO!O!", &PySet_Type, &seen, &PyDict_Type, &judged, &PySet_Type, &fired,
                          &keyof, &compiled, &judge_world, &judge_launch, &policy, &graph, &PyDict_Type, &codes,
                          &PyFrozenSet_Type, &fair))
        return -1;
    if (graph != Py_None && (codes == Py_None || fair == Py_None))
        return PyErr_SetString(PyExc_TypeError, "a graph comes with its kinds' codes and the fair ones"), -1;
    a->graph = Py_NewRef(graph), a->codes = Py_NewRef(codes), a->fair = Py_NewRef(fair);
    if ((a->launch = PyUnicode_FromString("launch")) == NULL || (a->append = PyUnicode_FromString("append")) == NULL)
        return -1;
    a->compiled = Py_NewRef(compiled);
    a->seen = Py_NewRef(seen), a->judged = Py_NewRef(judged), a->fired = Py_NewRef(fired), a->keyof = Py_NewRef(keyof);
    a->judge_world = Py_NewRef(judge_world), a->judge_launch = Py_NewRef(judge_launch), a->policy = Py_NewRef(policy);
    return 0;
}

static void absorb_dealloc(Absorb *a) {
    Py_XDECREF(a->seen), Py_XDECREF(a->judged), Py_XDECREF(a->fired), Py_XDECREF(a->keyof), Py_XDECREF(a->compiled);
    Py_XDECREF(a->append), Py_XDECREF(a->graph), Py_XDECREF(a->codes), Py_XDECREF(a->fair);
    Py_XDECREF(a->judge_world), Py_XDECREF(a->judge_launch), Py_XDECREF(a->policy), Py_XDECREF(a->launch);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static PyMethodDef absorb_methods[] = {
    {"world", (PyCFunction)(void (*)(void))absorb_world, METH_FASTCALL,
     "world(outcomes, world, k, level_keys, parents): the number of outcomes, or None (the Python's to do)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AbsorbType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "slotwarden.verification.checker._search.Absorb",
    .tp_basicsize = sizeof(Absorb),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One search's tables, bound once for the bookkeeping of its expanded worlds.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)absorb_init,
    .tp_dealloc = (destructor)absorb_dealloc,
    .tp_methods = absorb_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_search", "The checker's bookkeeping of a world.", -1, NULL};

PyMODINIT_FUNC PyInit__search(void) {
    if (PyType_Ready(&AbsorbType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObject(m, "Absorb", Py_NewRef((PyObject *)&AbsorbType)) < 0) {
        Py_DECREF(&AbsorbType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
