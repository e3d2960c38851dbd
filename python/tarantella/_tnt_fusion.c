/*
 * tarantella._tnt's Fusion type: the fused gradient allreduce engine over
 * libtnt's tnt_fusion_* (see _tnt.c for the module's rules: the GIL is
 * released around blocking calls, and every buffer handed to mark_ready is
 * held until wait(), finalize() or deallocation).
 */
#include "_tnt.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

typedef struct fusion_object fusion_object;
/* Live Fusion objects, so finalize() can destroy their engines before the
 * communicator goes away (objects may outlive it until interpreter exit).
 * Guarded by the GIL. */
static fusion_object *g_fusions;

/* ------------------------------------------------------------------------ */
/* Fusion engine                                                             */
/* ------------------------------------------------------------------------ */

struct fusion_object {
    PyObject_HEAD
    tnt_fusion_t *fusion;
    size_t num_tensors;
    tnt_tensor_desc_t *descs;
    /* Buffers marked by object since the last wait(); held[i] says whether
     * views[i] must be released. */
    Py_buffer *views;
    char *held;
    /* Serialises mark_ready/wait when called from several threads with the
     * GIL released. */
    PyThread_type_lock lock;
    fusion_object *prev, *next;
};

static void fusion_release_views(fusion_object *self)
{
    for (size_t i = 0; i < self->num_tensors; i++) {
        if (self->held[i]) {
            PyBuffer_Release(&self->views[i]);
            self->held[i] = 0;
        }
    }
}

/* Destroys the engine (waits for its operations inside libtnt) and releases
 * the buffers it was using. Called with the GIL held. */
static void fusion_destroy_engine(fusion_object *self)
{
    tnt_fusion_t *fusion = self->fusion;

    if (fusion != NULL) {
        self->fusion = NULL;
        Py_BEGIN_ALLOW_THREADS
            PyThread_acquire_lock(self->lock, WAIT_LOCK);
            tnt_fusion_destroy(fusion);
            PyThread_release_lock(self->lock);
        Py_END_ALLOW_THREADS
    }
    fusion_release_views(self);
}

void fusion_release_all(void)
{
    for (fusion_object *f = g_fusions; f != NULL; f = f->next) {
        fusion_destroy_engine(f);
    }
}

/* Parses a sequence of (count, dtype) pairs into a freshly allocated array. */
static int parse_descs(PyObject *seq_obj, tnt_tensor_desc_t **descs_p, size_t *num_p)
{
    PyObject *seq = PySequence_Fast(seq_obj, "tensors must be a sequence of (count, dtype)");
    tnt_tensor_desc_t *descs;
    Py_ssize_t n;

    if (seq == NULL) {
        return -1;
    }
    n = PySequence_Fast_GET_SIZE(seq);
    descs = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(*descs));
    if (descs == NULL) {
        PyErr_NoMemory();
        goto err_seq;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long count;
        int dtype;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i),
                              "Ki;tensors[i] must be (count, dtype)", &count, &dtype)) {
            goto err_descs;
        }
        if (check_dtype(dtype) < 0) {
            goto err_descs;
        }
        descs[i].count = (size_t)count;
        descs[i].dtype = (tnt_dtype_t)dtype;
    }
    Py_DECREF(seq);
    *descs_p = descs;
    *num_p = (size_t)n;
    return 0;
err_descs:
    PyMem_Free(descs);
err_seq:
    Py_DECREF(seq);
    return -1;
}

static int parse_threshold(PyObject *obj, size_t *threshold_p)
{
    if (obj == Py_None) {
        *threshold_p = TNT_FUSION_THRESHOLD_AUTO;
        return 0;
    }
    size_t t = PyLong_AsSize_t(obj);
    if (t == (size_t)-1 && PyErr_Occurred()) {
        return -1;
    }
    *threshold_p = t;
    return 0;
}

static PyObject *fusion_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = { "tensors", "threshold_bytes", "op", "compression", NULL };
    module_state *st = PyType_GetModuleState(type);
    PyObject *tensors, *threshold_obj = Py_None;
    int op = TNT_SUM;
    int compression = TNT_COMPRESSION_NONE;
    size_t threshold, num;
    tnt_tensor_desc_t *descs;
    tnt_fusion_t *fusion = NULL;
    tnt_status_t status;
    fusion_object *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|Oii:Fusion", kwlist, &tensors,
                                     &threshold_obj, &op, &compression)) {
        return NULL;
    }
    if (compression < 0 || compression >= (int)TNT_COMPRESSION_LAST) {
        PyErr_Format(PyExc_ValueError, "invalid libtnt compression code %d", compression);
        return NULL;
    }
    if (op < 0 || op >= (int)TNT_OP_LAST) {
        PyErr_Format(PyExc_ValueError, "invalid libtnt op code %d", op);
        return NULL;
    }
    if (g_comm == NULL) {
        return raise_not_initialized(st, "Fusion");
    }
    if (parse_threshold(threshold_obj, &threshold) < 0) {
        return NULL;
    }
    if (parse_descs(tensors, &descs, &num) < 0) {
        return NULL;
    }
    self = (fusion_object *)type->tp_alloc(type, 0);
    if (self == NULL) {
        goto err_descs;
    }
    self->descs = descs;
    self->num_tensors = num;
    descs = NULL; /* owned by self from here; tp_dealloc frees it */
    self->views = PyMem_Calloc(num > 0 ? num : 1, sizeof(Py_buffer));
    self->held = PyMem_Calloc(num > 0 ? num : 1, 1);
    self->lock = PyThread_allocate_lock();
    if (self->views == NULL || self->held == NULL || self->lock == NULL) {
        PyErr_NoMemory();
        goto err_self;
    }
    /* Collective: every rank plans and the plans are compared. */
    Py_BEGIN_ALLOW_THREADS
        status = tnt_fusion_create_compressed(g_comm, self->descs, num, threshold, (tnt_op_t)op,
                                              (tnt_compression_t)compression, &fusion);
    Py_END_ALLOW_THREADS
    if (status != TNT_OK) {
        raise_status(st, status, "Fusion");
        goto err_self;
    }
    if (g_comm == NULL) {
        /* finalize() ran in another thread while we planned. */
        tnt_fusion_destroy(fusion);
        raise_not_initialized(st, "Fusion");
        goto err_self;
    }
    self->fusion = fusion;
    self->next = g_fusions;
    if (g_fusions != NULL) {
        g_fusions->prev = self;
    }
    g_fusions = self;
    return (PyObject *)self;
err_self:
    Py_DECREF(self);
err_descs:
    PyMem_Free(descs);
    return NULL;
}

static void fusion_dealloc(fusion_object *self)
{
    PyTypeObject *type = Py_TYPE(self);

    if (self->prev != NULL) {
        self->prev->next = self->next;
    } else if (g_fusions == self) {
        g_fusions = self->next;
    }
    if (self->next != NULL) {
        self->next->prev = self->prev;
    }
    if (self->held != NULL) {
        if (self->lock != NULL) {
            fusion_destroy_engine(self);
        }
        PyMem_Free(self->held);
    }
    PyMem_Free(self->views);
    PyMem_Free(self->descs);
    if (self->lock != NULL) {
        PyThread_free_lock(self->lock);
    }
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* mark_ready(index, data, scale=1.0): data is a writable C-contiguous buffer
 * of exactly count elements (held until wait()), or an int address that the
 * caller keeps valid until wait() returns. */
static PyObject *fusion_mark_ready(fusion_object *self, PyObject *args)
{
    module_state *st = PyType_GetModuleState(Py_TYPE(self));
    Py_ssize_t index;
    PyObject *data;
    double scale = 1.0;
    void *ptr;
    tnt_status_t status;

    if (!PyArg_ParseTuple(args, "nO|d:mark_ready", &index, &data, &scale)) {
        return NULL;
    }
    if (self->fusion == NULL) {
        return raise_not_initialized(st, "Fusion.mark_ready");
    }
    if (index < 0 || (size_t)index >= self->num_tensors) {
        PyErr_Format(PyExc_IndexError, "mark_ready: tensor index %zd out of range (%zu tensors)",
                     index, self->num_tensors);
        return NULL;
    }
    if (PyLong_Check(data)) {
        ptr = PyLong_AsVoidPtr(data);
        if (ptr == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "mark_ready: NULL address");
            }
            return NULL;
        }
    } else {
        Py_buffer *view = &self->views[index];
        size_t want = self->descs[index].count * tnt_dtype_size(self->descs[index].dtype);
        if (self->held[index]) {
            PyErr_Format(PyExc_ValueError, "mark_ready: tensor %zd is already marked this step",
                         index);
            return NULL;
        }
        if (get_buffer(data, view, 1, "mark_ready data") < 0) {
            return NULL;
        }
        if ((size_t)view->len != want) {
            PyErr_Format(PyExc_ValueError,
                         "mark_ready: tensor %zd has %zd bytes, the plan "
                         "says %zu",
                         index, view->len, want);
            PyBuffer_Release(view);
            return NULL;
        }
        self->held[index] = 1;
        ptr = view->buf;
    }
    Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(self->lock, WAIT_LOCK);
        status = tnt_fusion_mark_ready(self->fusion, (size_t)index, ptr, scale);
        PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
    if (status != TNT_OK) {
        if (self->held[index]) {
            PyBuffer_Release(&self->views[index]);
            self->held[index] = 0;
        }
        return raise_status(st, status, "Fusion.mark_ready");
    }
    Py_RETURN_NONE;
}

static PyObject *fusion_wait(fusion_object *self, PyObject *unused)
{
    module_state *st = PyType_GetModuleState(Py_TYPE(self));
    tnt_status_t status;

    if (self->fusion == NULL) {
        return raise_not_initialized(st, "Fusion.wait");
    }
    Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(self->lock, WAIT_LOCK);
        status = tnt_fusion_wait(self->fusion);
        PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
    /* Whatever the outcome, libtnt no longer touches the marked buffers. */
    fusion_release_views(self);
    if (status != TNT_OK) {
        return raise_status(st, status, "Fusion.wait");
    }
    Py_RETURN_NONE;
}

static PyObject *fusion_close(fusion_object *self, PyObject *unused)
{
    fusion_destroy_engine(self);
    Py_RETURN_NONE;
}

static PyObject *fusion_get_num_buckets(fusion_object *self, void *closure)
{
    if (self->fusion == NULL) {
        return raise_not_initialized(PyType_GetModuleState(Py_TYPE(self)), "Fusion.num_buckets");
    }
    return PyLong_FromSize_t(tnt_fusion_num_buckets(self->fusion));
}

static PyObject *fusion_get_num_tensors(fusion_object *self, void *closure)
{
    return PyLong_FromSize_t(self->num_tensors);
}

static PyObject *fusion_get_closed(fusion_object *self, void *closure)
{
    return PyBool_FromLong(self->fusion == NULL);
}

static PyMethodDef fusion_methods[] = {
    { "mark_ready", (PyCFunction)fusion_mark_ready, METH_VARARGS,
      "mark_ready(index, data, scale=1.0)\n--\n\nMarks tensor index ready: data (a writable "
      "C-contiguous buffer, or an int address kept valid by the caller) is scaled and "
      "contributed; a full bucket starts its allreduce on libtnt's progress thread." },
    { "wait", (PyCFunction)fusion_wait, METH_NOARGS,
      "wait()\n--\n\nBlocks until every bucket is reduced into the marked data, then resets "
      "the engine for the next step." },
    { "close", (PyCFunction)fusion_close, METH_NOARGS,
      "close()\n--\n\nDestroys the engine now (also done on deallocation)." },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef fusion_getset[] = {
    { "num_buckets", (getter)fusion_get_num_buckets, NULL, "buckets in the plan", NULL },
    { "num_tensors", (getter)fusion_get_num_tensors, NULL, "tensors in the plan", NULL },
    { "closed", (getter)fusion_get_closed, NULL, "True once the engine is destroyed", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot fusion_slots[] = {
    { Py_tp_doc, "Fusion(tensors, threshold_bytes=None, op=SUM, compression=COMPRESSION_NONE)"
                 "\n--\n\n"
                 "libtnt fusion engine over tensors, a sequence of (count, dtype) in the order "
                 "their gradients become ready. threshold_bytes None means TNT_FUSION_THRESHOLD_KB "
                 "or the built-in default. compression COMPRESSION_FP16/BF16 sends float32 "
                 "buckets as 16-bit (tnt_fusion_create_compressed). Collective: every rank must "
                 "create it with the same plan." },
    { Py_tp_new, fusion_new },
    { Py_tp_dealloc, fusion_dealloc },
    { Py_tp_methods, fusion_methods },
    { Py_tp_getset, fusion_getset },
    { 0, NULL },
};

PyType_Spec fusion_spec = {
    .name = "tarantella._tnt.Fusion",
    .basicsize = sizeof(fusion_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = fusion_slots,
};

/* fusion_plan(tensors, threshold_bytes) -> (bucket_of_tensor list, num_buckets) */
PyObject *tnt_py_fusion_plan(PyObject *module, PyObject *args)
{
    PyObject *tensors, *threshold_obj, *list = NULL, *result = NULL;
    tnt_tensor_desc_t *descs;
    size_t num, threshold, num_buckets = 0, *bucket_of;
    tnt_status_t status;

    if (!PyArg_ParseTuple(args, "OO:fusion_plan", &tensors, &threshold_obj)) {
        return NULL;
    }
    if (parse_threshold(threshold_obj, &threshold) < 0) {
        return NULL;
    }
    /* TNT_FUSION_THRESHOLD_AUTO goes through unchanged: tnt_fusion_plan
     * resolves it from TNT_FUSION_THRESHOLD_KB exactly as the engine does, so
     * the plan reported here is the one the engine will use. */
    if (parse_descs(tensors, &descs, &num) < 0) {
        return NULL;
    }
    bucket_of = PyMem_Calloc(num > 0 ? num : 1, sizeof(size_t));
    if (bucket_of == NULL) {
        PyErr_NoMemory();
        goto err_descs;
    }
    status = tnt_fusion_plan(descs, num, threshold, bucket_of, &num_buckets);
    if (status != TNT_OK) {
        raise_status(get_state(module), status, "fusion_plan");
        goto err_bucket_of;
    }
    list = PyList_New((Py_ssize_t)num);
    if (list == NULL) {
        goto err_bucket_of;
    }
    for (size_t i = 0; i < num; i++) {
        PyObject *v = PyLong_FromSize_t(bucket_of[i]);
        if (v == NULL) {
            goto err_list;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    result = Py_BuildValue("(On)", list, (Py_ssize_t)num_buckets);
err_list:
    Py_DECREF(list);
err_bucket_of:
    PyMem_Free(bucket_of);
err_descs:
    PyMem_Free(descs);
    return result;
}
