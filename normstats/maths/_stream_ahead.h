/*
 * Reading many small 8-bit images from memory, one after another: the kernels of
 * normstats/maths/_moments.c and normstats/maths/_cross.c.
 *
 * Their reads cross from image to image too often for the hardware prefetchers to keep
 * memory busy, so a call that reads images from memory streams its lines into L2
 * STREAM_AHEAD_BYTES before it reads them: each step of a vector kernel asks for as many
 * lines, at the stream's cursor, as it reads itself (stream_lines), and each image's
 * start catches the cursor up to that distance ahead of it (stream_to: the lines a
 * kernel's tail read without asking, or all of them where a kernel does not stream).
 * The asks are spread over the reads on purpose: asked all at once as each image
 * started (the lines of the image 24 KB ahead), they filled the core's queue of misses
 * and stalled it until memory answered. Measured on a 2-core Xeon VM (Sapphire Rapids),
 * 50,000 32x32x3 images in memory, _moments.c's records pass alone, medians of 21 in
 * three alternated rounds: one thread 18.2-19.3 -> 11.2-11.9 ms, two 8.0-8.8 ->
 * 5.4-5.8 ms, where a uint64 sum of the same bytes takes 4.4-5.0 ms; 40,000 64x64x1 and
 * 32x32x4 ones 9.0 -> 5.0-5.4 and 10.2-10.6 -> 6.7-7.0 ms; the whole normstats.compute
 * of the first 10.4 -> 6.8 ms. Distances of 4, 8 and 16 KB: 5.6, 4.8 and 5.0 ms.
 *
 * Only calls of more than STREAM_CALL_MIN bytes stream (smaller ones, a decoded batch,
 * are in cache already, where the asks cost 1-8%), only rows of at most STREAM_ROW_MAX
 * bytes (longer ones are read with the fetches within an image of _moments.c's
 * PREFETCH_BYTES), and nothing at or past the call's last byte is asked for.
 */

#ifndef NORMSTATS_STREAM_AHEAD_H
#define NORMSTATS_STREAM_AHEAD_H

#define STREAM_AHEAD_BYTES 8192
#define STREAM_ROW_MAX 8192
#define STREAM_CALL_MIN ((Py_ssize_t)1 << 20)

/* A call's stream: the next line to ask for, and the end of the call's bytes (off: next
 * at the end). */
typedef struct {
    const uint8_t *next, *end;
} stream_t;

/* The stream of a call of `count` rows of `row_bytes` bytes from `base`. */
static inline stream_t stream_start(const uint8_t *base, Py_ssize_t count,
                                    Py_ssize_t row_bytes) {
    const uint8_t *end = base + count * row_bytes;
    const int on = row_bytes > 0 && row_bytes <= STREAM_ROW_MAX &&
                   count > STREAM_CALL_MIN / row_bytes;
    return (stream_t){on ? base : end, end};
}

static inline int stream_on(const stream_t *stream) { return stream->next < stream->end; }

/* Ask for the next `lines` lines of the stream (a kernel's step, as it reads as many). */
static inline __attribute__((always_inline)) void stream_lines(stream_t *stream, int lines) {
    for (int l = 0; l < lines; l++)
        if (stream->next < stream->end) {
            __builtin_prefetch(stream->next, 0, 2);
            stream->next += 64;
        }
}

/* As the image at `pixels` starts: ask for every line up to STREAM_AHEAD_BYTES past it
 * not asked for yet. */
static inline void stream_to(stream_t *stream, const uint8_t *pixels) {
    const uint8_t *ahead = stream->end - pixels > STREAM_AHEAD_BYTES
                               ? pixels + STREAM_AHEAD_BYTES : stream->end;
    for (; stream->next < ahead; stream->next += 64)
        __builtin_prefetch(stream->next, 0, 2);
}

#endif
