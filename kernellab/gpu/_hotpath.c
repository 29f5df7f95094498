/* kernellab.gpu._hotpath: the recorder's hot path, compiled.

   What `hooks` and `timeline` do on every hooked launch and copy, in C: the hook that hands a call
   to its sole Bracket (`CopyHook`, `LaunchHook`), the trace-only note (`Noter.note`) and the timed
   recorder's two halves (`Recorder.start`, `Recorder.end`). Each does exactly what the Python
   version beside it does (hooks._hooked_copy's `hooked`, hooks' `dispatch`, Timeline._noting,
   Timeline._timing_brackets), on the same Python containers, which the rest of kernellab reads as
   before; tests/instruments run the timeline's and the hooks' tests on both.

   Why: on the lent H200's host each line of Python on this path cost ~0.1-0.2 us (2026-12-04), and
   the hook, the note and the bookkeeping of a recorder that times each op with an event came to
   +5.4 us per copy over its one cuEventRecord; `kernellab bench 07` judges the recorder at most
   1 us per op over that event (docs/measuring.md, Lab 07). Anything a call does not fit (other arguments, several subscriptions, a
   capture) goes to the Python version, which handles every case.

   Built by `pip install` where a C compiler and Python's headers are present (setup.py: optional);
   without it kernellab uses the Python versions, and `kernellab bench 07` says which one it ran. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef int (*record_fn)(void *event, void *stream);   /* cuEventRecord(CUevent, CUstream) -> CUresult */

static PyObject *partial_type;   /* functools.partial: a launch's `before` is partial(start, "kernel") */
static PyObject *s_busy, *s_nbytes, *s_stream, *s_copy_to_host, *s_py_func, *s_name, *s_griddim,
    *s_blockdim, *s_d2h, *s_h2d, *s_d2d, *zero;

/* time.perf_counter() as CPython computes it on Linux (clock_gettime(CLOCK_MONOTONIC), in ns, then
   seconds); `clock` given (a Python callable): that instead (the tests' fake clock). */
static PyObject *read_clock(PyObject *clock)
{
    if (clock != NULL && clock != Py_None)
        return PyObject_CallNoArgs(clock);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return PyFloat_FromDouble((double)ns / 1e9);
}

/* getattr(obj, name, fallback): a new reference, or NULL with an error set (or, where `fallback` is
   NULL, with none: no such attribute). */
#if PY_VERSION_HEX >= 0x030D0000
#define lookup_attr PyObject_GetOptionalAttr
#else
#define lookup_attr _PyObject_LookupAttr   /* no AttributeError made for a missing attribute */
#endif

static PyObject *attr_or(PyObject *obj, PyObject *name, PyObject *fallback)
{
    PyObject *value;
    int found = lookup_attr(obj, name, &value);
    if (found < 0)
        return NULL;
    if (found == 0) {
        Py_XINCREF(fallback);
        return fallback;
    }
    return value;
}

/* The stream's key, as Timeline's hot path finds it: its `_StreamKeys` entry (id -> (key, stream)),
   or remember(stream). A new reference. */
static PyObject *stream_key(PyObject *keys, PyObject *remember, PyObject *stream)
{
    PyObject *id = PyLong_FromVoidPtr(stream);
    if (id == NULL)
        return NULL;
    PyObject *known = PyDict_GetItemWithError(keys, id);   /* borrowed */
    Py_DECREF(id);
    if (known != NULL && PyTuple_Check(known) && PyTuple_GET_SIZE(known) > 0) {
        PyObject *key = PyTuple_GET_ITEM(known, 0);
        Py_INCREF(key);
        return key;
    }
    if (PyErr_Occurred())
        return NULL;
    return PyObject_CallOneArg(remember, stream);
}

/* stream_key, remembering the last stream's: a stream's key never changes, and `last_stream` is held,
   so no other object can take its address while it is remembered. A new reference. */
static PyObject *cached_key(PyObject **last_stream, PyObject **last_key, PyObject *keys, PyObject *remember,
                            PyObject *stream)
{
    if (stream == *last_stream && *last_key != NULL) {
        Py_INCREF(*last_key);
        return *last_key;
    }
    PyObject *key = stream_key(keys, remember, stream);
    if (key == NULL)
        return NULL;
    Py_INCREF(stream);
    Py_XSETREF(*last_stream, stream);
    Py_INCREF(key);
    Py_XSETREF(*last_key, key);
    return key;
}

/* Note (kind, what, key, host seconds, dims) at the end of `submitted`; returns its index, or -1. */
static Py_ssize_t note_op(PyObject *submitted, PyObject *clock, PyObject *kind, PyObject *what,
                          PyObject *key, PyObject *dims)
{
    Py_ssize_t index = PyList_GET_SIZE(submitted);
    PyObject *seconds = read_clock(clock);
    if (seconds == NULL)
        return -1;
    PyObject *entry = PyTuple_Pack(5, kind, what, key, seconds, dims);
    Py_DECREF(seconds);
    if (entry == NULL)
        return -1;
    int failed = PyList_Append(submitted, entry);
    Py_DECREF(entry);
    return failed ? -1 : index;
}

/* (kind, what, stream[, dims[, captured]]), positional only: what a Bracket's `before` is given. */
static int op_arguments(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *name,
                        PyObject **dims, PyObject **captured)
{
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_Format(PyExc_TypeError, "%s() takes its arguments by position", name);
        return -1;
    }
    if (nargs < 3 || nargs > 5) {
        PyErr_Format(PyExc_TypeError, "%s(kind, what, stream, dims=None, captured=False): %zd arguments given",
                     name, nargs);
        return -1;
    }
    *dims = nargs > 3 ? args[3] : Py_None;
    *captured = nargs > 4 ? args[4] : Py_False;
    return 0;
}

/* A type's object fields, declared one after another from `first` to `last`: what its traverse,
   clear and dealloc walk. */
#define OBJECTS(T, first, last)                                                                   \
    (PyObject **)((char *)self + offsetof(T, first)),                                            \
        ((offsetof(T, last) - offsetof(T, first)) / sizeof(PyObject *) + 1)

static int visit_objects(PyObject **objects, size_t n, visitproc visit, void *arg)
{
    for (size_t i = 0; i < n; i++)
        Py_VISIT(objects[i]);
    return 0;
}

static int clear_objects(PyObject **objects, size_t n)
{
    for (size_t i = 0; i < n; i++)
        Py_CLEAR(objects[i]);
    return 0;
}

static void hold_objects(PyObject **objects, size_t n)
{
    for (size_t i = 0; i < n; i++)
        Py_XINCREF(objects[i]);
}

/* After a failed parse: what it wrote there is borrowed, not held. */
static int forget_objects(PyObject **objects, size_t n)
{
    for (size_t i = 0; i < n; i++)
        objects[i] = NULL;
    return -1;
}

static void dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_TYPE(self)->tp_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* --- Noter: the trace-only hot path (Timeline._noting) ------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *submitted, *keys, *remember, *clock, *last_stream, *last_key;
} Noter;

static int noter_init(Noter *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"submitted", "keys", "remember", "clock", NULL};
    PyObject *clock = Py_None;
    clear_objects(OBJECTS(Noter, submitted, last_key));   /* a second __init__ lets the first one's go */
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O|O", names, &PyList_Type, &self->submitted,
                                     &PyDict_Type, &self->keys, &self->remember, &clock))
        return forget_objects(OBJECTS(Noter, submitted, clock));
    self->clock = clock;
    hold_objects(OBJECTS(Noter, submitted, clock));
    return 0;
}

/* The note, for the method and for a hook that calls it directly: 0, or -1 with an error set. */
static int noter_add(Noter *self, PyObject *kind, PyObject *what, PyObject *stream, PyObject *dims)
{
    PyObject *key = cached_key(&self->last_stream, &self->last_key, self->keys, self->remember, stream);
    if (key == NULL)
        return -1;
    Py_ssize_t index = note_op(self->submitted, self->clock, kind, what, key, dims);
    Py_DECREF(key);
    return index < 0 ? -1 : 0;
}

static PyObject *noter_note(Noter *self, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *dims, *captured;
    if (op_arguments(args, nargs, kwnames, "note", &dims, &captured) < 0)
        return NULL;
    if (noter_add(self, args[0], args[1], args[2], dims) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int noter_traverse(Noter *self, visitproc visit, void *arg)
{
    return visit_objects(OBJECTS(Noter, submitted, last_key), visit, arg);
}

static int noter_clear(Noter *self)
{
    return clear_objects(OBJECTS(Noter, submitted, last_key));
}

static PyMethodDef noter_methods[] = {
    {"note", (PyCFunction)(void (*)(void))noter_note, METH_FASTCALL | METH_KEYWORDS,
     "note(kind, what, stream, dims=None, captured=False): the op noted, nothing else"},
    {NULL},
};

static PyTypeObject NoterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kernellab.gpu._hotpath.Noter",
    .tp_basicsize = sizeof(Noter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Noter(submitted, keys, remember, clock=None): Timeline._noting's note, compiled",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)noter_init,
    .tp_dealloc = dealloc,
    .tp_traverse = (traverseproc)noter_traverse,
    .tp_clear = (inquiry)noter_clear,
    .tp_methods = noter_methods,
};

/* --- Recorder: the timed hot path (Timeline._timing_brackets) ----------------------------------- */

/* An op the recorder has noted and not yet handed to the Python containers (see `flush`): what
   `submitted`, `own_starts`, `ends` and `returned` get for it, held here as plain C values where
   they are numbers. On the H200's host the tuple, floats, index and two dict entries a timed op
   made on the hot path cost ~1.2 us per op over its note (2026-12-04); here they are made
   once per op when the data are read, not while the measured code submits its work. */
typedef struct {
    PyObject *kind, *what, *key, *dims;   /* held */
    PyObject *own_start, *end;            /* (event, handle), held; NULL: none */
    PyObject *submitted_at, *returned_at; /* a given clock's readings, held; NULL: the ns below */
    int64_t submitted_ns, returned_ns;    /* returned_ns < 0: not noted */
} LoggedOp;

typedef struct {
    PyObject_HEAD
    PyObject *submitted, *keys, *remember, *clock, *ready, *special, *timing, *spare, *new_event,
        *ends, *own_starts, *returned, *record, *last_stream, *last_key, *last_kind;
    record_fn record_native;   /* the driver's cuEventRecord, where `record` is its address (an int) */
    int inferring, last_special, last_timed;   /* last_*: the last stream's key and kind, remembered */
    LoggedOp *log;
    Py_ssize_t logged, log_room;   /* ops in the log, not yet in `submitted` */
} Recorder;

static int recorder_init(Recorder *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"submitted", "keys", "remember", "ready", "special", "timing", "spare",
                            "new_event", "ends", "own_starts", "returned", "record", "inferring",
                            "clock", NULL};
    PyObject *clock = Py_None;
    if (self->logged > 0) {
        PyErr_SetString(PyExc_RuntimeError, "Recorder.__init__: flush() the ops it holds first");
        return -1;
    }
    clear_objects(OBJECTS(Recorder, submitted, last_kind));
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!OO!O!OO!OO!O!O!Op|O", names,
                                     &PyList_Type, &self->submitted, &PyDict_Type, &self->keys,
                                     &self->remember, &PyDict_Type, &self->ready, &PyDict_Type,
                                     &self->special, &self->timing, &PyList_Type, &self->spare,
                                     &self->new_event, &PyDict_Type, &self->ends, &PyDict_Type,
                                     &self->own_starts, &PyDict_Type, &self->returned, &self->record,
                                     &self->inferring, &clock))
        return forget_objects(OBJECTS(Recorder, submitted, record));
    self->clock = clock;
    hold_objects(OBJECTS(Recorder, submitted, record));
    self->record_native = NULL;
    if (PyLong_Check(self->record)) {   /* the driver function's address */
        void *address = PyLong_AsVoidPtr(self->record);
        if (address == NULL)
            return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_ValueError, "record: a null address"), -1);
        self->record_native = (record_fn)address;
    }
    return 0;
}

/* A spare (event, handle) from the pool's end, or new_event(): a new reference. */
static PyObject *take_event(Recorder *self)
{
    Py_ssize_t n = PyList_GET_SIZE(self->spare);
    if (n == 0)
        return PyObject_CallNoArgs(self->new_event);
    PyObject *event = PyList_GET_ITEM(self->spare, n - 1);   /* the list's reference, now ours */
    Py_SET_SIZE(self->spare, n - 1);                           /* as list.pop() leaves it */
    return event;
}

/* Record the event (event, handle) on the stream whose key (its handle) is `key`. */
static int record_event(Recorder *self, PyObject *event, PyObject *key)
{
    if (!PyTuple_Check(event) || PyTuple_GET_SIZE(event) < 2) {
        PyErr_SetString(PyExc_TypeError, "a pooled event is (event, handle)");
        return -1;
    }
    PyObject *handle = PyTuple_GET_ITEM(event, 1);
    long result;
    if (self->record_native != NULL) {
        void *event_handle = PyLong_AsVoidPtr(handle);
        if (event_handle == NULL && PyErr_Occurred())
            return -1;
        void *stream_handle = PyLong_AsVoidPtr(key);
        if (stream_handle == NULL && PyErr_Occurred())
            return -1;
        result = self->record_native(event_handle, stream_handle);
    } else {
        PyObject *answer = PyObject_CallFunctionObjArgs(self->record, handle, key, NULL);
        if (answer == NULL)
            return -1;
        result = PyLong_AsLong(answer);
        Py_DECREF(answer);
        if (result == -1 && PyErr_Occurred())
            return -1;
    }
    if (result != 0) {
        PyErr_Format(PyExc_RuntimeError, "cuEventRecord failed (CUresult %ld) on stream handle %R", result, key);
        return -1;
    }
    return 0;
}

/* ready.pop(key, None) */
static int forget_ready(PyObject *ready, PyObject *key)
{
    if (PyDict_DelItem(ready, key) == 0)
        return 0;
    if (!PyErr_ExceptionMatches(PyExc_KeyError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* The log's next free entry, grown as needed; NULL with an error set. */
static LoggedOp *log_slot(Recorder *self)
{
    if (self->logged == self->log_room) {
        Py_ssize_t room = self->log_room ? 2 * self->log_room : 256;
        LoggedOp *grown = PyMem_Realloc(self->log, room * sizeof *grown);
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        self->log = grown;
        self->log_room = room;
    }
    LoggedOp *op = &self->log[self->logged];
    memset(op, 0, sizeof *op);
    op->returned_ns = -1;
    return op;
}

/* A reading of the clock into (ns, NULL), or, with a given clock, (0, its reading): 0, or -1. */
static int read_clock_into(PyObject *clock, int64_t *ns, PyObject **reading)
{
    if (clock != NULL && clock != Py_None) {
        *ns = 0;
        *reading = PyObject_CallNoArgs(clock);
        return *reading == NULL ? -1 : 0;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return 0;
}

/* What read_clock would have returned then: a new reference. */
static PyObject *clock_reading(int64_t ns, PyObject *reading)
{
    if (reading != NULL)
        return Py_NewRef(reading);
    return PyFloat_FromDouble((double)ns / 1e9);
}

static void release_logged(LoggedOp *op)
{
    Py_CLEAR(op->kind);
    Py_CLEAR(op->what);
    Py_CLEAR(op->key);
    Py_CLEAR(op->dims);
    Py_CLEAR(op->own_start);
    Py_CLEAR(op->end);
    Py_CLEAR(op->submitted_at);
    Py_CLEAR(op->returned_at);
}

/* Hand the logged ops to the Python containers, in order: each its entry at the end of `submitted`
   (kind, what, key, host seconds, dims), its start event in own_starts and its end event in ends
   (by index), and when its submission returned in `returned`. 0, or -1 with an error set (the ops
   not handed over stay in the log). */
static int recorder_flush_log(Recorder *self)
{
    Py_ssize_t done = 0;
    int failed = 0;
    for (; done < self->logged && !failed; done++) {
        LoggedOp *op = &self->log[done];
        PyObject *index = PyLong_FromSsize_t(PyList_GET_SIZE(self->submitted));
        PyObject *seconds = clock_reading(op->submitted_ns, op->submitted_at);
        PyObject *entry = index && seconds ? PyTuple_Pack(5, op->kind, op->what, op->key, seconds, op->dims) : NULL;
        failed = entry == NULL || PyList_Append(self->submitted, entry) < 0 ||
                 (op->own_start && PyDict_SetItem(self->own_starts, index, op->own_start) < 0) ||
                 (op->end && PyDict_SetItem(self->ends, index, op->end) < 0);
        if (!failed && op->returned_ns >= 0) {
            PyObject *returned = clock_reading(op->returned_ns, op->returned_at);
            failed = returned == NULL || PyDict_SetItem(self->returned, index, returned) < 0;
            Py_XDECREF(returned);
        }
        Py_XDECREF(entry);
        Py_XDECREF(seconds);
        Py_XDECREF(index);
        release_logged(op);
    }
    memmove(self->log, self->log + done, (self->logged - done) * sizeof *self->log);
    self->logged -= done;
    return failed ? -1 : 0;
}

/* start, for the method and for a hook that calls it directly: the op logged; its index (its place
   in `submitted` once handed over, what `end` takes), -1 if it is not timed, or -2 with an error set. */
static Py_ssize_t recorder_begin(Recorder *self, PyObject *kind, PyObject *what, PyObject *stream, PyObject *dims,
                                 PyObject *captured)
{
    if (stream != self->last_stream || self->last_key == NULL) {   /* cached_key's cache, with whether it is special */
        PyObject *found = stream_key(self->keys, self->remember, stream);
        if (found == NULL)
            return -2;
        int is_special = PyDict_Contains(self->special, found);
        if (is_special < 0) {
            Py_DECREF(found);
            return -2;
        }
        Py_INCREF(stream);
        Py_XSETREF(self->last_stream, stream);
        Py_XSETREF(self->last_key, found);
        self->last_special = is_special;
    }
    PyObject *key = self->last_key;   /* borrowed: the cache holds it, and the log entry below */
    int special = self->last_special;
    if (kind != self->last_kind) {
        int timed = PySequence_Contains(self->timing, kind);
        if (timed < 0)
            return -2;
        Py_INCREF(kind);
        Py_XSETREF(self->last_kind, kind);
        self->last_timed = timed;
    }
    int is_captured = captured == Py_False ? 0 : PyObject_IsTrue(captured);
    if (is_captured < 0)
        return -2;
    LoggedOp *op = log_slot(self);
    if (op == NULL || read_clock_into(self->clock, &op->submitted_ns, &op->submitted_at) < 0)
        return -2;
    op->kind = Py_NewRef(kind);
    op->what = Py_NewRef(what);
    op->key = Py_NewRef(key);
    op->dims = Py_NewRef(dims);
    Py_ssize_t index = PyList_GET_SIZE(self->submitted) + self->logged++;
    if (is_captured || !self->last_timed) {   /* not timed: the op after it on its stream gets a start event of its own */
        if (PyDict_GET_SIZE(self->ready) > 0) {
            if (special)
                PyDict_Clear(self->ready);
            else if (forget_ready(self->ready, key) < 0)
                return -2;
        }
        return -1;
    }
    int ready = PyDict_Contains(self->ready, key);
    if (ready < 0)
        return -2;
    if (!ready) {
        PyObject *started = take_event(self);
        if (started == NULL)
            return -2;
        op->own_start = started;
        if (record_event(self, started, key) < 0)
            return -2;
        if (self->inferring) {
            if (special)   /* the default streams wait for the others, and they for them */
                PyDict_Clear(self->ready);
            else if (PyDict_SetItem(self->ready, key, Py_True) < 0)
                return -2;
        }
    }
    return index;
}

/* end, for an op still in the log (`at`: its place there): its end event recorded, and when starts
   are inferred, when its submission returned. 0, or -1 with an error set. */
static int recorder_finish_logged(Recorder *self, Py_ssize_t at)
{
    LoggedOp *op = &self->log[at];
    PyObject *ended = take_event(self);
    if (ended == NULL)
        return -1;
    op->end = ended;
    if (record_event(self, ended, op->key) < 0)
        return -1;
    if (self->inferring && read_clock_into(self->clock, &op->returned_ns, &op->returned_at) < 0)
        return -1;
    return 0;
}

/* end for an op already handed to the Python containers (`index`: its place in `submitted`). */
static int recorder_finish_flushed(Recorder *self, PyObject *index)
{
    Py_ssize_t at = PyLong_AsSsize_t(index);
    if (at == -1 && PyErr_Occurred())
        return -1;
    PyObject *entry = PyList_GetItem(self->submitted, at);   /* borrowed */
    if (entry == NULL)
        return -1;
    PyObject *ended = take_event(self);
    if (ended == NULL)
        return -1;
    int failed = PyDict_SetItem(self->ends, index, ended) < 0 ||
                 record_event(self, ended, PyTuple_GET_ITEM(entry, 2)) < 0;
    Py_DECREF(ended);
    if (failed)
        return -1;
    if (self->inferring) {
        PyObject *seconds = read_clock(self->clock);
        if (seconds == NULL)
            return -1;
        failed = PyDict_SetItem(self->returned, index, seconds) < 0;
        Py_DECREF(seconds);
        if (failed)
            return -1;
    }
    return 0;
}

/* end: the op `index` (what begin gave), in the log or, if flushed since, in the Python containers. */
static int recorder_finish(Recorder *self, Py_ssize_t index)
{
    Py_ssize_t at = index - PyList_GET_SIZE(self->submitted);
    if (at >= 0 && at < self->logged)
        return recorder_finish_logged(self, at);
    PyObject *number = PyLong_FromSsize_t(index);
    if (number == NULL)
        return -1;
    int failed = recorder_finish_flushed(self, number);
    Py_DECREF(number);
    return failed;
}

static PyObject *recorder_start(Recorder *self, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames)
{
    PyObject *dims, *captured;
    if (op_arguments(args, PyVectorcall_NARGS(nargsf), kwnames, "start", &dims, &captured) < 0)
        return NULL;
    Py_ssize_t index = recorder_begin(self, args[0], args[1], args[2], dims, captured);
    if (index == -2)
        return NULL;
    if (index == -1)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(index);
}

static PyObject *recorder_end(Recorder *self, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)) {
        PyErr_SetString(PyExc_TypeError, "end(index) takes one argument, by position");
        return NULL;
    }
    if (args[0] == Py_None)
        Py_RETURN_NONE;
    Py_ssize_t index = PyLong_AsSsize_t(args[0]);
    if (index == -1 && PyErr_Occurred())
        return NULL;
    if (recorder_finish(self, index) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *recorder_flush(Recorder *self, PyObject *unused)
{
    if (recorder_flush_log(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int recorder_traverse(Recorder *self, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < self->logged; i++) {
        LoggedOp *op = &self->log[i];
        Py_VISIT(op->kind);
        Py_VISIT(op->what);
        Py_VISIT(op->key);
        Py_VISIT(op->dims);
        Py_VISIT(op->own_start);
        Py_VISIT(op->end);
        Py_VISIT(op->submitted_at);
        Py_VISIT(op->returned_at);
    }
    return visit_objects(OBJECTS(Recorder, submitted, last_kind), visit, arg);
}

static int recorder_clear(Recorder *self)
{
    for (Py_ssize_t i = 0; i < self->logged; i++)
        release_logged(&self->log[i]);
    self->logged = 0;
    return clear_objects(OBJECTS(Recorder, submitted, last_kind));
}

static void recorder_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    recorder_clear((Recorder *)self);
    PyMem_Free(((Recorder *)self)->log);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef recorder_methods[] = {
    {"start", (PyCFunction)(void (*)(void))recorder_start, METH_FASTCALL | METH_KEYWORDS,
     "start(kind, what, stream, dims=None, captured=False) -> the op's index, or None if not timed"},
    {"end", (PyCFunction)(void (*)(void))recorder_end, METH_FASTCALL | METH_KEYWORDS,
     "end(index): the op's end event recorded"},
    {"flush", (PyCFunction)recorder_flush, METH_NOARGS,
     "flush(): the ops noted since the last flush handed to submitted, own_starts, ends and returned, in order"},
    {NULL},
};

static PyTypeObject RecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kernellab.gpu._hotpath.Recorder",
    .tp_basicsize = sizeof(Recorder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Recorder(...): Timeline._timing_brackets' start and end, compiled (flush() before reading what they filled)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)recorder_init,
    .tp_dealloc = recorder_dealloc,
    .tp_traverse = (traverseproc)recorder_traverse,
    .tp_clear = (inquiry)recorder_clear,
    .tp_methods = recorder_methods,
};

/* --- BusyFlag: a subscription's busy flag, per thread (hooks._BusyFlag's) ----------------------- */

/* The threads it is set on, by PyThread_get_thread_ident (one, nearly always): what `busy` reads
   and writes from Python, and the hooks directly, with no thread-local dictionary to look in. */
typedef struct {
    PyObject_HEAD
    unsigned long *threads, few[4];
    Py_ssize_t count, room;
} BusyFlag;

static Py_ssize_t flag_find(BusyFlag *self, unsigned long thread)
{
    for (Py_ssize_t i = 0; i < self->count; i++)
        if (self->threads[i] == thread)
            return i;
    return -1;
}

static int flag_is_set(BusyFlag *self)
{
    return self->count > 0 && flag_find(self, PyThread_get_thread_ident()) >= 0;
}

static int flag_set(BusyFlag *self, int on)
{
    unsigned long thread = PyThread_get_thread_ident();
    Py_ssize_t at = flag_find(self, thread);
    if (!on) {
        if (at >= 0)
            self->threads[at] = self->threads[--self->count];
        return 0;
    }
    if (at >= 0)
        return 0;
    if (self->count == self->room) {
        Py_ssize_t room = 2 * self->room;
        unsigned long *more = PyMem_Malloc(room * sizeof *more);
        if (more == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(more, self->threads, self->count * sizeof *more);
        if (self->threads != self->few)
            PyMem_Free(self->threads);
        self->threads = more;
        self->room = room;
    }
    self->threads[self->count++] = thread;
    return 0;
}

static PyObject *flag_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) > 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) > 0)) {
        PyErr_SetString(PyExc_TypeError, "BusyFlag() takes no arguments");
        return NULL;
    }
    BusyFlag *self = (BusyFlag *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->threads = self->few;
    self->room = sizeof self->few / sizeof *self->few;
    return (PyObject *)self;
}

static void flag_dealloc(BusyFlag *self)
{
    if (self->threads != self->few)
        PyMem_Free(self->threads);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *flag_get_busy(BusyFlag *self, void *closure)
{
    return PyBool_FromLong(flag_is_set(self));
}

static int flag_set_busy(BusyFlag *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "busy: set it False, not deleted");
        return -1;
    }
    int on = PyObject_IsTrue(value);
    return on < 0 ? -1 : flag_set(self, on);
}

static PyGetSetDef flag_getset[] = {
    {"busy", (getter)flag_get_busy, (setter)flag_set_busy, "whether it is set on this thread"},
    {NULL},
};

static PyTypeObject BusyFlagType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kernellab.gpu._hotpath.BusyFlag",
    .tp_basicsize = sizeof(BusyFlag),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "BusyFlag(): hooks._BusyFlag, per thread, read by the compiled hooks directly",
    .tp_new = flag_new,
    .tp_dealloc = (destructor)flag_dealloc,
    .tp_getset = flag_getset,
};

/* --- the hooks: a call handed to its sole Bracket (hooks._hooked_copy, hooks' dispatch) --------- */

/* Both hooks: numba-cuda's original, the Python hook that handles every other case, and `sole`:
   (busy flag, before, after) while one subscription handles the call with a Bracket, else None. */
/* Where the sole Bracket's halves are a compiled Timeline's own (a Recorder's start and end, a
   Noter's note, with a launch's kind bound first by functools.partial), the hook calls them in C
   (`fast`, `fast_kind`, and the kind a launch's `before` binds, `fast_prefix`): no bound method, no
   arguments parsed, no token handed back through Python. */
enum { FAST_NONE, FAST_RECORDER, FAST_NOTER };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *original, *fallback, *sole, *ary_default, *fast, *fast_prefix;
    int to_host, copy, fast_kind;
} Hook;

static PyObject *call3(PyObject *callable, PyObject *a, PyObject *b, PyObject *c)
{
    PyObject *args[3] = {a, b, c};
    return PyObject_Vectorcall(callable, args, 3, NULL);
}

/* after(token) where there is an after; steals `result`, returns it, or NULL if after raised. */
static PyObject *then_after(PyObject *after, PyObject *token, PyObject *result)
{
    if (result == NULL || after == Py_None)
        return result;
    PyObject *done = PyObject_CallOneArg(after, token);
    if (done == NULL) {
        Py_DECREF(result);
        return NULL;
    }
    Py_DECREF(done);
    return result;
}

static int unpack_sole(PyObject *sole, PyObject **local, PyObject **before, PyObject **after)
{
    if (!PyTuple_Check(sole) || PyTuple_GET_SIZE(sole) != 3) {
        PyErr_SetString(PyExc_TypeError, "a hook's sole is (busy flag, before, after)");
        return -1;
    }
    *local = PyTuple_GET_ITEM(sole, 0);
    *before = PyTuple_GET_ITEM(sole, 1);
    *after = PyTuple_GET_ITEM(sole, 2);
    return 0;
}

static int is_busy(PyObject *local)
{
    if (Py_IS_TYPE(local, &BusyFlagType))
        return flag_is_set((BusyFlag *)local);
    PyObject *busy = PyObject_GetAttr(local, s_busy);
    if (busy == NULL)
        return -1;
    int truth = PyObject_IsTrue(busy);
    Py_DECREF(busy);
    return truth;
}

static int set_busy(PyObject *local, int on)
{
    if (Py_IS_TYPE(local, &BusyFlagType))
        return flag_set((BusyFlag *)local, on);
    return PyObject_SetAttr(local, s_busy, on ? Py_True : Py_False);
}

/* The original call between the sole Bracket's halves: before(*described), the call, then
   after(token) unless the call raised; in C where the halves are a compiled Timeline's (`fast`).
   A new reference, or NULL with an error set. */
static PyObject *bracketed(PyObject *original, PyObject *const *call, PyObject *before, PyObject *after,
                           PyObject *fast, int fast_kind, PyObject *const *described, Py_ssize_t n)
{
    PyObject *kind = described[0], *what = described[1], *on = described[2];
    PyObject *dims = n > 3 ? described[3] : Py_None, *captured = n > 4 ? described[4] : Py_False;
    if (fast_kind == FAST_NOTER) {
        if (noter_add((Noter *)fast, kind, what, on, dims) < 0)
            return NULL;
        return call3(original, call[0], call[1], call[2]);
    }
    if (fast_kind == FAST_RECORDER) {
        Py_ssize_t index = recorder_begin((Recorder *)fast, kind, what, on, dims, captured);
        if (index == -2)
            return NULL;
        PyObject *result = call3(original, call[0], call[1], call[2]);
        if (result != NULL && index >= 0 && recorder_finish((Recorder *)fast, index) < 0)
            Py_CLEAR(result);
        return result;
    }
    PyObject *token = PyObject_Vectorcall(before, described, n, NULL);
    if (token == NULL)
        return NULL;
    PyObject *result = then_after(after, token, call3(original, call[0], call[1], call[2]));
    Py_DECREF(token);
    return result;
}

/* copy_to_device(self, ary, stream=0) / copy_to_host(self, ary=None, stream=0) */
static PyObject *copy_hook_call(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nnamed = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (self->sole == Py_None || nargs < 1 || nargs + nnamed > 3)
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    PyObject *array = args[0], *ary = nargs > 1 ? args[1] : self->ary_default;
    PyObject *stream = nargs > 2 ? args[2] : zero;
    for (Py_ssize_t i = 0; i < nnamed; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (nargs < 3 && PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "stream") == 0)
            stream = args[nargs + i];
        else if (nargs < 2 && PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "ary") == 0)
            ary = args[nargs + i];
        else
            return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    }
    if (!self->to_host && ary == self->ary_default)   /* copy_to_device needs its ary: numba's own error */
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    PyObject *local, *before, *after;
    if (unpack_sole(self->sole, &local, &before, &after) < 0)
        return NULL;
    Py_INCREF(self->sole);   /* the subscription may close while the copy runs */
    PyObject *sole = self->sole, *result = NULL, *nbytes = NULL, *on = NULL, *fast = self->fast;
    int fast_kind = self->fast_kind;
    Py_XINCREF(fast);
    int busy = is_busy(local);
    if (busy < 0)
        goto done;
    if (busy) {
        result = call3(self->original, array, ary, stream);
        goto done;
    }
    int given = PyObject_IsTrue(stream);   /* `stream or getattr(array, "stream", 0)` */
    if (given < 0)
        goto done;
    on = given ? (Py_INCREF(stream), stream) : attr_or(array, s_stream, zero);
    if (on == NULL)
        goto done;
    PyObject *kind;
    if (self->to_host) {
        kind = s_d2h;
        nbytes = attr_or(array, s_nbytes, zero);
    } else {
        PyObject *method = attr_or(ary, s_copy_to_host, NULL);   /* hasattr(ary, "copy_to_host") */
        if (method == NULL && PyErr_Occurred())
            goto done;
        kind = method != NULL ? s_d2d : s_h2d;
        Py_XDECREF(method);
        nbytes = attr_or(ary, s_nbytes, zero);
    }
    if (nbytes == NULL)
        goto done;
    PyObject *call[3] = {array, ary, stream}, *described[3] = {kind, nbytes, on};
    result = bracketed(self->original, call, before, after, fast, fast_kind, described, 3);
done:
    Py_XDECREF(on);
    Py_XDECREF(nbytes);
    Py_XDECREF(fast);
    Py_DECREF(sole);
    return result;
}

/* CUDADispatcher.call(dispatcher, args, launch_config), with the subscription busy meanwhile */
static PyObject *launch_hook_call(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->sole == Py_None || nargs != 3 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0))
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    PyObject *local, *before, *after;
    if (unpack_sole(self->sole, &local, &before, &after) < 0)
        return NULL;
    Py_INCREF(self->sole);   /* the subscription may close while the launch runs */
    PyObject *sole = self->sole, *result = NULL, *name = NULL, *on = NULL, *grid = NULL, *block = NULL,
             *dims = NULL, *py_func = NULL, *fast = self->fast, *fast_prefix = self->fast_prefix;
    int fast_kind = self->fast_kind;
    Py_XINCREF(fast);
    Py_XINCREF(fast_prefix);
    int busy = is_busy(local);
    if (busy < 0)
        goto done;
    if (busy) {
        result = call3(self->original, args[0], args[1], args[2]);
        goto done;
    }
    if (set_busy(local, 1) < 0)
        goto done;
    PyObject *config = args[2];
    py_func = PyObject_GetAttr(args[0], s_py_func);
    if (py_func == NULL || (name = PyObject_GetAttr(py_func, s_name)) == NULL ||
        (on = PyObject_GetAttr(config, s_stream)) == NULL ||
        (grid = PyObject_GetAttr(config, s_griddim)) == NULL ||
        (block = PyObject_GetAttr(config, s_blockdim)) == NULL || (dims = PyTuple_Pack(2, grid, block)) == NULL)
        goto unbusy;
    if (fast_kind == FAST_NONE) {
        PyObject *described[4] = {name, on, dims, Py_False};
        result = bracketed(self->original, args, before, after, NULL, FAST_NONE, described, 4);
    } else {   /* before is partial(the half, kind): the kind first */
        PyObject *described[5] = {fast_prefix, name, on, dims, Py_False};
        result = bracketed(self->original, args, before, after, fast, fast_kind, described, 5);
    }
unbusy:;
    PyObject *type, *value, *traceback;   /* finally: local.busy = False, keeping any error */
    PyErr_Fetch(&type, &value, &traceback);
    if (set_busy(local, 0) < 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        Py_CLEAR(result);
    } else {
        PyErr_Restore(type, value, traceback);
    }
done:
    Py_XDECREF(py_func);
    Py_XDECREF(name);
    Py_XDECREF(on);
    Py_XDECREF(grid);
    Py_XDECREF(block);
    Py_XDECREF(dims);
    Py_XDECREF(fast);
    Py_XDECREF(fast_prefix);
    Py_DECREF(sole);
    return result;
}

static PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kwds, vectorcallfunc call, int copy)
{
    static char *copy_names[] = {"original", "fallback", "to_host", "ary_default", NULL};
    static char *launch_names[] = {"original", "fallback", NULL};
    PyObject *original, *fallback, *ary_default = Py_None;
    int to_host = 0;
    if (copy ? !PyArg_ParseTupleAndKeywords(args, kwds, "OOp|O", copy_names, &original, &fallback, &to_host,
                                            &ary_default)
             : !PyArg_ParseTupleAndKeywords(args, kwds, "OO", launch_names, &original, &fallback))
        return NULL;
    Hook *self = (Hook *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = call;
    self->original = original;
    self->fallback = fallback;
    self->ary_default = ary_default;
    self->sole = Py_None;
    self->to_host = to_host;
    self->copy = copy;
    hold_objects(OBJECTS(Hook, original, ary_default));
    return (PyObject *)self;
}

static PyObject *copy_hook_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return hook_new(type, args, kwds, (vectorcallfunc)copy_hook_call, 1);
}

static PyObject *launch_hook_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return hook_new(type, args, kwds, (vectorcallfunc)launch_hook_call, 0);
}

/* A method of the class it is set on: bound to the instance it is read from. */
static PyObject *hook_get(PyObject *self, PyObject *instance, PyObject *owner)
{
    if (instance == NULL || instance == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, instance);
}

/* `method` (a bound builtin method) is `function` of an instance of `type`: that instance, or NULL. */
static PyObject *bound_to(PyObject *method, PyTypeObject *type, PyCFunction function)
{
    if (!PyCFunction_Check(method) || PyCFunction_GET_FUNCTION(method) != function)
        return NULL;
    PyObject *owner = PyCFunction_GET_SELF(method);
    return owner != NULL && Py_IS_TYPE(owner, type) ? owner : NULL;
}

/* Which compiled halves the sole Bracket (before, after) is, if any (see FAST_NONE). */
static int find_fast(Hook *self, PyObject *before, PyObject *after)
{
    PyObject *half = before, *prefix = NULL, *owner;
    if (Py_IS_TYPE(before, (PyTypeObject *)partial_type)) {   /* partial(half, kind), nothing else bound */
        PyObject *bound = PyObject_GetAttrString(before, "args"), *named = PyObject_GetAttrString(before, "keywords");
        half = PyObject_GetAttrString(before, "func");
        int plain = bound != NULL && named != NULL && half != NULL && PyTuple_Check(bound) &&
                    PyTuple_GET_SIZE(bound) == 1 && PyDict_Check(named) && PyDict_GET_SIZE(named) == 0;
        if (plain)
            prefix = Py_NewRef(PyTuple_GET_ITEM(bound, 0));
        Py_XDECREF(bound);
        Py_XDECREF(named);
        Py_XDECREF(half);   /* the partial holds it */
        if (!plain) {
            PyErr_Clear();
            return 0;
        }
    }
    if (self->copy != (prefix == NULL)) {   /* a copy is described with its kind, a launch without */
        Py_XDECREF(prefix);
        return 0;
    }
    if ((owner = bound_to(half, &RecorderType, (PyCFunction)(void (*)(void))recorder_start)) != NULL &&
        bound_to(after, &RecorderType, (PyCFunction)(void (*)(void))recorder_end) == owner)
        self->fast_kind = FAST_RECORDER;
    else if ((owner = bound_to(half, &NoterType, (PyCFunction)(void (*)(void))noter_note)) != NULL &&
             after == Py_None)
        self->fast_kind = FAST_NOTER;
    else {
        Py_XDECREF(prefix);
        return 0;
    }
    self->fast = Py_NewRef(owner);
    self->fast_prefix = prefix;
    return 0;
}

static int hook_set_sole(Hook *self, PyObject *value, void *closure)
{
    if (value == NULL || (value != Py_None && (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 3))) {
        PyErr_SetString(PyExc_TypeError, "sole: (busy flag, before, after), or None");
        return -1;
    }
    Py_INCREF(value);
    Py_SETREF(self->sole, value);
    Py_CLEAR(self->fast);
    Py_CLEAR(self->fast_prefix);
    self->fast_kind = FAST_NONE;
    return value == Py_None ? 0 : find_fast(self, PyTuple_GET_ITEM(value, 1), PyTuple_GET_ITEM(value, 2));
}

static PyObject *hook_get_sole(Hook *self, void *closure)
{
    Py_INCREF(self->sole);
    return self->sole;
}

static PyGetSetDef hook_getset[] = {
    {"sole", (getter)hook_get_sole, (setter)hook_set_sole,
     "(busy flag, before, after) while one subscription handles the call with a Bracket, else None"},
    {NULL},
};

static PyMemberDef hook_members[] = {
    {"original", T_OBJECT, offsetof(Hook, original), READONLY, "numba-cuda's own"},
    {"fallback", T_OBJECT, offsetof(Hook, fallback), READONLY, "the Python hook, for every other call"},
    {"fast", T_OBJECT, offsetof(Hook, fast), READONLY,
     "the compiled Recorder or Noter whose halves the sole Bracket is, called directly; else None"},
    {NULL},
};

static int hook_traverse(Hook *self, visitproc visit, void *arg)
{
    return visit_objects(OBJECTS(Hook, original, fast_prefix), visit, arg);
}

static int hook_clear(Hook *self)
{
    self->fast_kind = FAST_NONE;
    return clear_objects(OBJECTS(Hook, original, fast_prefix));
}

#define HOOK_TYPE(VAR, NAME, NEW, DOC)                                                            \
    static PyTypeObject VAR = {                                                                   \
        PyVarObject_HEAD_INIT(NULL, 0)                                                            \
        .tp_name = "kernellab.gpu._hotpath." NAME,                                                \
        .tp_basicsize = sizeof(Hook),                                                             \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |        \
                    Py_TPFLAGS_METHOD_DESCRIPTOR,                                                 \
        .tp_doc = DOC,                                                                            \
        .tp_new = NEW,                                                                            \
        .tp_dealloc = dealloc,                                                                    \
        .tp_traverse = (traverseproc)hook_traverse,                                               \
        .tp_clear = (inquiry)hook_clear,                                                          \
        .tp_call = PyVectorcall_Call,                                                             \
        .tp_vectorcall_offset = offsetof(Hook, vectorcall),                                       \
        .tp_descr_get = hook_get,                                                                 \
        .tp_getset = hook_getset,                                                                 \
        .tp_members = hook_members,                                                               \
    };

HOOK_TYPE(CopyHookType, "CopyHook", copy_hook_new,
          "CopyHook(original, fallback, to_host, ary_default=None): a device array's copy method, hooked")
HOOK_TYPE(LaunchHookType, "LaunchHook", launch_hook_new,
          "LaunchHook(original, fallback): CUDADispatcher.call, hooked")

static PyObject *perf_counter(PyObject *module, PyObject *unused)
{
    return read_clock(NULL);
}

/* The floor of a recorder that times each op with an event, for `kernellab bench 07`: one event
   recorded by the driver with no Python or ctypes around the call (record), and the compiled hook
   with a Bracket whose halves do nothing (noop). */
static PyObject *record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "record(driver address, event handle, stream handle)");
        return NULL;
    }
    record_fn driver = (record_fn)PyLong_AsVoidPtr(args[0]);
    void *event = PyLong_AsVoidPtr(args[1]), *stream = PyLong_AsVoidPtr(args[2]);
    if (PyErr_Occurred())
        return NULL;
    if (driver == NULL) {
        PyErr_SetString(PyExc_ValueError, "record: a null driver address");
        return NULL;
    }
    return PyLong_FromLong(driver(event, stream));
}

static PyObject *noop(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"perf_counter", perf_counter, METH_NOARGS, "the clock the compiled recorder reads: time.perf_counter's"},
    {"record", (PyCFunction)(void (*)(void))record, METH_FASTCALL,
     "record(driver address, event handle, stream handle) -> the driver's CUresult: cuEventRecord, no Python around it"},
    {"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL | METH_KEYWORDS,
     "noop(*args, **kwargs) -> None: a Bracket half that does nothing, in C"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kernellab.gpu._hotpath",
    "The recorder's hot path, compiled (see kernellab/gpu/_hotpath.c).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__hotpath(void)
{
    PyObject **names[] = {&s_busy, &s_nbytes, &s_stream, &s_copy_to_host, &s_py_func, &s_name,
                          &s_griddim, &s_blockdim, &s_d2h, &s_h2d, &s_d2d};
    const char *texts[] = {"busy", "nbytes", "stream", "copy_to_host", "py_func", "__name__",
                           "griddim", "blockdim", "d2h", "h2d", "d2d"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if ((*names[i] = PyUnicode_InternFromString(texts[i])) == NULL)
            return NULL;
    if ((zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    PyObject *functools = PyImport_ImportModule("functools");
    if (functools == NULL)
        return NULL;
    partial_type = PyObject_GetAttrString(functools, "partial");
    Py_DECREF(functools);
    if (partial_type == NULL)
        return NULL;
    PyTypeObject *types[] = {&NoterType, &RecorderType, &CopyHookType, &LaunchHookType, &BusyFlagType};
    const char *type_names[] = {"Noter", "Recorder", "CopyHook", "LaunchHook", "BusyFlag"};
    for (size_t i = 0; i < 5; i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    for (size_t i = 0; i < 5; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, type_names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
