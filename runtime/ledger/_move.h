/* What the ledger's compiled move (`_move.c`) and its guard lane (`_lane.c`) share: the `Mover`
 * (a ledger's columns and compiled tables), the key's layout and the move itself. */
#ifndef SLOTWARDEN_MOVE_H
#define SLOTWARDEN_MOVE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { SOURCES = 7, FIELDS = 4, MAX_EVENTS = 32, MIXED = 1 << 16, ASK_WITH_STATES = 1 << 17 };

/* A batch's ids cut into runs of consecutive slots: at most RUNS_MAX runs are taken as runs
 * (each moved through contiguous memory), more take the slot-at-a-time loop. */
enum { RUNS_MAX = 16 };

/* The key's bit layout and the record's limits, as `kernels.transition` and the model define them:
 * compile-time constants here (the loops are short), checked against the layout handed in when a
 * `Mover` is built, which refuses any other. */
#define K_BITS 32
#define K_OWN 16
#define K_BOR 8
#define K_DUE 4
#define K_IDLE 2
#define K_FULL 1
#define K_MAX_READERS 255
#define K_NOBODY (-1)
#define K_ILLEGAL 255

typedef struct {
    PyObject_HEAD
    Py_buffer cols[7]; /* state, last_event, owner, borrower, fence, readers, stamp */
    Py_buffer tables;  /* uint8 [events][5][keys]: next state, owner, borrower, fence, readers sources */
    Py_buffer probes;  /* uint8 [events][states]: the relation bits each event reads of a state */
    int held;          /* how many of the buffers above are held */
    uint8_t *state, *last, *readers;
    int64_t *owner, *borrower;
    int32_t *fence, *stamp;
    Py_ssize_t capacity, events, states, keys;
    long bits, own, bor, due, idle, full, max_readers, illegal;
    int64_t nobody;
    Py_ssize_t state_step, last_step; /* the state and last event may be the two bytes of one 16-bit word */
    int src[SOURCES]; /* KEEP, ACTOR, TARGET, EPOCH, CLEAR, INC, DEC as the model numbers them */
    uint8_t *from;    /* per event, key and field: its source in the kernel's numbering (below) */
    int32_t mark;     /* the duplicate mark the last call used (see `move`) */
    int runs;         /* the most runs a batch may make to be moved a run at a time (the tests set 0) */
    int gather;       /* whether scattered slots by one actor are checked a column at a time (the tests set 0) */
    int word;         /* whether state and last event are the two bytes of one 16-bit word, state first */
    int64_t run_lo, run_hi; /* the last move's ids, when they were one run lo..hi - 1 (else lo == hi) */
} Mover;

long move_ids(Mover *m, long event, const int64_t *ids_in, Py_ssize_t n, int64_t one_actor,
              const int64_t *actors_in, int64_t target, int64_t epoch, uint8_t *before_in, uint8_t *after_in,
              int64_t *keys_in, int write, int dup, PyObject *give, PyObject *given, long when, int *failed);

extern PyTypeObject MoverType, LaneType, LedgerLaneType;
int lane_ready(void);        /* interns the guard lane's names and readies its type */
int ledger_lane_ready(void); /* the same for the ledger's lane (`_ledger_lane.c`) */

/* Shared by the two lanes (`_lane.c`): */
int is_int64(const Py_buffer *view);                                   /* an int64 buffer? */
int overlaps_columns(const Mover *m, const void *p, Py_ssize_t len);   /* lies in a column the move writes? */
int64_t attr_int(PyObject *obj, PyObject *name, int *failed);          /* an int attribute (sets *failed) */
PyObject *kept_ids(const Mover *m, const int64_t *ids, Py_ssize_t n);  /* the record's ids: range or bytes */
int ledger_mark(PyObject *ledger, long event, PyObject **was);         /* the write's mark on; old in *was */
int ledger_unmark(PyObject *ledger, PyObject *was);                    /* the thread field back (steals was) */
long actor_kind(PyObject *actor_type, PyObject *kinds, PyObject *actor, int64_t *id); /* -1: not the usual */
int owns_ledger(PyObject *ledger);                         /* the calling thread holds it (not a write's mark) */
int same_mover(PyObject *ledger, const Mover *mover);      /* its compiled move is still `mover` */
int record_move(PyObject *ledger, PyObject *record_func, PyObject *event, PyObject *actor, PyObject *target,
                int64_t epoch, PyObject *raw, long code); /* the record of a one-state move (kernel's code) */
int record_batch(PyObject *ledger, PyObject *record_func, PyObject *event, PyObject *actor, PyObject *target,
                 PyObject *epoch, PyObject *raw, PyObject *before, PyObject *after); /* the flight record */

#endif
