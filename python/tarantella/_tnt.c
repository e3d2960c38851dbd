/*
 * tarantella._tnt: the private C extension over libtnt.
 *
 * The pure-Python package (collectives.py, optimizers.py, data.py) maps numpy
 * and torch dtypes onto libtnt's, checks shapes across ranks and builds the
 * user-facing API; this module only moves buffers in and out of libtnt.
 *
 * Rules followed here, after python-xxhash's src/_xxhash.c:
 *  - multi-phase initialisation; the exception table and the Fusion type live
 *    in the module state;
 *  - the GIL is released around every call into libtnt that can block or do
 *    bulk work (bootstrap, collectives, fusion mark/wait, permutations);
 *  - every Py_buffer acquired is released on every path. The fusion engine
 *    reads and writes marked tensors until wait(), so buffers handed to
 *    mark_ready are held by the Fusion object and released by wait(), by
 *    finalize() or by deallocation, whichever comes first.
 *
 * libtnt is one job per process, so the communicator is a process-wide static
 * (touched only with the GIL held), not module state. The Fusion type is in
 * _tnt_fusion.c; _tnt.h is what the two share.
 */
#include "_tnt.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <tnt/tnt_cuda.h>

/* ------------------------------------------------------------------------ */
/* Process-wide communicator                                                 */
/* ------------------------------------------------------------------------ */

tnt_comm_t *g_comm;
/* Serialises init/finalize. Taken with the GIL released (init blocks in the
 * PMIx fence), so a second thread calling init waits here instead of
 * bootstrapping twice. */
static PyThread_type_lock g_setup_lock;

/* Raises the exception class of @p status with libtnt's detailed message
 * (tnt_last_error is per thread; we are on the thread that made the call,
 * the GIL having been re-acquired on it). Returns NULL for convenience. */
PyObject *raise_status(module_state *st, tnt_status_t status, const char *what)
{
    const char *detail = tnt_last_error();
    PyObject *cls = NULL;
    PyObject *key = PyLong_FromLong((long)status);

    if (key != NULL) {
        cls = PyDict_GetItemWithError(st->error_classes, key); /* borrowed */
        Py_DECREF(key);
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (cls == NULL) {
        cls = st->base_error;
    }
    if (detail != NULL && detail[0] != '\0') {
        PyErr_SetString(cls, detail);
    } else {
        PyErr_Format(cls, "%s: %s", what, tnt_status_string(status));
    }
    {
        /* error.printed: libtnt already printed the message on stderr. */
        PyObject *type, *value, *tb;
        int printed = detail != NULL && detail[0] != '\0' && tnt_last_error_printed();

        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value != NULL &&
            PyObject_SetAttrString(value, "printed", printed ? Py_True : Py_False) != 0) {
            PyErr_Clear();
        }
        PyErr_Restore(type, value, tb);
    }
    return NULL;
}

PyObject *raise_not_initialized(module_state *st, const char *what)
{
    PyObject *key = PyLong_FromLong((long)TNT_ERR_NOT_INITIALIZED);
    PyObject *cls = NULL;

    if (key != NULL) {
        cls = PyDict_GetItemWithError(st->error_classes, key);
        Py_DECREF(key);
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyErr_Format(cls != NULL ? cls : st->base_error,
                 "%s: tarantella is not initialised (call tnt.init(), or it was finalized)", what);
    return NULL;
}

int check_dtype(int dtype)
{
    if (dtype < 0 || dtype >= (int)TNT_DTYPE_LAST) {
        PyErr_Format(PyExc_ValueError, "invalid libtnt dtype code %d", dtype);
        return -1;
    }
    return 0;
}

/* Acquires a C-contiguous buffer; on failure the Python error names @p what. */
int get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);

    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_Format(PyExc_BufferError, "%s: need a %sC-contiguous buffer (%S)", what,
                     writable ? "writable " : "", value != NULL ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Setup and rank information                                                */
/* ------------------------------------------------------------------------ */

static PyObject *tnt_py_init(PyObject *module, PyObject *unused)
{
    module_state *st = get_state(module);
    tnt_status_t status = TNT_OK;
    tnt_comm_t *comm = NULL;

    if (g_comm != NULL) {
        Py_RETURN_NONE;
    }
    Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(g_setup_lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
    /* Another thread may have finished init while we waited for the lock. */
    if (g_comm == NULL) {
        Py_BEGIN_ALLOW_THREADS
            status = tnt_init(&comm);
        Py_END_ALLOW_THREADS
        if (status == TNT_OK) {
            g_comm = comm;
        }
    }
    PyThread_release_lock(g_setup_lock);
    if (status != TNT_OK) {
        return raise_status(st, status, "init");
    }
    Py_RETURN_NONE;
}

static PyObject *tnt_py_finalize(PyObject *module, PyObject *unused)
{
    tnt_comm_t *comm = g_comm;

    if (comm == NULL) {
        Py_RETURN_NONE;
    }
    /* Engines reference the communicator: destroy them first. */
    fusion_release_all();
    g_comm = NULL;
    Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(g_setup_lock, WAIT_LOCK);
        tnt_finalize(comm);
        PyThread_release_lock(g_setup_lock);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *tnt_py_is_initialized(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(g_comm != NULL);
}

/* Rank queries need an initialised communicator. */
#define TNT_PY_INT_QUERY(name)                                         \
    static PyObject *tnt_py_##name(PyObject *module, PyObject *unused) \
    {                                                                  \
        if (g_comm == NULL) {                                          \
            return raise_not_initialized(get_state(module), #name);    \
        }                                                              \
        return PyLong_FromLong(tnt_##name(g_comm));                    \
    }

TNT_PY_INT_QUERY(rank)
TNT_PY_INT_QUERY(size)
TNT_PY_INT_QUERY(local_rank)
TNT_PY_INT_QUERY(local_size)
TNT_PY_INT_QUERY(node_id)
TNT_PY_INT_QUERY(num_nodes)
TNT_PY_INT_QUERY(fusion_tune_requested)
TNT_PY_INT_QUERY(allreduce_order_fixed)

static PyObject *tnt_py_hostname(PyObject *module, PyObject *unused)
{
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "hostname");
    }
    return PyUnicode_DecodeFSDefault(tnt_hostname(g_comm));
}

static PyObject *tnt_py_version(PyObject *module, PyObject *unused)
{
    return PyUnicode_FromString(tnt_version());
}

static PyObject *tnt_py_last_error(PyObject *module, PyObject *unused)
{
    return PyUnicode_FromString(tnt_last_error());
}

static PyObject *tnt_py_status_string(PyObject *module, PyObject *arg)
{
    long status = PyLong_AsLong(arg);

    if (status == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return PyUnicode_FromString(tnt_status_string((tnt_status_t)status));
}

static PyObject *tnt_py_dtype_size(PyObject *module, PyObject *arg)
{
    long dtype = PyLong_AsLong(arg);

    if (dtype == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (check_dtype((int)dtype) < 0) {
        return NULL;
    }
    return PyLong_FromSize_t(tnt_dtype_size((tnt_dtype_t)dtype));
}

static PyObject *tnt_py_abort(PyObject *module, PyObject *args)
{
    int code;
    const char *message;

    if (!PyArg_ParseTuple(args, "is:abort", &code, &message)) {
        return NULL;
    }
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "abort");
    }
    /* Flush Python's buffered output first: tnt_abort does not return. */
    PyObject *r = PyObject_CallMethod(PySys_GetObject("stdout"), "flush", NULL);
    Py_XDECREF(r);
    PyErr_Clear();
    Py_BEGIN_ALLOW_THREADS
        tnt_abort(g_comm, code, message);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *tnt_py_stall_pause(PyObject *module, PyObject *unused)
{
    (void)unused;
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "stall_pause");
    }
    tnt_stall_pause(g_comm);
    Py_RETURN_NONE;
}

static PyObject *tnt_py_stall_resume(PyObject *module, PyObject *unused)
{
    (void)unused;
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "stall_resume");
    }
    tnt_stall_resume(g_comm);
    Py_RETURN_NONE;
}

static PyObject *tnt_py_report_on_signal(PyObject *module, PyObject *arg)
{
    long signo = PyLong_AsLong(arg);

    if (signo == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "report_on_signal");
    }
    tnt_status_t status = tnt_report_on_signal(g_comm, (int)signo);
    if (status != TNT_OK) {
        return raise_status(get_state(module), status, "report_on_signal");
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------ */
/* Blocking collectives on buffer objects                                    */
/* ------------------------------------------------------------------------ */

static PyObject *tnt_py_barrier(PyObject *module, PyObject *unused)
{
    tnt_status_t status;

    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "barrier");
    }
    Py_BEGIN_ALLOW_THREADS
        status = tnt_barrier(g_comm);
    Py_END_ALLOW_THREADS
    if (status != TNT_OK) {
        return raise_status(get_state(module), status, "barrier");
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------ */
/* Timeline (docs/timeline.md)                                               */
/* ------------------------------------------------------------------------ */

static PyObject *tnt_py_timeline_start(PyObject *module, PyObject *arg)
{
    PyObject *bytes = NULL;
    tnt_status_t status;

    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "timeline_start");
    }
    if (!PyUnicode_FSConverter(arg, &bytes)) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
        status = tnt_timeline_start(g_comm, PyBytes_AS_STRING(bytes));
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (status != TNT_OK) {
        return raise_status(get_state(module), status, "timeline_start");
    }
    Py_RETURN_NONE;
}

static PyObject *tnt_py_timeline_stop(PyObject *module, PyObject *unused)
{
    tnt_status_t status;

    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "timeline_stop");
    }
    Py_BEGIN_ALLOW_THREADS
        status = tnt_timeline_stop(g_comm);
    Py_END_ALLOW_THREADS
    if (status != TNT_OK) {
        return raise_status(get_state(module), status, "timeline_stop");
    }
    Py_RETURN_NONE;
}

static PyObject *tnt_py_timeline_active(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(tnt_timeline_active());
}

static PyObject *tnt_py_timeline_now(PyObject *module, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(tnt_timeline_now_ns());
}

/* timeline_record(kind, start_ns, end_ns, number): cheap enough per step
 * (no allocation, no lock); a no-op when nothing records. */
static PyObject *tnt_py_timeline_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "timeline_record(kind, start_ns, end_ns, number)");
        return NULL;
    }
    long kind = PyLong_AsLong(args[0]);
    unsigned long long start = PyLong_AsUnsignedLongLong(args[1]);
    unsigned long long end = PyLong_AsUnsignedLongLong(args[2]);
    unsigned long long number = PyLong_AsUnsignedLongLong(args[3]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (kind != TNT_TIMELINE_STEP && kind != TNT_TIMELINE_SYNCHRONIZE) {
        PyErr_Format(PyExc_ValueError, "invalid timeline event kind %ld", kind);
        return NULL;
    }
    tnt_timeline_record((tnt_timeline_kind_t)kind, start, end, number);
    Py_RETURN_NONE;
}

/* allreduce(send, recv, dtype, op): recv None or the same object as send
 * means in place (send must then be writable). */
static PyObject *tnt_py_allreduce(PyObject *module, PyObject *args)
{
    PyObject *send_obj, *recv_obj, *result = NULL;
    int dtype, op;
    Py_buffer send, recv;
    int in_place;
    size_t esize, count;
    tnt_status_t status;

    if (!PyArg_ParseTuple(args, "OOii:allreduce", &send_obj, &recv_obj, &dtype, &op)) {
        return NULL;
    }
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "allreduce");
    }
    if (check_dtype(dtype) < 0) {
        return NULL;
    }
    if (op < 0 || op >= (int)TNT_OP_LAST) {
        PyErr_Format(PyExc_ValueError, "invalid libtnt op code %d", op);
        return NULL;
    }
    in_place = (recv_obj == Py_None || recv_obj == send_obj);
    if (get_buffer(send_obj, &send, in_place, "allreduce input") < 0) {
        return NULL;
    }
    if (!in_place && get_buffer(recv_obj, &recv, 1, "allreduce output") < 0) {
        goto err_send;
    }
    esize = tnt_dtype_size((tnt_dtype_t)dtype);
    if ((size_t)send.len % esize != 0) {
        PyErr_Format(PyExc_ValueError,
                     "allreduce: buffer of %zd bytes is not a whole "
                     "number of %zu-byte elements",
                     send.len, esize);
        goto err_recv;
    }
    if (!in_place && recv.len != send.len) {
        PyErr_Format(PyExc_ValueError, "allreduce: output has %zd bytes, input %zd", recv.len,
                     send.len);
        goto err_recv;
    }
    count = (size_t)send.len / esize;
    {
        void *out = in_place ? send.buf : recv.buf;
        Py_BEGIN_ALLOW_THREADS
            status = tnt_allreduce(g_comm, send.buf, out, count, (tnt_dtype_t)dtype, (tnt_op_t)op);
        Py_END_ALLOW_THREADS
    }
    if (status != TNT_OK) {
        raise_status(get_state(module), status, "allreduce");
        goto err_recv;
    }
    result = Py_NewRef(Py_None);
err_recv:
    if (!in_place) {
        PyBuffer_Release(&recv);
    }
err_send:
    PyBuffer_Release(&send);
    return result;
}

static PyObject *tnt_py_broadcast(PyObject *module, PyObject *args)
{
    PyObject *obj, *result = NULL;
    int root;
    Py_buffer buf;
    tnt_status_t status;

    if (!PyArg_ParseTuple(args, "Oi:broadcast", &obj, &root)) {
        return NULL;
    }
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "broadcast");
    }
    if (get_buffer(obj, &buf, 1, "broadcast buffer") < 0) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
        status = tnt_broadcast(g_comm, buf.buf, (size_t)buf.len, root);
    Py_END_ALLOW_THREADS
    if (status != TNT_OK) {
        raise_status(get_state(module), status, "broadcast");
        goto err_buf;
    }
    result = Py_NewRef(Py_None);
err_buf:
    PyBuffer_Release(&buf);
    return result;
}

/* allgather(send, recv): recv holds size * len(send) bytes. */
static PyObject *tnt_py_allgather(PyObject *module, PyObject *args)
{
    PyObject *send_obj, *recv_obj, *result = NULL;
    Py_buffer send, recv;
    tnt_status_t status;

    if (!PyArg_ParseTuple(args, "OO:allgather", &send_obj, &recv_obj)) {
        return NULL;
    }
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "allgather");
    }
    if (get_buffer(send_obj, &send, 0, "allgather input") < 0) {
        return NULL;
    }
    if (get_buffer(recv_obj, &recv, 1, "allgather output") < 0) {
        goto err_send;
    }
    if ((size_t)recv.len != (size_t)send.len * (size_t)tnt_size(g_comm)) {
        PyErr_Format(PyExc_ValueError, "allgather: output has %zd bytes, need %d ranks x %zd",
                     recv.len, tnt_size(g_comm), send.len);
        goto err_recv;
    }
    Py_BEGIN_ALLOW_THREADS
        status = tnt_allgather(g_comm, send.buf, recv.buf, (size_t)send.len);
    Py_END_ALLOW_THREADS
    if (status != TNT_OK) {
        raise_status(get_state(module), status, "allgather");
        goto err_recv;
    }
    result = Py_NewRef(Py_None);
err_recv:
    PyBuffer_Release(&recv);
err_send:
    PyBuffer_Release(&send);
    return result;
}

/* ------------------------------------------------------------------------ */
/* Shard arithmetic                                                          */
/* ------------------------------------------------------------------------ */

static PyObject *tnt_py_shard_range(PyObject *module, PyObject *args)
{
    unsigned long long batch;
    int rank, size;
    tnt_range_t r;

    if (!PyArg_ParseTuple(args, "Kii:shard_range", &batch, &rank, &size)) {
        return NULL;
    }
    if (size < 1 || rank < 0 || rank >= size) {
        PyErr_Format(PyExc_ValueError, "shard_range: rank %d out of range for size %d", rank, size);
        return NULL;
    }
    r = tnt_shard_range((uint64_t)batch, rank, size);
    return Py_BuildValue("(KK)", (unsigned long long)r.begin, (unsigned long long)r.end);
}

/* shard_permutation(n, seed, out): writes n uint64 into the writable buffer
 * out (e.g. a numpy uint64/int64 array or a bytearray of 8 n bytes). */
static PyObject *tnt_py_shard_permutation(PyObject *module, PyObject *args)
{
    unsigned long long n, seed;
    PyObject *obj, *result = NULL;
    Py_buffer out;
    tnt_status_t status;

    if (!PyArg_ParseTuple(args, "KKO:shard_permutation", &n, &seed, &obj)) {
        return NULL;
    }
    if (get_buffer(obj, &out, 1, "shard_permutation output") < 0) {
        return NULL;
    }
    if (n > (unsigned long long)(PY_SSIZE_T_MAX / sizeof(uint64_t)) ||
        (size_t)out.len != (size_t)n * sizeof(uint64_t)) {
        PyErr_Format(PyExc_ValueError, "shard_permutation: output has %zd bytes, need %llu x 8",
                     out.len, n);
        goto err_out;
    }
    Py_BEGIN_ALLOW_THREADS
        status = tnt_shard_permutation((uint64_t)n, (uint64_t)seed, (uint64_t *)out.buf);
    Py_END_ALLOW_THREADS
    if (status != TNT_OK) {
        raise_status(get_state(module), status, "shard_permutation");
        goto err_out;
    }
    result = Py_NewRef(Py_None);
err_out:
    PyBuffer_Release(&out);
    return result;
}

static PyObject *tnt_py_shard_num_steps(PyObject *module, PyObject *args)
{
    unsigned long long n, batch;
    int drop;

    if (!PyArg_ParseTuple(args, "KKp:shard_num_steps", &n, &batch, &drop)) {
        return NULL;
    }
    if (batch == 0) {
        PyErr_SetString(PyExc_ValueError, "shard_num_steps: batch must be positive");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(tnt_shard_num_steps(n, batch, drop));
}

static PyObject *tnt_py_shard_step_range(PyObject *module, PyObject *args)
{
    unsigned long long n, batch, step;
    int drop, rank, size;
    tnt_range_t r;

    if (!PyArg_ParseTuple(args, "KKpKii:shard_step_range", &n, &batch, &drop, &step, &rank,
                          &size)) {
        return NULL;
    }
    if (batch == 0 || size < 1 || rank < 0 || rank >= size) {
        PyErr_Format(PyExc_ValueError,
                     "shard_step_range: need batch > 0 and 0 <= rank < size "
                     "(batch %llu, rank %d, size %d)",
                     batch, rank, size);
        return NULL;
    }
    r = tnt_shard_step_range(n, batch, drop, step, rank, size);
    return Py_BuildValue("(KK)", (unsigned long long)r.begin, (unsigned long long)r.end);
}

/* ------------------------------------------------------------------------ */
/* Module                                                                    */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Device buffers (tnt_cuda.h). The extension links no CUDA library: Python */
/* passes data_ptr() and the cudaStream_t handle of                          */
/* torch.cuda.current_stream() as integers, and libtnt hands them to         */
/* libtnt_cuda.so, which it loads on first use.                              */
/* ------------------------------------------------------------------------ */

static PyObject *device_result(PyObject *module, tnt_status_t status, const char *what)
{
    if (status != TNT_OK) {
        return raise_status(get_state(module), status, what);
    }
    Py_RETURN_NONE;
}

static PyObject *tnt_py_allreduce_device(PyObject *module, PyObject *args)
{
    unsigned long long send, recv, stream;
    Py_ssize_t count;
    int dtype, op;
    tnt_status_t status;

    if (!PyArg_ParseTuple(args, "KKniiK:allreduce_device", &send, &recv, &count, &dtype, &op,
                          &stream)) {
        return NULL;
    }
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "allreduce_device");
    }
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "allreduce_device: count %zd < 0", count);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
        status = tnt_allreduce_device(g_comm, (const void *)(uintptr_t)send,
                                      (void *)(uintptr_t)recv, (size_t)count, (tnt_dtype_t)dtype,
                                      (tnt_op_t)op, (void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    return device_result(module, status, "allreduce_device");
}

static PyObject *tnt_py_broadcast_device(PyObject *module, PyObject *args)
{
    unsigned long long buf, stream;
    Py_ssize_t bytes;
    int root;
    tnt_status_t status;

    if (!PyArg_ParseTuple(args, "KniK:broadcast_device", &buf, &bytes, &root, &stream)) {
        return NULL;
    }
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "broadcast_device");
    }
    if (bytes < 0) {
        PyErr_Format(PyExc_ValueError, "broadcast_device: bytes %zd < 0", bytes);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
        status = tnt_broadcast_device(g_comm, (void *)(uintptr_t)buf, (size_t)bytes, root,
                                      (void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    return device_result(module, status, "broadcast_device");
}

static PyObject *tnt_py_allgather_device(PyObject *module, PyObject *args)
{
    unsigned long long send, recv, stream;
    Py_ssize_t bytes;
    tnt_status_t status;

    if (!PyArg_ParseTuple(args, "KKnK:allgather_device", &send, &recv, &bytes, &stream)) {
        return NULL;
    }
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "allgather_device");
    }
    if (bytes < 0) {
        PyErr_Format(PyExc_ValueError, "allgather_device: bytes %zd < 0", bytes);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
        status =
            tnt_allgather_device(g_comm, (const void *)(uintptr_t)send, (void *)(uintptr_t)recv,
                                 (size_t)bytes, (void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    return device_result(module, status, "allgather_device");
}

static PyObject *tnt_py_device_init(PyObject *module, PyObject *unused)
{
    tnt_status_t status;
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "device_init");
    }
    Py_BEGIN_ALLOW_THREADS
        status = tnt_device_init(g_comm);
    Py_END_ALLOW_THREADS
    return device_result(module, status, "device_init");
}

static PyObject *tnt_py_device_transport(PyObject *module, PyObject *unused)
{
    tnt_gpu_transport_t transport = TNT_GPU_TRANSPORT_NONE;
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "device_transport");
    }
    tnt_status_t status = tnt_device_transport(g_comm, &transport);
    if (status != TNT_OK) {
        return raise_status(get_state(module), status, "device_transport");
    }
    return PyUnicode_FromString(tnt_gpu_transport_string(transport));
}

static PyObject *tnt_py_device_synchronize(PyObject *module, PyObject *arg)
{
    unsigned long long stream = PyLong_AsUnsignedLongLong(arg);
    tnt_status_t status;
    if (stream == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    if (g_comm == NULL) {
        return raise_not_initialized(get_state(module), "device_synchronize");
    }
    Py_BEGIN_ALLOW_THREADS
        status = tnt_device_synchronize(g_comm, (void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    return device_result(module, status, "device_synchronize");
}

static PyMethodDef module_methods[] = {
    { "init", tnt_py_init, METH_NOARGS, "init()\n--\n\nBootstraps libtnt (idempotent)." },
    { "finalize", tnt_py_finalize, METH_NOARGS,
      "finalize()\n--\n\nDestroys live fusion engines and finalizes libtnt (idempotent)." },
    { "is_initialized", tnt_py_is_initialized, METH_NOARGS, "is_initialized()\n--\n\n" },
    { "rank", tnt_py_rank, METH_NOARGS, "rank()\n--\n\n" },
    { "size", tnt_py_size, METH_NOARGS, "size()\n--\n\n" },
    { "local_rank", tnt_py_local_rank, METH_NOARGS, "local_rank()\n--\n\n" },
    { "local_size", tnt_py_local_size, METH_NOARGS, "local_size()\n--\n\n" },
    { "node_id", tnt_py_node_id, METH_NOARGS, "node_id()\n--\n\n" },
    { "num_nodes", tnt_py_num_nodes, METH_NOARGS, "num_nodes()\n--\n\n" },
    { "fusion_tune_requested", tnt_py_fusion_tune_requested, METH_NOARGS,
      "fusion_tune_requested()\n--\n\nTrue-ish when TNT_FUSION_THRESHOLD(_KB)=auto asks for tuning." },
    { "allreduce_order_fixed", tnt_py_allreduce_order_fixed, METH_NOARGS,
      "allreduce_order_fixed()\n--\n\n1 when an element's summation order does not depend on "
      "the message (bucket) size." },
    { "hostname", tnt_py_hostname, METH_NOARGS, "hostname()\n--\n\n" },
    { "version", tnt_py_version, METH_NOARGS, "version()\n--\n\nlibtnt's version string." },
    { "last_error", tnt_py_last_error, METH_NOARGS, "last_error()\n--\n\n" },
    { "status_string", tnt_py_status_string, METH_O, "status_string(status)\n--\n\n" },
    { "dtype_size", tnt_py_dtype_size, METH_O, "dtype_size(dtype)\n--\n\n" },
    { "abort", tnt_py_abort, METH_VARARGS,
      "abort(exit_code, message)\n--\n\nKills the whole job; does not return." },
    { "stall_pause", tnt_py_stall_pause, METH_NOARGS,
      "stall_pause()\n--\n\nThis rank may wait long on purpose (tnt_stall_pause)." },
    { "stall_resume", tnt_py_stall_resume, METH_NOARGS, "stall_resume()\n--\n\n" },
    { "report_on_signal", tnt_py_report_on_signal, METH_O,
      "report_on_signal(signo)\n--\n\nOn signo, print where this rank is (tnt_report_on_signal)." },
    { "barrier", tnt_py_barrier, METH_NOARGS, "barrier()\n--\n\n" },
    { "timeline_start", tnt_py_timeline_start, METH_O,
      "timeline_start(path)\n--\n\nCollective: starts recording (tnt_timeline_start)." },
    { "timeline_stop", tnt_py_timeline_stop, METH_NOARGS,
      "timeline_stop()\n--\n\nCollective: gathers and writes the file (tnt_timeline_stop)." },
    { "timeline_active", tnt_py_timeline_active, METH_NOARGS, "timeline_active()\n--\n\n" },
    { "timeline_now", tnt_py_timeline_now, METH_NOARGS,
      "timeline_now()\n--\n\nCLOCK_MONOTONIC in ns, the timeline's clock." },
    { "timeline_record", (PyCFunction)(void (*)(void))tnt_py_timeline_record, METH_FASTCALL,
      "timeline_record(kind, start_ns, end_ns, number)\n--\n\n" },
    { "allreduce", tnt_py_allreduce, METH_VARARGS,
      "allreduce(send, recv, dtype, op)\n--\n\nrecv None or send itself: in place." },
    { "broadcast", tnt_py_broadcast, METH_VARARGS, "broadcast(buf, root)\n--\n\n" },
    { "allgather", tnt_py_allgather, METH_VARARGS,
      "allgather(send, recv)\n--\n\nrecv holds size * len(send) bytes, rank order." },
    { "shard_range", tnt_py_shard_range, METH_VARARGS,
      "shard_range(batch, rank, size)\n--\n\n(begin, end) of rank's micro-batch." },
    { "shard_permutation", tnt_py_shard_permutation, METH_VARARGS,
      "shard_permutation(n, seed, out)\n--\n\nWrites a permutation of range(n) as uint64 "
      "into out." },
    { "shard_num_steps", tnt_py_shard_num_steps, METH_VARARGS,
      "shard_num_steps(n, batch, drop_remainder)\n--\n\n" },
    { "shard_step_range", tnt_py_shard_step_range, METH_VARARGS,
      "shard_step_range(n, batch, drop_remainder, step, rank, size)\n--\n\n" },
    { "fusion_plan", tnt_py_fusion_plan, METH_VARARGS,
      "fusion_plan(tensors, threshold_bytes)\n--\n\n(bucket_of_tensor, num_buckets)." },
    /* Device buffers (tnt_cuda.h). */
    { "allreduce_device", tnt_py_allreduce_device, METH_VARARGS,
      "allreduce_device(send_ptr, recv_ptr, count, dtype, op, stream)\n--\n\n" },
    { "broadcast_device", tnt_py_broadcast_device, METH_VARARGS,
      "broadcast_device(ptr, nbytes, root, stream)\n--\n\n" },
    { "allgather_device", tnt_py_allgather_device, METH_VARARGS,
      "allgather_device(send_ptr, recv_ptr, bytes_per_rank, stream)\n--\n\n" },
    { "device_init", tnt_py_device_init, METH_NOARGS, "device_init()\n--\n\n" },
    { "device_transport", tnt_py_device_transport, METH_NOARGS,
      "device_transport()\n--\n\n'none', 'nccl' or 'host'." },
    { "device_synchronize", tnt_py_device_synchronize, METH_O,
      "device_synchronize(stream)\n--\n\n" },
    { NULL, NULL, 0, NULL },
};

static int add_int(PyObject *m, const char *name, long value)
{
    return PyModule_AddIntConstant(m, name, value);
}

/* PyModule_AddObject steals the reference only on success (and a NULL value
 * is an error to report): this one never leaks. */
static int add_size(PyObject *m, const char *name, size_t value)
{
    PyObject *v = PyLong_FromSize_t(value);
    if (v == NULL) {
        return -1;
    }
    int rc = PyModule_AddObjectRef(m, name, v);
    Py_DECREF(v);
    return rc;
}

static int module_exec(PyObject *m)
{
    module_state *st = get_state(m);
    PyObject *errors;

    if (g_setup_lock == NULL) {
        g_setup_lock = PyThread_allocate_lock();
        if (g_setup_lock == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    /* The exception classes are plain Python (tarantella/errors.py) so that
     * they are documented and picklable like any other; we raise them by
     * status through their table. */
    errors = PyImport_ImportModule("tarantella.errors");
    if (errors == NULL) {
        return -1;
    }
    st->base_error = PyObject_GetAttrString(errors, "TarantellaError");
    st->error_classes = PyObject_GetAttrString(errors, "ERROR_CLASSES");
    Py_DECREF(errors);
    if (st->base_error == NULL || st->error_classes == NULL) {
        return -1;
    }
    if (!PyDict_Check(st->error_classes)) {
        PyErr_SetString(PyExc_TypeError, "tarantella.errors.ERROR_CLASSES must be a dict");
        return -1;
    }
    st->fusion_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &fusion_spec, NULL);
    if (st->fusion_type == NULL) {
        return -1;
    }
    if (PyModule_AddType(m, st->fusion_type) < 0) {
        return -1;
    }
    if (add_int(m, "FLOAT32", TNT_FLOAT32) || add_int(m, "FLOAT64", TNT_FLOAT64) ||
        add_int(m, "FLOAT16", TNT_FLOAT16) || add_int(m, "BFLOAT16", TNT_BFLOAT16) ||
        add_int(m, "INT32", TNT_INT32) || add_int(m, "INT64", TNT_INT64) ||
        add_int(m, "SUM", TNT_SUM) || add_int(m, "PROD", TNT_PROD) || add_int(m, "MIN", TNT_MIN) ||
        add_int(m, "MAX", TNT_MAX) || add_int(m, "TIMELINE_STEP", TNT_TIMELINE_STEP) ||
        add_int(m, "TIMELINE_SYNCHRONIZE", TNT_TIMELINE_SYNCHRONIZE) ||
        add_int(m, "AVG", TNT_AVG) || add_int(m, "OK", TNT_OK) ||
        add_int(m, "IN_PROGRESS", TNT_IN_PROGRESS) ||
        add_int(m, "COMPRESSION_NONE", TNT_COMPRESSION_NONE) ||
        add_int(m, "COMPRESSION_FP16", TNT_COMPRESSION_FP16) ||
        add_int(m, "COMPRESSION_BF16", TNT_COMPRESSION_BF16) ||
        add_size(m, "FUSION_THRESHOLD_DEFAULT_BYTES", TNT_FUSION_THRESHOLD_DEFAULT_BYTES) < 0) {
        return -1;
    }
    return 0;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    module_state *st = get_state(m);
    Py_VISIT(st->base_error);
    Py_VISIT(st->error_classes);
    Py_VISIT(st->fusion_type);
    return 0;
}

static int module_clear(PyObject *m)
{
    module_state *st = get_state(m);
    Py_CLEAR(st->base_error);
    Py_CLEAR(st->error_classes);
    Py_CLEAR(st->fusion_type);
    return 0;
}

static void module_free(void *m)
{
    module_clear((PyObject *)m);
}

static PyModuleDef_Slot module_slots[] = {
    { Py_mod_exec, module_exec },
    { 0, NULL },
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tarantella._tnt",
    .m_doc = "Private extension of the tarantella package: libtnt's collectives, fusion "
             "engine and shard arithmetic on buffer objects. Use the tarantella package.",
    .m_size = sizeof(module_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__tnt(void)
{
    return PyModuleDef_Init(&module_def);
}
