/* The walk's stat loop: a batch of names stat'ed relative to an open folder, their numbers
 * written straight into an int64 (n, 6) array.
 *
 * A folder walk costs one stat a file; in Python each also builds a stat_result object and a
 * tuple of its fields, then moves them into columns, which took a third as long again as
 * the system call. Here each file costs the system call. Links are followed (as os.stat
 * does); a name that cannot be stat'ed gets -errno as its mode and zeros, and the caller
 * names it. Times are nanoseconds, saturated to int64 (they only key caches).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef _WIN32
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#ifdef __APPLE__
#define MTIME(st) ((st).st_mtimespec)
#define CTIME(st) ((st).st_ctimespec)
#else
#define MTIME(st) ((st).st_mtim)
#define CTIME(st) ((st).st_ctim)
#endif

enum { FIELDS = 6 };

static int64_t nanoseconds(struct timespec when)
{
    const int64_t billion = 1000000000;
    if (when.tv_sec > (INT64_MAX - when.tv_nsec) / billion) {
        return INT64_MAX;
    }
    if (when.tv_sec < INT64_MIN / billion + 1) {
        return INT64_MIN;
    }
    return (int64_t)when.tv_sec * billion + (int64_t)when.tv_nsec;
}

static PyObject *stat_names(PyObject *self, PyObject *args)
{
    int folder;
    PyObject *names;
    Py_buffer out;
    (void)self;
    if (!PyArg_ParseTuple(args, "iO!w*", &folder, &PyList_Type, &names, &out)) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(names);
    if (out.itemsize != (Py_ssize_t)sizeof(int64_t) || !PyBuffer_IsContiguous(&out, 'C')
        || out.len < count * FIELDS * (Py_ssize_t)sizeof(int64_t)) {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "out must be a contiguous int64 array of (n, 6)");
        return NULL;
    }
    int64_t *row = (int64_t *)out.buf;
    Py_ssize_t failed = 0;
    for (Py_ssize_t i = 0; i < count; i++, row += FIELDS) {
        PyObject *encoded = NULL;
        if (!PyUnicode_FSConverter(PyList_GET_ITEM(names, i), &encoded)) {
            PyBuffer_Release(&out);
            return NULL;
        }
        struct stat st;
        int code = fstatat(folder, PyBytes_AS_STRING(encoded), &st, 0);
        Py_DECREF(encoded);
        if (code != 0) {
            memset(row, 0, FIELDS * sizeof(int64_t));
            row[0] = -(int64_t)errno;
            failed++;
            continue;
        }
        row[0] = (int64_t)st.st_mode;
        row[1] = (int64_t)(uint64_t)st.st_dev;
        row[2] = (int64_t)(uint64_t)st.st_ino;
        row[3] = (int64_t)st.st_size;
        row[4] = nanoseconds(MTIME(st));
        row[5] = nanoseconds(CTIME(st));
    }
    PyBuffer_Release(&out);
    return PyLong_FromSsize_t(failed);
}

static PyMethodDef methods[] = {
    {"stat_names", stat_names, METH_VARARGS,
     "stat_names(folder_fd, names, out) -> failures: stat each name relative to the open "
     "folder (links followed) into out[i] = (mode, device, inode, size, mtime_ns, ctime_ns); "
     "a name that cannot be stat'ed gets (-errno, 0, ...)."},
    {NULL, NULL, 0, NULL}};
#else
static PyMethodDef methods[] = {{NULL, NULL, 0, NULL}};
#endif

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stat_batch",
                                    "The walk's stat loop (POSIX).", -1, methods};

PyMODINIT_FUNC PyInit__stat_batch(void) { return PyModule_Create(&module); }
