/* A batch of small image files read whole: the plain case of file_read.read_whole_file.
 *
 * A folder of small images costs a few system calls a file (open, fstat, read, close); in
 * Python each also runs three layers of calls and builds a stat_result, about as long again
 * as the calls themselves (a 2.4 KB PNG: ~15 us against ~7). Here each file costs its
 * calls. Only the plain case is read: a regular file, at most `limit` bytes by fstat, whose
 * one read returns exactly the size fstat gave (a read of size + 1 that returns size is the
 * end of the file). Anything else (an error, another file type, a file over the limit, a
 * short read before the size, a file that grew) gives None, and the caller reads that file
 * again with read_whole_file, whose rules and messages stay the only ones. The size a file
 * reports is checked against the limit before anything is allocated.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef _WIN32
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
#ifndef O_NOCTTY
#define O_NOCTTY 0
#endif

/* The bytes of one file, or NULL (no Python error set) where read_whole_file must decide. */
static PyObject *read_plain(const char *path, long long limit)
{
    struct stat st;
    int descriptor, found;
    Py_BEGIN_ALLOW_THREADS
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever */
    descriptor = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    found = descriptor >= 0 && fstat(descriptor, &st) == 0;
    Py_END_ALLOW_THREADS
    if (!found) {
        if (descriptor >= 0) {
            close(descriptor);
        }
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 0 || (long long)st.st_size > limit
        || (unsigned long long)st.st_size >= (unsigned long long)(PY_SSIZE_T_MAX - 1)) {
        close(descriptor);
        return NULL;
    }
    Py_ssize_t size = (Py_ssize_t)st.st_size;
    PyObject *data = PyBytes_FromStringAndSize(NULL, size + 1); /* one more: growth shows */
    if (data == NULL) {
        PyErr_Clear(); /* read_whole_file meets the same shortage and reports it */
        close(descriptor);
        return NULL;
    }
    ssize_t got;
    Py_BEGIN_ALLOW_THREADS
    got = read(descriptor, PyBytes_AS_STRING(data), (size_t)size + 1);
    close(descriptor);
    Py_END_ALLOW_THREADS
    if (got != (ssize_t)size || _PyBytes_Resize(&data, size) != 0) {
        Py_XDECREF(data);
        PyErr_Clear();
        return NULL;
    }
    return data;
}

static PyObject *read_files(PyObject *self, PyObject *args)
{
    PyObject *paths;
    long long limit;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!L", &PyList_Type, &paths, &limit)) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(paths);
    PyObject *found = PyList_New(count);
    if (found == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *encoded = NULL;
        PyObject *data = NULL;
        if (PyUnicode_FSConverter(PyList_GET_ITEM(paths, i), &encoded)) {
            data = read_plain(PyBytes_AS_STRING(encoded), limit);
            Py_DECREF(encoded);
        } else {
            PyErr_Clear(); /* a path the file system cannot name: read_whole_file says so */
        }
        if (data == NULL) {
            data = Py_NewRef(Py_None);
        }
        PyList_SET_ITEM(found, i, data);
    }
    return found;
}

static PyMethodDef methods[] = {
    {"read_files", read_files, METH_VARARGS,
     "read_files(paths, limit) -> list of bytes or None: each regular file of at most limit "
     "bytes read whole in one read; None where anything is unusual (read_whole_file decides)."},
    {NULL, NULL, 0, NULL}};
#else
static PyMethodDef methods[] = {{NULL, NULL, 0, NULL}};
#endif

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_read_files",
                                    "Small image files read whole (POSIX).", -1, methods};

PyMODINIT_FUNC PyInit__read_files(void) { return PyModule_Create(&module); }
