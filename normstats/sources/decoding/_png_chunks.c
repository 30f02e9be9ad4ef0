/*
 * The chunk walk of normstats' PNG fast path, compiled when normstats is installed.
 *
 * plain_layout(data) reads a PNG file's chunk sequence and answers whether it is "plain"
 * (see normstats/sources/decoding/png_fast.py, whose Python walk this mirrors rule for
 * rule and which tests compare it against): the signature, an IHDR first (8-bit grey,
 * grey+alpha, RGB or RGBA, not interlaced), every chunk's CRC right, IDATs in one run, an
 * IEND at the very end, and nothing else but fixed-size metadata chunks, tEXt within
 * Pillow's limit and at most one iCCP before the first IDAT. It returns
 * (height, width, samples, profile_start, profile_stop), the profile offsets -1 without
 * an iCCP chunk (Python checks that Pillow reads the profile), or None.
 *
 * For a 32x32 file the Python walk costs ~3 us, most of it interpreter work around four
 * chunks; this one ~0.5 us. Every offset is checked against the buffer's length before
 * it is read, and no sum of offsets can overflow: the input is an untrusted file
 * (tests/fuzz/test_fuzz_png_chunks.py holds it to the Python walk; tests/sanitize runs
 * it under AddressSanitizer).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static uint32_t crc_table[8][256];

static void make_crc_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            crc_table[t][n] = (crc_table[t - 1][n] >> 8) ^ crc_table[0][crc_table[t - 1][n] & 0xFF];
}

/* CRC-32 (ISO-HDLC, as PNG and zlib use it), eight bytes a step. */
static uint32_t crc32_of(const uint8_t *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        const uint32_t low = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                                  (uint32_t)p[3] << 24);
        c = crc_table[7][low & 0xFF] ^ crc_table[6][(low >> 8) & 0xFF] ^
            crc_table[5][(low >> 16) & 0xFF] ^ crc_table[4][low >> 24] ^
            crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int is_kind(const uint8_t *kind, const char *name) { return memcmp(kind, name, 4) == 0; }

/* Pillow's limit on the text of one file (PngImagePlugin.MAX_TEXT_MEMORY). */
#define TEXT_LIMIT (64LL * 1024 * 1024)

/* Samples per pixel of an 8-bit colour type without a palette, 0 for any other. */
static int samples_of(int colour) {
    switch (colour) {
    case 0: return 1;
    case 4: return 2;
    case 2: return 3;
    case 6: return 4;
    default: return 0;
    }
}

/* The length a metadata chunk must have, -1 for a chunk that is not plain metadata. */
static long metadata_length(const uint8_t *kind) {
    if (is_kind(kind, "gAMA")) return 4;
    if (is_kind(kind, "cHRM")) return 32;
    if (is_kind(kind, "sRGB")) return 1;
    if (is_kind(kind, "pHYs")) return 9;
    if (is_kind(kind, "tIME")) return 7;
    return -1;
}

typedef struct {
    long height, width;
    int samples;
    Py_ssize_t profile_start, profile_stop;
} Layout;

/* The IHDR body (13 bytes at p): 1 when plain, filling the size and samples. */
static int plain_ihdr(const uint8_t *p, Layout *layout) {
    const uint32_t width = be32(p), height = be32(p + 4);
    const int depth = p[8], colour = p[9], compression = p[10], filtering = p[11],
              interlace = p[12];
    layout->samples = samples_of(colour);
    if (!layout->samples || depth != 8 || compression || filtering || interlace)
        return 0;
    if (width == 0 || width >= 0x80000000u || height == 0 || height >= 0x80000000u)
        return 0;
    layout->width = (long)width;
    layout->height = (long)height;
    return 1;
}

/* 1 when `data` is a plain PNG (layout filled in), 0 otherwise. */
static int walk_chunks(const uint8_t *data, Py_ssize_t end, Layout *layout) {
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (end < 8 || memcmp(data, signature, 8) != 0)
        return 0;
    Py_ssize_t position = 8;
    int have_header = 0, idat_runs = 0, previous_idat = 0;
    long long text = 0;
    layout->profile_start = layout->profile_stop = -1;
    while (end - position >= 12) {
        /* The length is compared with what is left before any sum is formed: a length
         * near 2^32 wraps position + 12 + length where Py_ssize_t has 32 bits. */
        const uint32_t declared = be32(data + position);
        if ((uint64_t)declared > (uint64_t)(end - position - 12))
            return 0;
        const Py_ssize_t length = (Py_ssize_t)declared, stop = position + 12 + length;
        const uint8_t *kind = data + position + 4;
        if (crc32_of(kind, length + 4) != be32(data + stop - 4))
            return 0;
        const int idat = is_kind(kind, "IDAT");
        if (!have_header) { /* the first chunk must be a plain IHDR */
            if (!is_kind(kind, "IHDR") || length != 13 || !plain_ihdr(kind + 4, layout))
                return 0;
            have_header = 1;
        } else if (idat) {
            idat_runs += !previous_idat;
        } else if (is_kind(kind, "IEND")) {
            return length == 0 && stop == end && idat_runs == 1;
        } else if (is_kind(kind, "iCCP")) {
            if (idat_runs || layout->profile_start >= 0)
                return 0;
            layout->profile_start = position;
            layout->profile_stop = stop;
        } else if (is_kind(kind, "tEXt")) {
            text += length;
            if (text > TEXT_LIMIT)
                return 0;
        } else if (metadata_length(kind) != length) {
            return 0;
        }
        previous_idat = idat;
        position = stop;
    }
    return 0;
}

static PyObject *plain_layout(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Layout layout;
    /* the GIL is kept: the walk takes well under a microsecond for a small file */
    const int plain = walk_chunks(view.buf, view.len, &layout);
    PyBuffer_Release(&view);
    if (!plain)
        Py_RETURN_NONE;
    return Py_BuildValue("llinn", layout.height, layout.width, layout.samples,
                         layout.profile_start, layout.profile_stop);
}

static PyObject *crc32_py(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint32_t crc = crc32_of(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"plain_layout", plain_layout, METH_O,
     "plain_layout(data)\n\n"
     "(height, width, samples, profile_start, profile_stop) of a plain 8-bit PNG (profile\n"
     "offsets -1 without an iCCP chunk), or None."},
    {"crc32", crc32_py, METH_O, "crc32(data)\n\nCRC-32 of a bytes-like object (as zlib's)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_png_chunks",
    "The chunk walk of normstats' PNG fast path (see normstats.sources.decoding.png_fast).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__png_chunks(void) {
    make_crc_table();
    return PyModule_Create(&module);
}
