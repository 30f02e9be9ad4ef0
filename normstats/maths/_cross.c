/*
 * normstats' compiled kernel of channel cross sums, built when normstats is installed.
 *
 * cross(): per image of 8-bit pixels with C interleaved channels, the exact sums
 * sum(x_c * x_d) over its pixels for every pair of channels c < d, in numpy's
 * triu_indices(C, 1) order, accumulated onto int64 outputs. With the sums of squares of
 * normstats.maths._moments they give the exact channel covariance of every image.
 *
 * The loop: a row of H*W*C bytes is cut into blocks of L bytes, L a multiple of C (the
 * largest not above 96), so byte l of every block belongs to channel l % C. For each
 * shift s = 1 .. C-1, lane l accumulates x[l] * x[l + s]: for the lanes whose channel
 * c = l % C has c + s < C, that is x_c * x_{c+s} of one pixel; the other lanes mix two
 * pixels and are thrown away when the lanes are flushed. A product of two bytes is at
 * most 255^2 = 65,025, so it is computed in 16 bits and added into 32-bit lanes, which
 * are flushed into int64 every FLUSH_BLOCKS blocks (65,536 * 65,025 < 2^32) and at the
 * end of the image, through a map from lanes to pairs made once a call. The compiler vectorises the lanes itself (one clone per x86-64
 * level, picked at load), so the same source runs on every platform. Integer arithmetic
 * throughout: the results are exact and identical to numpy's
 * (normstats.maths.covariance).
 *
 * The last bytes of an image, where x[l + s] would pass its end, go through the same loop
 * from a copy padded with zeros.
 *
 * Three channels on a CPU with AVX-512 VBMI take a kernel of their own (image_rgb_vbmi,
 * below) that throws no lane away: ~3x the lanes loop, faster than the moments kernel on
 * the same images. _variants() lists the kernels the CPU runs; _select(name) forces one,
 * so that tests compare each with an oracle.
 *
 * The GIL is released while the kernel runs. Every size is checked before a byte is
 * touched, as in normstats.maths._moments.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_stream_ahead.h"

/* The AVX-512 VBMI kernel of three channels needs gcc 8 or clang 7 on x86-64.
 * NORMSTATS_PORTABLE_ONLY: build as on another architecture (for tests of the build). */
#if defined(__x86_64__) && !defined(NORMSTATS_PORTABLE_ONLY) && \
    ((defined(__clang__) && __clang_major__ >= 7) || (!defined(__clang__) && __GNUC__ >= 8))
#define X86_KERNELS 1
#include <immintrin.h>
#else
#define X86_KERNELS 0
#endif

#define CHANNELS_MAX 128
#define LANES_MAX 128
#define FLUSH_BLOCKS 65536 /* 65536 * 255^2 < 2^32 */

#include "_simd_clones.h"

/* The lane count for C channels: the largest multiple of C not above 96. */
static Py_ssize_t lanes_for(Py_ssize_t channels) {
    Py_ssize_t lanes = (96 / channels) * channels;
    return lanes > 0 ? lanes : channels;
}

/* Where pair (c, d), c < d, sits in triu_indices(C, 1) order. */
static Py_ssize_t pair_index(Py_ssize_t c, Py_ssize_t d, Py_ssize_t channels) {
    return c * channels - c * (c + 1) / 2 + (d - c - 1);
}

/* The pair each lane of the shifts' accumulators holds, or -1 for a lane that mixes two
 * pixels: lane l of shift s (at (s - 1) * lanes + l) holds channel c = l % C times
 * channel c + s when c + s < C. */
static void lane_pairs(Py_ssize_t lanes, Py_ssize_t channels, int32_t *pair_of) {
    for (Py_ssize_t s = 1; s < channels; s++)
        for (Py_ssize_t l = 0; l < lanes; l++) {
            const Py_ssize_t c = l % channels;
            pair_of[(s - 1) * lanes + l] =
                c + s < channels ? (int32_t)pair_index(c, c + s, channels) : -1;
        }
}

/* The same lanes for three channels, the common case, with constant trip counts the
 * compiler unrolls; the pairs are added up from the lanes by masks. */
static const uint32_t FIRST[96] = {
    1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1,
    0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0,
    0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0,
    1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0}; /* lanes of channel 0 */
static const uint32_t SECOND[96] = {
    0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0,
    1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1,
    0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0,
    0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0}; /* lanes of channel 1 */

static inline __attribute__((always_inline)) void block_rgb(const uint8_t *restrict row,
                                                            uint32_t *restrict a,
                                                            uint32_t *restrict b) {
    for (int l = 0; l < 96; l++) {
        const uint16_t v = row[l];
        a[l] += (uint16_t)(v * row[l + 1]);
        b[l] += (uint16_t)(v * row[l + 2]);
    }
}

SIMD_CLONES
static void image_rgb(const uint8_t *restrict pixels, Py_ssize_t length, int64_t *restrict out,
                      uint8_t *restrict pad) {
    /* Whole blocks whose shifted reads, 2 bytes past the block, stay inside. */
    const Py_ssize_t blocks = length >= 2 ? (length - 2) / 96 : 0;
    Py_ssize_t k = 0;
    do {
        const Py_ssize_t stop = blocks - k < FLUSH_BLOCKS ? blocks : k + FLUSH_BLOCKS;
        uint32_t a[96] = {0}, b[96] = {0};
        for (; k < stop; k++)
            block_rgb(pixels + k * 96, a, b);
        if (k == blocks && blocks * 96 < length) {
            /* The rest (at most 96 bytes) from a copy padded with zeros: the lanes that
             * read the padding are thrown away. FLUSH_BLOCKS + 1 blocks still fit. */
            memset(pad, 0, 98);
            memcpy(pad, pixels + blocks * 96, (size_t)(length - blocks * 96));
            block_rgb(pad, a, b);
        }
        uint64_t rg = 0, gb = 0, rb = 0;
        for (int l = 0; l < 96; l++) {
            rg += a[l] * FIRST[l];
            gb += a[l] * SECOND[l];
            rb += b[l] * FIRST[l];
        }
        out[0] += (int64_t)rg;
        out[1] += (int64_t)rb;
        out[2] += (int64_t)gb;
    } while (k < blocks);
}

/* Any channel count: lanes of `lanes` bytes, one set of lanes per shift, at most
 * FLUSH_BLOCKS + 1 blocks added into acc (zeroed by the caller). */
SIMD_CLONES
static void blocks_any(const uint8_t *restrict pixels, Py_ssize_t blocks, Py_ssize_t lanes,
                       Py_ssize_t channels, uint32_t *restrict acc) {
    for (Py_ssize_t k = 0; k < blocks; k++) {
        const uint8_t *row = pixels + k * lanes;
        for (Py_ssize_t s = 1; s < channels; s++) {
            uint32_t *lane = acc + (s - 1) * lanes;
            for (Py_ssize_t l = 0; l < lanes; l++)
                lane[l] += (uint16_t)((uint16_t)row[l] * row[l + s]);
        }
    }
}

/* One image of `length` bytes and C != 3 channels: its pairs accumulated onto `out`.
 * `acc` holds (C - 1) * lanes_for(C) 32-bit lanes; `pair_of` is `lane_pairs`' map of
 * them; `pad` holds lanes_for(C) + C bytes. */
static void image_any(const uint8_t *pixels, Py_ssize_t length, Py_ssize_t channels,
                      int64_t *out, uint32_t *acc, const int32_t *pair_of, uint8_t *pad) {
    const Py_ssize_t lanes = lanes_for(channels), width = (channels - 1) * lanes;
    const Py_ssize_t blocks = length >= channels - 1 ? (length - (channels - 1)) / lanes : 0;
    Py_ssize_t k = 0;
    do {
        const Py_ssize_t run = blocks - k < FLUSH_BLOCKS ? blocks - k : FLUSH_BLOCKS;
        memset(acc, 0, (size_t)width * sizeof *acc);
        blocks_any(pixels + k * lanes, run, lanes, channels, acc);
        k += run;
        if (k == blocks && blocks * lanes < length) {
            memset(pad, 0, (size_t)(lanes + channels));
            memcpy(pad, pixels + blocks * lanes, (size_t)(length - blocks * lanes));
            blocks_any(pad, 1, lanes, channels, acc);
        }
        for (Py_ssize_t i = 0; i < width; i++)
            if (pair_of[i] >= 0)
                out[pair_of[i]] += acc[i];
    } while (k < blocks);
}

#if X86_KERNELS
/* Three channels on AVX-512 VBMI: 64 pixels (192 bytes, three vectors) a step, split into
 * planes of R, G and B bytes by byte permutes (vpermt2b, then vpermb for the bytes of the
 * third vector), widened to 16-bit words; then every pair of planes goes through vpmaddwd,
 * whose 32-bit lane i receives x_c·x_d of pixels 2i and 2i+1: one pair of channels, no
 * lane thrown away. A step adds two such lanes (the low and high halves of the planes),
 * at most 4·255² = 260,100, to an accumulator lane, so the lanes (read as unsigned, the
 * additions wrap) are flushed into int64 every FLUSH_STEPS steps. The last step of an
 * image loads its bytes under a mask (zeros add nothing). */
#define TARGET_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))
#define FLUSH_STEPS 16384 /* 16,384 * 260,100 < 2^32 */

static uint8_t PLANE_LOW[3][64], PLANE_HIGH[3][64]; /* byte indices of channel c */
static uint64_t PLANE_MASK[3];                      /* pixels whose byte is in vector 3 */

static void plane_tables(void) {
    for (int c = 0; c < 3; c++) {
        PLANE_MASK[c] = 0;
        for (int p = 0; p < 64; p++) {
            const int i = 3 * p + c;
            PLANE_LOW[c][p] = (uint8_t)(i < 128 ? i : 0);
            PLANE_HIGH[c][p] = (uint8_t)(i >= 128 ? i - 128 : 0);
            if (i >= 128)
                PLANE_MASK[c] |= (uint64_t)1 << p;
        }
    }
}

TARGET_VBMI static inline __m512i plane_of(__m512i v0, __m512i v1, __m512i v2, int c) {
    const __m512i low = _mm512_permutex2var_epi8(v0, _mm512_loadu_si512(PLANE_LOW[c]), v1);
    return _mm512_mask_permutexvar_epi8(low, PLANE_MASK[c], _mm512_loadu_si512(PLANE_HIGH[c]),
                                        v2);
}

TARGET_VBMI static inline void add_step(__m512i v0, __m512i v1, __m512i v2, __m512i *acc) {
    __m512i words[3][2];
    for (int c = 0; c < 3; c++) {
        const __m512i plane = plane_of(v0, v1, v2, c);
        words[c][0] = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(plane));
        words[c][1] = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(plane, 1));
    }
    for (int h = 0; h < 2; h++) {
        acc[0] = _mm512_add_epi32(acc[0], _mm512_madd_epi16(words[0][h], words[1][h]));
        acc[1] = _mm512_add_epi32(acc[1], _mm512_madd_epi16(words[0][h], words[2][h]));
        acc[2] = _mm512_add_epi32(acc[2], _mm512_madd_epi16(words[1][h], words[2][h]));
    }
}

TARGET_VBMI static inline int64_t unsigned_total(__m512i lanes) {
    const __m512i low = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(lanes));
    const __m512i high = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(lanes, 1));
    return _mm512_reduce_add_epi64(_mm512_add_epi64(low, high));
}

TARGET_VBMI static void image_rgb_vbmi(const uint8_t *pixels, Py_ssize_t length,
                                       int64_t *out, stream_t *stream) {
    const Py_ssize_t steps = length / 192;
    Py_ssize_t k = 0;
    do {
        const Py_ssize_t stop = steps - k < FLUSH_STEPS ? steps : k + FLUSH_STEPS;
        __m512i acc[3] = {_mm512_setzero_si512(), _mm512_setzero_si512(),
                          _mm512_setzero_si512()};
        for (; k < stop; k++) {
            const uint8_t *step = pixels + 192 * k;
            stream_lines(stream, 3); /* the lines it reads, asked for ahead of them */
            add_step(_mm512_loadu_si512(step), _mm512_loadu_si512(step + 64),
                     _mm512_loadu_si512(step + 128), acc);
        }
        const Py_ssize_t rest = length - 192 * steps;
        if (k == steps && rest > 0) { /* the last pixels, under a mask: at most 63 */
            const uint8_t *step = pixels + 192 * steps;
            __m512i v[3];
            for (int i = 0; i < 3; i++) {
                const Py_ssize_t bytes = rest - 64 * i < 0 ? 0 : rest - 64 * i > 64 ? 64
                                                                                : rest - 64 * i;
                const __mmask64 mask = bytes == 64 ? ~(__mmask64)0
                                                   : (((__mmask64)1 << bytes) - 1);
                v[i] = _mm512_maskz_loadu_epi8(mask, step + 64 * i);
            }
            add_step(v[0], v[1], v[2], acc);
        }
        for (int pair = 0; pair < 3; pair++)
            out[pair] += unsigned_total(acc[pair]);
    } while (k < steps);
}

static int has_vbmi(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi");
}
#endif

static int use_vbmi = 0; /* set at import; changed only by _select() */

static void cross_image(const uint8_t *pixels, Py_ssize_t length, Py_ssize_t channels,
                        int64_t *out, uint32_t *acc, const int32_t *pair_of, uint8_t *pad,
                        stream_t *stream) {
    stream_to(stream, pixels);
#if X86_KERNELS
    if (channels == 3 && use_vbmi) {
        image_rgb_vbmi(pixels, length, out, stream);
        return;
    }
#endif
    if (channels == 3)
        image_rgb(pixels, length, out, pad);
    else
        image_any(pixels, length, channels, out, acc, pair_of, pad);
}

/* a * b for a, b >= 0, or -1 where the product would pass PY_SSIZE_T_MAX. */
static Py_ssize_t size_product(Py_ssize_t a, Py_ssize_t b) {
    return a < 0 || b < 0 || (b != 0 && a > PY_SSIZE_T_MAX / b) ? -1 : a * b;
}

static PyObject *cross(PyObject *self, PyObject *args) {
    Py_buffer images, sums;
    Py_ssize_t count, channels;
    if (!PyArg_ParseTuple(args, "y*nnw*", &images, &count, &channels, &sums))
        return NULL;
    PyObject *result = NULL;
    if (count < 0 || channels < 1 || channels > CHANNELS_MAX) {
        PyErr_SetString(PyExc_ValueError, "count must be >= 0 and channels in 1..128");
        goto done;
    }
    if (count > 0 ? images.len % count != 0 : images.len != 0) {
        PyErr_SetString(PyExc_ValueError, "the images do not split into rows of equal size");
        goto done;
    }
    const Py_ssize_t row_bytes = count > 0 ? images.len / count : 0;
    if (row_bytes % channels != 0) {
        PyErr_SetString(PyExc_ValueError, "an image row is not a whole number of pixels");
        goto done;
    }
    const Py_ssize_t pairs = channels * (channels - 1) / 2;
    const Py_ssize_t out_bytes = size_product(size_product(count, pairs), 8);
    if (out_bytes < 0) {
        PyErr_Format(PyExc_OverflowError, "%zd images of %zd channels: more outputs than "
                     "memory can hold", count, channels);
        goto done;
    }
    if (sums.len != out_bytes || (sums.len > 0 && (uintptr_t)sums.buf % 8 != 0)) {
        PyErr_Format(PyExc_ValueError, "sums holds %zd bytes (aligned: %d), the kernel "
                     "expects %zd, aligned to 8", sums.len, (int)((uintptr_t)sums.buf % 8 == 0),
                     out_bytes);
        goto done;
    }
    {
        const uintptr_t a = (uintptr_t)images.buf, b = (uintptr_t)sums.buf;
        if (images.len > 0 && sums.len > 0 && a < b + (uintptr_t)sums.len &&
            b < a + (uintptr_t)images.len) {
            PyErr_SetString(PyExc_ValueError, "images and sums share memory");
            goto done;
        }
    }
    if (pairs == 0 || count == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    {
        const Py_ssize_t lanes = lanes_for(channels), width = (channels - 1) * lanes;
        uint32_t *acc = PyMem_RawMalloc((size_t)width * sizeof(uint32_t));
        int32_t *pair_of = PyMem_RawMalloc((size_t)width * sizeof(int32_t));
        uint8_t *pad = PyMem_RawMalloc((size_t)(lanes + channels + 2));
        if (acc == NULL || pair_of == NULL || pad == NULL) {
            PyMem_RawFree(acc);
            PyMem_RawFree(pair_of);
            PyMem_RawFree(pad);
            PyErr_NoMemory();
            goto done;
        }
        lane_pairs(lanes, channels, pair_of);
        const uint8_t *base = images.buf;
        int64_t *out = sums.buf;
        Py_BEGIN_ALLOW_THREADS
        stream_t stream = stream_start(base, count, row_bytes);
        for (Py_ssize_t n = 0; n < count; n++)
            cross_image(base + n * row_bytes, row_bytes, channels, out + n * pairs, acc,
                        pair_of, pad, &stream);
        Py_END_ALLOW_THREADS
        PyMem_RawFree(acc);
        PyMem_RawFree(pair_of);
        PyMem_RawFree(pad);
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&images);
    PyBuffer_Release(&sums);
    return result;
}

/* What _moments' summary() calls after each part of its images, the capsule `_C_API`:
 * add the cross sums of `count` images (rows of `row_bytes`, channels interleaved),
 * summed over the images, onto `totals` (channels * (channels - 1) / 2 int64s: exact
 * while count * pixels * 255^2 < 2^63, which the caller's parts keep), reading them as
 * cross() does, while the part is still in the core's cache. 0 when memory runs out. */
static int cross_part(const uint8_t *base, Py_ssize_t count, Py_ssize_t row_bytes,
                      Py_ssize_t channels, int64_t *totals) {
    const Py_ssize_t pairs = channels * (channels - 1) / 2;
    if (pairs == 0 || count == 0)
        return 1;
    const Py_ssize_t lanes = lanes_for(channels), width = (channels - 1) * lanes;
    uint32_t *acc = PyMem_RawMalloc((size_t)width * sizeof(uint32_t));
    int32_t *pair_of = PyMem_RawMalloc((size_t)width * sizeof(int32_t));
    uint8_t *pad = PyMem_RawMalloc((size_t)(lanes + channels + 2));
    int64_t *image = PyMem_RawMalloc((size_t)pairs * sizeof(int64_t));
    const int ok = acc != NULL && pair_of != NULL && pad != NULL && image != NULL;
    if (ok) {
        lane_pairs(lanes, channels, pair_of);
        stream_t stream = stream_start(base, count, row_bytes);
        for (Py_ssize_t n = 0; n < count; n++) {
            memset(image, 0, (size_t)pairs * sizeof(int64_t));
            cross_image(base + n * row_bytes, row_bytes, channels, image, acc, pair_of, pad,
                        &stream);
            for (Py_ssize_t p = 0; p < pairs; p++)
                totals[p] += image[p];
        }
    }
    PyMem_RawFree(acc);
    PyMem_RawFree(pair_of);
    PyMem_RawFree(pad);
    PyMem_RawFree(image);
    return ok;
}

/* The kernels this CPU runs for three channels, best first (for tests and benchmarks). */
static PyObject *variants(PyObject *self, PyObject *unused) {
#if X86_KERNELS
    if (has_vbmi())
        return Py_BuildValue("(ss)", "avx512vbmi", "portable");
#endif
    return Py_BuildValue("(s)", "portable");
}

/* Make cross() use kernel `name` for three channels ("portable", or "avx512vbmi" where
 * the CPU has it); return the name of the previous one. */
static PyObject *select_variant(PyObject *self, PyObject *arg) {
    const char *previous = use_vbmi ? "avx512vbmi" : "portable";
    const char *name = PyUnicode_AsUTF8(arg);
    if (name == NULL)
        return NULL;
    if (strcmp(name, "portable") == 0) {
        use_vbmi = 0;
#if X86_KERNELS
    } else if (strcmp(name, "avx512vbmi") == 0 && has_vbmi()) {
        use_vbmi = 1;
#endif
    } else {
        PyErr_Format(PyExc_ValueError, "no cross kernel %R runs on this CPU", arg);
        return NULL;
    }
    return PyUnicode_FromString(previous);
}

static PyMethodDef methods[] = {
    {"cross", cross, METH_VARARGS,
     "cross(images, count, channels, sums)\n\n"
     "Accumulate, for `count` uint8 images (one contiguous buffer, channels interleaved),\n"
     "the sums of x_c * x_d over each image's pixels for every pair c < d (numpy's\n"
     "triu_indices(channels, 1) order) into int64 sums (count, channels*(channels-1)/2)."},
    {"_variants", variants, METH_NOARGS,
     "_variants() -> the three-channel kernels this CPU runs, best first."},
    {"_select", select_variant, METH_O,
     "_select(name) -> the previous name: make cross() use kernel `name` for three channels."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cross",
    "normstats' compiled kernel of channel cross sums (see normstats.maths.covariance).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__cross(void) {
#if X86_KERNELS
    __builtin_cpu_init();
    plane_tables();
    use_vbmi = has_vbmi();
#endif
    PyObject *created = PyModule_Create(&module);
    if (created == NULL)
        return NULL;
    /* cross_part for _moments' summary(): one pass over each part for both kernels */
    PyObject *api = PyCapsule_New((void *)cross_part, "normstats.maths._cross._C_API", NULL);
    if (api == NULL || PyModule_AddObject(created, "_C_API", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
