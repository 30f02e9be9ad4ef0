/*
 * Reading small 8-bit images from memory, one after another: the kernels of
 * normstats/maths/_moments.c and normstats/maths/_cross.c.
 *
 * Their reads cross from image to image too often for the fetches within an image
 * (_moments.c's PREFETCH_BYTES) and the hardware prefetchers to keep memory busy,
 * so as each image starts, the lines of the image IMAGES_AHEAD_BYTES further on are asked
 * into L2. Only for images of at most IMAGES_AHEAD_ROW_MAX bytes (past that, the fetches
 * within an image do it: 64x64x3 ones gained nothing) and calls of more than
 * IMAGES_AHEAD_CALL_MIN bytes (smaller ones, a decoded batch, are in cache already, where
 * the hints cost 1-8%), and never past the call's last image. Measured on a 2-core Xeon
 * VM, two threads, median of 31: 50,000 32x32x3 images in memory from 80% to 93% of the
 * memory's read speed (the compiled pass alone; 11.7 to 9.4 ms), 200,000 16x16x3 from 12.5
 * to 9.3-10.5 ms, 200,000 28x28x1 from 14.8 to 11.0-11.6, 40,000 64x64x1 from 12-13.4
 * to 7.9-8.3; distances of 12 to 48 KB alike; the channel cross sums (covariance) take
 * the same hints.
 */

#ifndef NORMSTATS_IMAGES_AHEAD_H
#define NORMSTATS_IMAGES_AHEAD_H

#define IMAGES_AHEAD_BYTES 24576
#define IMAGES_AHEAD_ROW_MAX 8192
#define IMAGES_AHEAD_CALL_MIN ((Py_ssize_t)1 << 20)

/* The images ahead whose lines each image's start asks for, in a call of `count` images
 * of `row_bytes` bytes each (0: none). */
static inline Py_ssize_t images_ahead(Py_ssize_t count, Py_ssize_t row_bytes) {
    if (row_bytes <= 0 || row_bytes > IMAGES_AHEAD_ROW_MAX ||
        count <= IMAGES_AHEAD_CALL_MIN / row_bytes)
        return 0;
    return (IMAGES_AHEAD_BYTES + row_bytes - 1) / row_bytes;
}

/* As image n of the call at `base` starts: ask for the lines of image n + ahead into L2,
 * when the call holds it. */
static inline void fetch_image_ahead(const uint8_t *base, Py_ssize_t n, Py_ssize_t ahead,
                                     Py_ssize_t count, Py_ssize_t row_bytes) {
    if (ahead == 0 || n + ahead >= count)
        return;
    const uint8_t *later = base + (n + ahead) * row_bytes;
    for (Py_ssize_t k = 0; k < row_bytes; k += 64)
        __builtin_prefetch(later + k, 0, 2);
}

#endif
