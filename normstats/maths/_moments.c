/*
 * normstats' compiled statistics kernels, built when normstats is installed.
 *
 * moments(): per-image, per-channel sum of x, sum of x squared, min and max of 8-bit
 * images, each byte read once. Integer arithmetic throughout, so results are exact and
 * identical to numpy's passes (normstats.maths.image_moments).
 *
 * Each image row (H*W*C bytes, channels interleaved) is cut into blocks of LANES bytes,
 * LANES a multiple of C, so lane l always holds channel l % C. A block updates LANES
 * uint32 sums and sums of squares and LANES uint8 minima and maxima: a loop over
 * contiguous lanes with no dependence between them, which the compiler turns into SIMD
 * code (each function is also built for AVX2 and AVX-512 where the compiler can, and
 * picked at load time by the CPU it runs on). The uint32 accumulators are flushed into
 * int64 every FLUSH_BLOCKS blocks, before 255^2 * FLUSH_BLOCKS could reach 2^32.
 *
 * exponent_bins(): the significands of float64 values binned by exponent, for the exact
 * sums of normstats.maths.exact.
 *
 * The GIL is released while a kernel runs: threads of one process reduce in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define LANES_MAX 128
#define FLUSH_BLOCKS 65536 /* 65536 * 255^2 < 2^32 */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define SIMD_CLONES
#endif

/* The lane count for C channels: the largest multiple of C not above 96 (96 is a
 * multiple of 1, 2, 3, 4, 6 and 8 and of the 32-byte vector). */
static Py_ssize_t lanes_for(Py_ssize_t channels) {
    Py_ssize_t lanes = (96 / channels) * channels;
    return lanes > 0 ? lanes : channels;
}

/* One image of `length` bytes into per-channel outputs (accumulated onto them). */
SIMD_CLONES
static void image_moments(const uint8_t *restrict pixels, Py_ssize_t length, Py_ssize_t channels,
                          int64_t *restrict sums, int64_t *restrict squares,
                          uint8_t *restrict lows, uint8_t *restrict highs) {
    const Py_ssize_t lanes = lanes_for(channels);
    uint32_t s[LANES_MAX], q[LANES_MAX];
    uint8_t lo[LANES_MAX], hi[LANES_MAX];
    int64_t lane_sum[LANES_MAX], lane_sq[LANES_MAX];
    memset(lo, 255, sizeof lo);
    memset(hi, 0, sizeof hi);
    memset(lane_sum, 0, sizeof lane_sum);
    memset(lane_sq, 0, sizeof lane_sq);
    const Py_ssize_t blocks = length / lanes;
    Py_ssize_t b = 0;
    while (b < blocks) {
        const Py_ssize_t stop = blocks - b < FLUSH_BLOCKS ? blocks : b + FLUSH_BLOCKS;
        memset(s, 0, sizeof s);
        memset(q, 0, sizeof q);
        if (lanes == 96) { /* the common case, with a constant trip count */
            for (; b < stop; b++) {
                const uint8_t *row = pixels + b * 96;
                for (int l = 0; l < 96; l++) {
                    const uint8_t v = row[l];
                    s[l] += v;
                    q[l] += (uint16_t)(v * v);
                    lo[l] = v < lo[l] ? v : lo[l];
                    hi[l] = v > hi[l] ? v : hi[l];
                }
            }
        } else {
            for (; b < stop; b++) {
                const uint8_t *row = pixels + b * lanes;
                for (Py_ssize_t l = 0; l < lanes; l++) {
                    const uint8_t v = row[l];
                    s[l] += v;
                    q[l] += (uint16_t)(v * v);
                    lo[l] = v < lo[l] ? v : lo[l];
                    hi[l] = v > hi[l] ? v : hi[l];
                }
            }
        }
        for (Py_ssize_t l = 0; l < lanes; l++) {
            lane_sum[l] += s[l];
            lane_sq[l] += q[l];
        }
    }
    /* The tail, shorter than one block: it starts on a multiple of C as well. */
    for (Py_ssize_t i = blocks * lanes, l = 0; i < length; i++, l++) {
        const uint8_t v = pixels[i];
        lane_sum[l] += v;
        lane_sq[l] += (int64_t)v * v;
        lo[l] = v < lo[l] ? v : lo[l];
        hi[l] = v > hi[l] ? v : hi[l];
    }
    for (Py_ssize_t l = 0, c = 0; l < lanes; l++, c = c + 1 == channels ? 0 : c + 1) {
        sums[c] += lane_sum[l];
        squares[c] += lane_sq[l];
        lows[c] = lo[l] < lows[c] ? lo[l] : lows[c];
        highs[c] = hi[l] > highs[c] ? hi[l] : highs[c];
    }
}

static int check_size(const Py_buffer *buffer, Py_ssize_t expected, const char *name) {
    if (buffer->len != expected) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, the kernel expects %zd", name,
                     buffer->len, expected);
        return 0;
    }
    return 1;
}

static PyObject *moments(PyObject *self, PyObject *args) {
    Py_buffer images, sums, squares, lows, highs;
    Py_ssize_t count, channels;
    if (!PyArg_ParseTuple(args, "y*nnw*w*w*w*", &images, &count, &channels, &sums, &squares,
                          &lows, &highs))
        return NULL;
    PyObject *result = NULL;
    if (count < 0 || channels < 1 || channels > LANES_MAX) {
        PyErr_SetString(PyExc_ValueError, "count must be >= 0 and channels in 1..128");
        goto done;
    }
    if (count > 0 && images.len % count != 0) {
        PyErr_SetString(PyExc_ValueError, "the images do not split into rows of equal size");
        goto done;
    }
    const Py_ssize_t row_bytes = count > 0 ? images.len / count : 0;
    if (row_bytes % channels != 0) {
        PyErr_SetString(PyExc_ValueError, "an image row is not a whole number of pixels");
        goto done;
    }
    const Py_ssize_t cells = count * channels;
    if (!check_size(&sums, cells * 8, "sums") || !check_size(&squares, cells * 8, "squares") ||
        !check_size(&lows, cells, "lows") || !check_size(&highs, cells, "highs"))
        goto done;
    {
        const uint8_t *base = images.buf;
        int64_t *sum_out = sums.buf, *sq_out = squares.buf;
        uint8_t *lo_out = lows.buf, *hi_out = highs.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t n = 0; n < count; n++)
            image_moments(base + n * row_bytes, row_bytes, channels, sum_out + n * channels,
                          sq_out + n * channels, lo_out + n * channels, hi_out + n * channels);
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&images);
    PyBuffer_Release(&sums);
    PyBuffer_Release(&squares);
    PyBuffer_Release(&lows);
    PyBuffer_Release(&highs);
    return result;
}

/* Add the significands of float64 values (as int64 bits, rows x columns) into int64 bins
 * (2048 x columns) by biased exponent: the low 27 bits and the rest. Pieces are below
 * 2^27, so the bins stay exact for 2^36 rows. */
static PyObject *exponent_bins(PyObject *self, PyObject *args) {
    Py_buffer bits, low_sums, high_sums;
    Py_ssize_t columns;
    if (!PyArg_ParseTuple(args, "y*nw*w*", &bits, &columns, &low_sums, &high_sums))
        return NULL;
    PyObject *result = NULL;
    if (columns < 1 || bits.len % (8 * columns) != 0) {
        PyErr_SetString(PyExc_ValueError, "the values do not split into rows of `columns`");
        goto done;
    }
    if (!check_size(&low_sums, 2048 * columns * 8, "low_sums") ||
        !check_size(&high_sums, 2048 * columns * 8, "high_sums"))
        goto done;
    {
        const int64_t *values = bits.buf;
        int64_t *low = low_sums.buf, *high = high_sums.buf;
        const Py_ssize_t total = bits.len / 8;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < total; i++) {
            const int64_t b = values[i];
            const Py_ssize_t c = i % columns;
            const int64_t biased = (b >> 52) & 0x7FF;
            int64_t significand = b & 0xFFFFFFFFFFFFFLL;
            if (biased > 0)
                significand |= (int64_t)1 << 52;
            if (b < 0)
                significand = -significand;
            low[biased * columns + c] += significand & 0x7FFFFFF;
            high[biased * columns + c] += significand >> 27; /* arithmetic shift: floor */
        }
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&bits);
    PyBuffer_Release(&low_sums);
    PyBuffer_Release(&high_sums);
    return result;
}

static PyMethodDef methods[] = {
    {"moments", moments, METH_VARARGS,
     "moments(images, count, channels, sums, squares, lows, highs)\n\n"
     "Accumulate the per-channel sum, sum of squares, min and max of `count` uint8 images\n"
     "(one contiguous buffer, channels interleaved) into int64 sums and squares and uint8\n"
     "lows and highs, each (count, channels)."},
    {"exponent_bins", exponent_bins, METH_VARARGS,
     "exponent_bins(bits, columns, low_sums, high_sums)\n\n"
     "Add the significands of float64 values, given as int64 bits (rows, columns), into\n"
     "int64 bins (2048, columns) by biased exponent: the low 27 bits and the rest."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_moments",
    "normstats' compiled statistics kernels (see normstats.maths.fused).", -1, methods,
};

PyMODINIT_FUNC PyInit__moments(void) { return PyModule_Create(&module); }
