/*
 * tarantella._tnt's private header: what its two files share. _tnt.c holds
 * the module (communicator, errors, host and device collectives, sharding);
 * _tnt_fusion.c the Fusion type (the fused gradient allreduce engine).
 */
#ifndef TARANTELLA_TNT_H
#define TARANTELLA_TNT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <tnt/tnt.h>

/* libtnt is one job per process: the communicator is a process-wide static
 * (touched only with the GIL held), not module state. */
extern tnt_comm_t *g_comm;

typedef struct {
    PyObject *base_error;    /* tarantella.errors.TarantellaError */
    PyObject *error_classes; /* dict: status (int) -> class */
    PyTypeObject *fusion_type;
} module_state;

static inline module_state *get_state(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

/* _tnt.c: raises the exception class of status with libtnt's message;
 * raises NotInitializedError; checks a dtype code; acquires a C-contiguous
 * buffer (the Python error names what). */
PyObject *raise_status(module_state *st, tnt_status_t status, const char *what);
PyObject *raise_not_initialized(module_state *st, const char *what);
int check_dtype(int dtype);
int get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what);

/* _tnt_fusion.c: the Fusion type's spec; destroys every live engine before
 * finalize; tnt_fusion_plan for the Python side. */
extern PyType_Spec fusion_spec;
void fusion_release_all(void);
PyObject *tnt_py_fusion_plan(PyObject *module, PyObject *args);

#endif
