/* Session 18's probe (not part of kernellab): the pieces of the pipeline recorder's per-op cost,
   each alone in C. record(event, stream): cuEventRecord by the address given to driver(); noop(...):
   a Bracket half that does nothing, in C. Built on the device by callA.sh. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef int (*record_fn)(void *, void *);
static record_fn record_native;

static PyObject *driver(PyObject *m, PyObject *address)
{
    record_native = (record_fn)PyLong_AsVoidPtr(address);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *record(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    int result = record_native(PyLong_AsVoidPtr(args[0]), PyLong_AsVoidPtr(args[1]));
    if (result != 0)
        return PyErr_Format(PyExc_RuntimeError, "cuEventRecord: %d", result);
    Py_RETURN_NONE;
}

static PyObject *noop(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"driver", driver, METH_O, ""},
    {"record", (PyCFunction)(void (*)(void))record, METH_FASTCALL, ""},
    {"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL, ""},
    {NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "probe", "", -1, methods};

PyMODINIT_FUNC PyInit_probe(void) { return PyModule_Create(&module); }
