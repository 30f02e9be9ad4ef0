/*
 * normstats' compiled statistics kernels, built when normstats is installed.
 *
 * moments(): per-image, per-channel sum of x, sum of x squared, min and max of 8-bit
 * images, each byte read once. Integer arithmetic throughout, so results are exact and
 * identical to numpy's passes (normstats.maths.image_moments).
 *
 * records(): the same pass making the whole record of each image (its extremes as float64)
 * and the summary's totals as it goes, each image's right after its moments (records_pass):
 * the extremes of all the images, and each image's spreads binned as spread_sums() bins
 * them, for half what a second pass over the records costs.
 *
 * The vector kernels (x86-64 with AVX-512BW, with or without VNNI, or with AVX2; the first
 * one the CPU supports is picked at import):
 *
 *   - Periods. Channels are interleaved, so a row of H*W*C bytes is cut into periods of
 *     P = lcm(C, 64) bytes: byte i of every period belongs to channel i % C. A period is
 *     V = P / 64 blocks of 64 bytes (one AVX-512 vector, two AVX2 ones), and every
 *     accumulator lane below follows one byte offset of the period: one channel.
 *   - Squares. Two periods are read together: the block at offset 64v of period 2t (x)
 *     and that of period 2t+1 (y) hold the same channels byte for byte. Their bytes are
 *     split into 16-bit words (even bytes: x & 0xFF, odd ones: x >> 8) and interleaved,
 *     x's word then y's, so each 32-bit lane of vpmaddwd(u, u) (vpdpwssd with VNNI)
 *     receives x[i]^2 + y[i]^2 for a single byte offset i: channels never mix.
 *   - Sums: the even and odd words added into 16-bit lanes (x[i] + y[i] <= 510 a step),
 *     widened into the 32-bit lanes of the squares' layout at least every SUM_STEPS
 *     steps. Minima and maxima: vpminub and vpmaxub of the bytes themselves.
 *   - Order: the blocks are visited offset by offset (every step of offset 0 in a chunk
 *     of about 16 KB, then every step of offset 64...), so one offset's accumulators
 *     stay in registers while the chunk stays in L1 for the next offset. The hardware
 *     prefetchers do not follow that order; software prefetches do (PREFETCH_BYTES).
 *   - Flushes: the 32-bit lanes go into the int64 outputs every 65,536 pixels
 *     (SEGMENT_PIXELS proves the bound) and at the end of each image: vectors whose
 *     lanes hold the same channels are added up, then each channel takes a masked sum
 *     of its lanes (AVX-512 mask registers; AVX2 builds the masks from the same bits).
 *     The extremes of an image end the same way.
 *   - Ends of rows: after the last pair of periods, whole blocks are added one at a time
 *     and the last bytes (under 64) in scalar code.
 *   - Short rows of many channels: the end of an image grows with the channels, so past
 *     16 channels rows too short to pay for it take the portable loop (min_row_bytes).
 *
 * _variants() lists the kernels the CPU runs; _select(name) forces one, so that tests
 * compare each to an oracle.
 *
 * Measured on one core of an AMD EPYC (Zen 4), 256x256x3 images in cache: 39 GB/s with
 * VNNI, 34 without, 30 with AVX2, 11 with the portable loop below, which is used
 * elsewhere (another architecture, an x86 CPU without AVX2, a compiler other than gcc 8+
 * or clang 7+): blocks of whole pixels whose lanes the compiler vectorises itself, as
 * exact. More figures in normstats.maths.fused.
 *
 * running_sums(): the mean image's running sums, each image added position by position
 * onto uint16 sums and its squares onto uint32 ones, the loop of each variant compiled
 * with its instructions (normstats.maths.mean_image).
 *
 * exponent_bins(): the significands of float64 values binned by exponent, for the exact
 * sums of normstats.maths.exact. spread_sums(): each image's std and variance from its
 * integer sums, summed exactly in fixed point in the same pass, with the totals of the
 * sums themselves (normstats.maths.summary).
 *
 * The GIL is released while a kernel runs: threads of one process reduce in parallel.
 *
 * The entry points trust no argument: every size and product of sizes is checked for
 * overflow, every buffer's length against what the sizes claim, the outputs for their
 * alignment and for sharing memory with another buffer, all before a byte is touched
 * (tests/maths/test_kernel_sizes.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_stream_ahead.h"

/* The vector kernels need gcc 8 or clang 7 (AVX512-VNNI targets) on x86-64.
 * NORMSTATS_PORTABLE_ONLY: build as on another architecture (for tests of the build). */
#if defined(__x86_64__) && !defined(NORMSTATS_PORTABLE_ONLY) && \
    ((defined(__clang__) && __clang_major__ >= 7) || (!defined(__clang__) && __GNUC__ >= 8))
#define X86_KERNELS 1
#include <immintrin.h>
#else
#define X86_KERNELS 0
#endif

#define CHANNELS_MAX 128

/* ---------------------------------------------------------------------------------- */
/* The portable loop                                                                  */
/* ---------------------------------------------------------------------------------- */

#define LANES_MAX 128
#define FLUSH_BLOCKS 65536 /* 65536 * 255^2 < 2^32 */

#include "_simd_clones.h"

/* The lane count for C channels: the largest multiple of C not above 96 (96 is a
 * multiple of 1, 2, 3, 4, 6 and 8 and of the 32-byte vector). */
static Py_ssize_t lanes_for(Py_ssize_t channels) {
    Py_ssize_t lanes = (96 / channels) * channels;
    return lanes > 0 ? lanes : channels;
}

/* One image of `length` bytes into per-channel outputs (accumulated onto them): each
 * row is cut into blocks of `lanes` bytes, a multiple of C, so lane l always holds
 * channel l % C; uint32 lanes are flushed into int64 every FLUSH_BLOCKS blocks. */
SIMD_CLONES
static void portable_image(const uint8_t *restrict pixels, Py_ssize_t length,
                           Py_ssize_t channels, int64_t *restrict sums,
                           int64_t *restrict squares, uint8_t *restrict lows,
                           uint8_t *restrict highs) {
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

#if X86_KERNELS
/* ---------------------------------------------------------------------------------- */
/* The vector kernels: periods of lcm(C, 64) bytes                                    */
/* ---------------------------------------------------------------------------------- */

#define BLOCK 64          /* bytes: one AVX-512 vector, two AVX2 ones */
#define CHUNK_BYTES 16384 /* the span that one chunk's passes (one per block offset) share */
/* Yet at least 16 steps an offset, or long periods would load and store their lanes
 * about as often as they add to them (C = 127: 8 GB/s with one step, 20 with 16). */
#define CHUNK_PAIRS_MIN 16
/* Steps of the 16-bit sums between widenings: 128 * 510 = 65,280 < 2^16. */
#define SUM_STEPS 128
/* Pixels between flushes of the 32-bit lanes. All the lanes of one channel add up to at
 * most (65,536 + 128) * 255^2 = 4,269,801,600 < 2^32 between two flushes (the 128: the
 * whole blocks after the last pair of periods, under two periods of P / C <= 64 pixels
 * each). So does any partial sum of them: a lane, the vectors of a class added up, a
 * masked sum. The 32-bit arithmetic (wrapping, never saturating) is exact. */
#define SEGMENT_PIXELS 65536

#define INLINE static inline __attribute__((always_inline))
/* A kernel loop on its own, with registers of its own. */
#define NOINLINE __attribute__((noinline))
/* Keep two loaded vectors in registers: gcc would otherwise read the same bytes again
 * for each instruction that uses them (as a memory operand), and Zen 4 loads one 64-byte
 * vector a cycle: up to 14% slower. */
#define IN_REGISTERS(x, y) __asm__("" : "+v"(x), "+v"(y))
/* Reading from memory. Where the period is several blocks, a chunk is read offset by
 * offset, each pass striding over the whole chunk, an order the hardware prefetchers do
 * not follow: streamed from memory, one core reduced 32x32x3 images at 11 GB/s (22 from
 * cache) and 256x256x3 ones at 15 (40 from cache). So the first pass asks for each step's
 * bytes in order, into L1, just before reading them (the hardware then streams ahead of
 * that sequential order), and while a chunk is read, the chunk after it in the same image
 * is fetched into L2 PREFETCH_BYTES ahead (about two chunks; into L1 that far ahead, it
 * would evict the chunk being read), but never past the call's last pixel (see
 * fetch_ahead). Measured on one Zen 4 core from memory: 32x32x3 at
 * 20 GB/s, 256x256x3 at 31; from cache and on one-block periods (C = 1, 2, 4, ...: their
 * reads are sequential already, and take neither) nothing changes. */
#define PREFETCH_BYTES 32768
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw")))
#define TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define TARGET_AVX2 __attribute__((target("avx2")))

/* The four kinds of 32-bit lane, by how they are made from a block's 16-bit words:
 * unpacklo(even), unpackhi(even), unpacklo(odd), unpackhi(odd). In each 16-byte granule
 * of the block, lane m (0..3) of a kind holds the byte at KIND_OFFSET + 2m. */
static const int KIND_OFFSET[4] = {0, 8, 1, 9};

/* Channel c's lanes in one 16-lane vector of sums or squares. */
typedef struct {
    uint16_t lane; /* where the vector starts in the sums (and the squares) */
    uint16_t mask; /* bit j: lane j holds channel c */
} sum_term_t;

/* Channel c's bytes in one 64-byte block of minima (and maxima). */
typedef struct {
    uint64_t mask;
    Py_ssize_t block;
} extreme_term_t;

/* Everything the channel count fixes: built once per channel count and kept. */
typedef struct {
    Py_ssize_t channels;      /* C */
    Py_ssize_t period;        /* P = lcm(C, 64) bytes */
    Py_ssize_t blocks;        /* V = P / 64 */
    Py_ssize_t segment_pairs; /* pairs of periods between flushes: SEGMENT_PIXELS pixels */
    Py_ssize_t chunk_pairs;   /* pairs of periods in one chunk (CHUNK_BYTES, SUM_STEPS) */
    Py_ssize_t min_row_bytes; /* shorter rows take the portable loop (see layout_new) */
    /* The flushes. Vectors whose lane 0 holds the same channel hold the same channel
     * lane by lane: `members` lists the vectors (where they start in the sums) class by
     * class, class r (lane 0 in channel r) ending at member_end[r], and a flush adds
     * each class into its first vector. Then channel c is the masked sum of its terms,
     * from sum_end[c - 1] (0 for c = 0) to sum_end[c], over first vectors of classes.
     * The extremes' terms are listed the same way, over the blocks. */
    uint16_t *members;
    Py_ssize_t *member_end;
    sum_term_t *sum_terms;
    Py_ssize_t *sum_end;
    extreme_term_t *extreme_terms;
    Py_ssize_t *extreme_end;
} layout_t;

/* One call's accumulators, laid out by its layout. */
typedef struct {
    const layout_t *layout;
    /* Sums and squares: [4 kinds][V blocks][16 lanes], granule g of a kind at lanes
     * 4g..4g+3 (its bytes 16g + KIND_OFFSET + 2m of the period). Zero between flushes. */
    uint32_t *sums, *squares;
    uint8_t *lows, *highs; /* [P], in byte order: byte i of the period */
    stream_t stream; /* its end, the end of the call's pixels: nothing past it is fetched */
} lanes_t;

static Py_ssize_t gcd(Py_ssize_t a, Py_ssize_t b) {
    while (b) {
        const Py_ssize_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* The byte of the period that lane j of kind k at block v holds. */
static Py_ssize_t lane_byte(int k, Py_ssize_t v, int j) {
    return BLOCK * v + 16 * (j / 4) + KIND_OFFSET[k] + 2 * (j % 4);
}

static void layout_free(layout_t *layout) {
    if (layout == NULL)
        return;
    PyMem_Free(layout->members);
    PyMem_Free(layout->member_end);
    PyMem_Free(layout->sum_terms);
    PyMem_Free(layout->sum_end);
    PyMem_Free(layout->extreme_terms);
    PyMem_Free(layout->extreme_end);
    PyMem_Free(layout);
}

/* The layout of C channels (with the GIL held); NULL with MemoryError set. */
static layout_t *layout_new(Py_ssize_t channels) {
    layout_t *layout = PyMem_Calloc(1, sizeof *layout);
    if (layout == NULL)
        return (layout_t *)PyErr_NoMemory();
    const Py_ssize_t period = channels / gcd(channels, BLOCK) * BLOCK, blocks = period / BLOCK;
    layout->channels = channels;
    layout->period = period;
    layout->blocks = blocks;
    layout->segment_pairs = SEGMENT_PIXELS / (2 * (period / channels));
    const Py_ssize_t chunk = CHUNK_BYTES / (2 * period);
    layout->chunk_pairs = chunk < CHUNK_PAIRS_MIN ? CHUNK_PAIRS_MIN
                          : chunk > SUM_STEPS     ? SUM_STEPS
                                                  : chunk;
    /* A vector of 16 lanes meets at most 16 channels, a block at most 64. */
    const Py_ssize_t vectors = 4 * blocks, classes = vectors < channels ? vectors : channels;
    const Py_ssize_t sum_terms = classes * (channels < 16 ? channels : 16);
    const Py_ssize_t extreme_terms = blocks * (channels < 64 ? channels : 64);
    layout->members = PyMem_Calloc((size_t)vectors, sizeof(uint16_t));
    layout->member_end = PyMem_Calloc((size_t)channels, sizeof(Py_ssize_t));
    layout->sum_terms = PyMem_Calloc((size_t)sum_terms, sizeof(sum_term_t));
    layout->sum_end = PyMem_Calloc((size_t)channels, sizeof(Py_ssize_t));
    layout->extreme_terms = PyMem_Calloc((size_t)extreme_terms, sizeof(extreme_term_t));
    layout->extreme_end = PyMem_Calloc((size_t)channels, sizeof(Py_ssize_t));
    if (!layout->members || !layout->member_end || !layout->sum_terms ||
        !layout->sum_end || !layout->extreme_terms || !layout->extreme_end) {
        layout_free(layout);
        return (layout_t *)PyErr_NoMemory();
    }
    /* The vectors by class: counted on the first pass (in the ends), placed on the second. */
    Py_ssize_t next[CHANNELS_MAX];
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < 4; k++)
            for (Py_ssize_t v = 0; v < blocks; v++) {
                const Py_ssize_t r = lane_byte(k, v, 0) % channels;
                if (pass == 0)
                    layout->member_end[r]++;
                else
                    layout->members[next[r]++] = (uint16_t)(16 * (k * blocks + v));
            }
        for (Py_ssize_t r = 0, end = 0; pass == 0 && r < channels; r++) {
            next[r] = end;
            end = layout->member_end[r] += end;
        }
    }
    /* The terms by channel, the same way: in class r, lane j holds the channel of byte
     * r + lane_byte(0, 0, j). */
    for (int pass = 0; pass < 2; pass++) {
        for (Py_ssize_t r = 0; r < channels; r++) {
            const Py_ssize_t first = r ? layout->member_end[r - 1] : 0;
            if (first == layout->member_end[r])
                continue; /* no vector in this class */
            uint16_t masks[CHANNELS_MAX] = {0};
            for (int j = 0; j < 16; j++)
                masks[(r + lane_byte(0, 0, j)) % channels] |= (uint16_t)(1u << j);
            for (Py_ssize_t c = 0; c < channels; c++)
                if (masks[c] && pass == 0)
                    layout->sum_end[c]++;
                else if (masks[c])
                    layout->sum_terms[next[c]++] =
                        (sum_term_t){layout->members[first], masks[c]};
        }
        for (Py_ssize_t c = 0, end = 0; pass == 0 && c < channels; c++) {
            next[c] = end;
            end = layout->sum_end[c] += end;
        }
    }
    /* The extremes' terms by channel, the same way. */
    for (int pass = 0; pass < 2; pass++) {
        for (Py_ssize_t v = 0; v < blocks; v++) {
            uint64_t masks[CHANNELS_MAX] = {0};
            for (int j = 0; j < BLOCK; j++)
                masks[(BLOCK * v + j) % channels] |= (uint64_t)1 << j;
            for (Py_ssize_t c = 0; c < channels; c++)
                if (masks[c] && pass == 0)
                    layout->extreme_end[c]++;
                else if (masks[c])
                    layout->extreme_terms[next[c]++] = (extreme_term_t){masks[c], v};
        }
        for (Py_ssize_t c = 0, end = 0; pass == 0 && c < channels; c++) {
            next[c] = end;
            end = layout->extreme_end[c] += end;
        }
    }
    /* The end of an image costs the vector kernels about 1 ns a term and 5 ns a channel
     * here: from 17 channels on, more than the portable loop's end of image plus its
     * slower pass over a short row (at 3 to 12 GB/s). Such rows take the portable loop;
     * the bound is where the vector kernels win again, give or take a factor of 2. */
    const Py_ssize_t terms = layout->sum_end[channels - 1] + layout->extreme_end[channels - 1];
    layout->min_row_bytes = channels > 16 ? 8 * (terms + 5 * channels) : 0;
    return layout;
}

/* Fetch the `bytes` from `p` into L1, in order (a step of the first pass). */
INLINE void fetch_in_order(const uint8_t *p, Py_ssize_t bytes) {
    for (Py_ssize_t b = 0; b < bytes; b += 64)
        __builtin_prefetch(p + b, 0, 3);
}

/* Fetch the bytes PREFETCH_BYTES after `p` into L2. Only asked for chunks whose fetches
 * stay within the call's pixels (`fetches_ahead`). */
INLINE void fetch_ahead(const uint8_t *p) {
    __builtin_prefetch(p + PREFETCH_BYTES, 0, 2);
}

/* Whether a chunk of a strided layout ending at `chunk_end` fetches ahead: only while
 * every line it would fetch (all below chunk_end + PREFETCH_BYTES) lies within the call's
 * pixels. A hint past them never faults, but where those pages are not mapped each one
 * costs a page walk: on a virtual machine (AMD EPYC, 2 vCPUs) a lone 256x256x3 array
 * took 63 us with such hints, 25 without them (benchmarks/kernel_speed.py). Within the
 * call's pixels the fetches stay, into the next image of a batch too (where the call
 * does not stream its lines instead: _stream_ahead.h). */
INLINE int fetches_ahead(const uint8_t *end, const uint8_t *chunk_end) {
    return (uintptr_t)end - (uintptr_t)chunk_end >= PREFETCH_BYTES;
}

typedef void (*pairs_fn)(lanes_t *lanes, const uint8_t *base, Py_ssize_t pairs);
typedef void (*block_fn)(lanes_t *lanes, Py_ssize_t offset, const uint8_t *block);
typedef void (*flush_fn)(lanes_t *lanes, int64_t *sums, int64_t *squares);
typedef void (*extremes_fn)(lanes_t *lanes, uint8_t *lows, uint8_t *highs);

/* One image through a vector kernel: its pairs of periods, the whole blocks after them
 * one at a time, then under 64 bytes in scalar code. Inlined into each variant, with
 * that variant's kernels. */
INLINE void lanes_image(lanes_t *lanes, pairs_fn pairs_kernel, block_fn block_kernel,
                        flush_fn flush, extremes_fn extremes, const uint8_t *pixels,
                        Py_ssize_t length, int64_t *sums, int64_t *squares, uint8_t *lows,
                        uint8_t *highs) {
    const layout_t *layout = lanes->layout;
    const Py_ssize_t channels = layout->channels, period = layout->period;
    memset(lanes->lows, 255, (size_t)period);
    memset(lanes->highs, 0, (size_t)period);
    const Py_ssize_t pairs = length / (2 * period);
    for (Py_ssize_t done = 0; done < pairs;) {
        const Py_ssize_t n = pairs - done < layout->segment_pairs ? pairs - done
                                                                  : layout->segment_pairs;
        pairs_kernel(lanes, pixels + done * 2 * period, n);
        done += n;
        if (done < pairs)
            flush(lanes, sums, squares);
    }
    /* Under two periods left: each whole block onto the lanes of its offset. */
    Py_ssize_t at = pairs * 2 * period;
    for (Py_ssize_t b = 0; at + BLOCK <= length; b++, at += BLOCK)
        block_kernel(lanes, b < layout->blocks ? b : b - layout->blocks, pixels + at);
    flush(lanes, sums, squares);
    extremes(lanes, lows, highs);
    /* Under 64 bytes left: straight into the outputs. */
    for (Py_ssize_t c = at % channels; at < length; at++, c = c + 1 == channels ? 0 : c + 1) {
        const uint8_t v = pixels[at];
        sums[c] += v;
        squares[c] += (int64_t)v * v;
        lows[c] = v < lows[c] ? v : lows[c];
        highs[c] = v > highs[c] ? v : highs[c];
    }
}

/* ---------------------------------------------------------------------------------- */
/* AVX-512BW, with or without VNNI: one 64-byte block a vector                        */
/* ---------------------------------------------------------------------------------- */

/* Squares of paired words into 32-bit lanes: vpmaddwd then vpaddd, or one vpdpwssd
 * where the CPU has AVX512-VNNI. Both wrap modulo 2^32 (no saturation). */
typedef __m512i (*square_add_fn)(__m512i sums, __m512i words);

TARGET_AVX512 INLINE __m512i square_add_madd(__m512i sums, __m512i words) {
    return _mm512_add_epi32(sums, _mm512_madd_epi16(words, words));
}

TARGET_AVX512_VNNI INLINE __m512i square_add_vnni(__m512i sums, __m512i words) {
    return _mm512_dpwssd_epi32(sums, words, words);
}

/* One offset's accumulators: squares of the four kinds, byte minima and maxima, and the
 * 16-bit sums of even and odd bytes. Passed to inlined functions only: registers. */
typedef struct {
    __m512i q[4], lo, hi, even, odd;
} offset_t;

/* One step: the blocks at `p` (period 2t) and `p + period` (period 2t + 1) into one
 * offset's accumulators. */
TARGET_AVX512 INLINE void pair_step_avx512(const uint8_t *p, Py_ssize_t period, offset_t *a,
                                           square_add_fn square_add) {
    const __m512i low_bytes = _mm512_set1_epi16(0x00FF);
    __m512i x = _mm512_loadu_si512(p), y = _mm512_loadu_si512(p + period);
    IN_REGISTERS(x, y);
    a->lo = _mm512_min_epu8(a->lo, _mm512_min_epu8(x, y));
    a->hi = _mm512_max_epu8(a->hi, _mm512_max_epu8(x, y));
    const __m512i xe = _mm512_and_si512(x, low_bytes), xo = _mm512_srli_epi16(x, 8);
    const __m512i ye = _mm512_and_si512(y, low_bytes), yo = _mm512_srli_epi16(y, 8);
    a->even = _mm512_add_epi16(a->even, _mm512_add_epi16(xe, ye));
    a->odd = _mm512_add_epi16(a->odd, _mm512_add_epi16(xo, yo));
    a->q[0] = square_add(a->q[0], _mm512_unpacklo_epi16(xe, ye));
    a->q[1] = square_add(a->q[1], _mm512_unpackhi_epi16(xe, ye));
    a->q[2] = square_add(a->q[2], _mm512_unpacklo_epi16(xo, yo));
    a->q[3] = square_add(a->q[3], _mm512_unpackhi_epi16(xo, yo));
}

/* `steps` steps of one offset from `p`, with the fetches PREFETCH_BYTES describes: each
 * step's bytes in order (`in_order`, the first pass), and the next chunk's into L2
 * (`ahead`); or, with a `stream`, the two lines a step reads asked for that far ahead
 * of it (_stream_ahead.h). Called with constants, so each combination is a loop
 * without branches. */
TARGET_AVX512 INLINE void offset_steps_avx512(const uint8_t *p, Py_ssize_t period,
                                              Py_ssize_t steps, offset_t *a, int in_order,
                                              int ahead, stream_t *stream,
                                              square_add_fn square_add) {
    for (Py_ssize_t t = 0; t < steps; t++, p += 2 * period) {
        if (stream != NULL)
            stream_lines(stream, 2);
        if (ahead) {
            fetch_ahead(p);
            fetch_ahead(p + period);
        }
        if (in_order)
            fetch_in_order(p, 2 * period);
        pair_step_avx512(p, period, a, square_add);
    }
}

TARGET_AVX512 INLINE void pairs_avx512(lanes_t *lanes, const uint8_t *base, Py_ssize_t pairs,
                                       square_add_fn square_add) {
    const layout_t *layout = lanes->layout;
    const Py_ssize_t period = layout->period, step = 2 * period, kind = 16 * layout->blocks;
    const __m512i zero = _mm512_setzero_si512();
    const int strided = layout->blocks > 1; /* see PREFETCH_BYTES */
    for (Py_ssize_t first = 0; first < pairs; first += layout->chunk_pairs) {
        const Py_ssize_t steps =
            pairs - first < layout->chunk_pairs ? pairs - first : layout->chunk_pairs;
        const int streamed = stream_on(&lanes->stream);
        const int later = strided && !streamed &&
                          fetches_ahead(lanes->stream.end, base + (first + steps) * step);
        for (Py_ssize_t v = 0; v < layout->blocks; v++) {
            uint32_t *s = lanes->sums + 16 * v, *q = lanes->squares + 16 * v;
            offset_t a = {{_mm512_loadu_si512(q), _mm512_loadu_si512(q + kind),
                           _mm512_loadu_si512(q + 2 * kind), _mm512_loadu_si512(q + 3 * kind)},
                          _mm512_loadu_si512(lanes->lows + BLOCK * v),
                          _mm512_loadu_si512(lanes->highs + BLOCK * v), zero, zero};
            const uint8_t *p = base + first * step + BLOCK * v;
            if (streamed)
                offset_steps_avx512(p, period, steps, &a, 0, 0, &lanes->stream, square_add);
            else if (strided && v == 0 && later)
                offset_steps_avx512(p, period, steps, &a, 1, 1, NULL, square_add);
            else if (strided && v == 0)
                offset_steps_avx512(p, period, steps, &a, 1, 0, NULL, square_add);
            else if (later)
                offset_steps_avx512(p, period, steps, &a, 0, 1, NULL, square_add);
            else
                offset_steps_avx512(p, period, steps, &a, 0, 0, NULL, square_add);
            const __m512i even = a.even, odd = a.odd;
            _mm512_storeu_si512(q, a.q[0]);
            _mm512_storeu_si512(q + kind, a.q[1]);
            _mm512_storeu_si512(q + 2 * kind, a.q[2]);
            _mm512_storeu_si512(q + 3 * kind, a.q[3]);
            _mm512_storeu_si512(lanes->lows + BLOCK * v, a.lo);
            _mm512_storeu_si512(lanes->highs + BLOCK * v, a.hi);
            /* The 16-bit sums, widened the way the squares were paired: same lanes. */
            _mm512_storeu_si512(s, _mm512_add_epi32(_mm512_loadu_si512(s),
                                                    _mm512_unpacklo_epi16(even, zero)));
            _mm512_storeu_si512(s + kind, _mm512_add_epi32(_mm512_loadu_si512(s + kind),
                                                           _mm512_unpackhi_epi16(even, zero)));
            _mm512_storeu_si512(s + 2 * kind, _mm512_add_epi32(_mm512_loadu_si512(s + 2 * kind),
                                                               _mm512_unpacklo_epi16(odd, zero)));
            _mm512_storeu_si512(s + 3 * kind, _mm512_add_epi32(_mm512_loadu_si512(s + 3 * kind),
                                                               _mm512_unpackhi_epi16(odd, zero)));
        }
    }
}

TARGET_AVX512
static void block_avx512(lanes_t *lanes, Py_ssize_t v, const uint8_t *block) {
    const Py_ssize_t kind = 16 * lanes->layout->blocks;
    const __m512i x = _mm512_loadu_si512(block), zero = _mm512_setzero_si512();
    uint8_t *lo = lanes->lows + BLOCK * v, *hi = lanes->highs + BLOCK * v;
    _mm512_storeu_si512(lo, _mm512_min_epu8(_mm512_loadu_si512(lo), x));
    _mm512_storeu_si512(hi, _mm512_max_epu8(_mm512_loadu_si512(hi), x));
    const __m512i xe = _mm512_and_si512(x, _mm512_set1_epi16(0x00FF));
    const __m512i xo = _mm512_srli_epi16(x, 8);
    /* With zero words beside them, the words widen into the lanes of each kind. */
    const __m512i u[4] = {_mm512_unpacklo_epi16(xe, zero), _mm512_unpackhi_epi16(xe, zero),
                          _mm512_unpacklo_epi16(xo, zero), _mm512_unpackhi_epi16(xo, zero)};
    for (int k = 0; k < 4; k++) {
        uint32_t *s = lanes->sums + k * kind + 16 * v, *q = lanes->squares + k * kind + 16 * v;
        _mm512_storeu_si512(s, _mm512_add_epi32(_mm512_loadu_si512(s), u[k]));
        _mm512_storeu_si512(q, _mm512_add_epi32(_mm512_loadu_si512(q),
                                                _mm512_madd_epi16(u[k], u[k])));
    }
}

/* The sum of a vector's 32-bit lanes modulo 2^32 (every such sum is below 2^32, see
 * SEGMENT_PIXELS). Not _mm512_reduce_add_epi32: gcc's adds in signed int, and a sum past
 * 2^31 overflows it, which is undefined (UBSan reports it: tests/sanitize). The vector
 * adds below are unsigned, they wrap. */
TARGET_AVX512 INLINE uint32_t sum_lanes_512(__m512i v) {
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v),
                                       _mm512_extracti64x4_epi64(v, 1));
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(x);
}

/* The AVX-512 flush. Vectors of a class (lane 0 in the same channel) hold the same
 * channel lane by lane: each class is added up into its first vector. Then channel c is
 * the masked sum of its lanes in those, reduced to one number. Every sum formed is part
 * of one channel's total since the last flush: below 2^32 (SEGMENT_PIXELS). */
TARGET_AVX512
static void flush_avx512(lanes_t *lanes, int64_t *sums, int64_t *squares) {
    const layout_t *layout = lanes->layout;
    uint32_t *all_sums = lanes->sums, *all_squares = lanes->squares;
    for (Py_ssize_t r = 0, first = 0; r < layout->channels; first = layout->member_end[r++]) {
        if (layout->member_end[r] - first < 2)
            continue;
        uint32_t *s_first = all_sums + layout->members[first];
        uint32_t *q_first = all_squares + layout->members[first];
        __m512i s = _mm512_loadu_si512(s_first), q = _mm512_loadu_si512(q_first);
        for (Py_ssize_t i = first + 1; i < layout->member_end[r]; i++) {
            s = _mm512_add_epi32(s, _mm512_loadu_si512(all_sums + layout->members[i]));
            q = _mm512_add_epi32(q, _mm512_loadu_si512(all_squares + layout->members[i]));
        }
        _mm512_storeu_si512(s_first, s);
        _mm512_storeu_si512(q_first, q);
    }
    const sum_term_t *term = layout->sum_terms;
    for (Py_ssize_t c = 0; c < layout->channels; c++) {
        __m512i s = _mm512_setzero_si512(), q = _mm512_setzero_si512();
        for (; term < layout->sum_terms + layout->sum_end[c]; term++) {
            s = _mm512_mask_add_epi32(s, term->mask, s, _mm512_loadu_si512(all_sums + term->lane));
            q = _mm512_mask_add_epi32(q, term->mask, q,
                                      _mm512_loadu_si512(all_squares + term->lane));
        }
        sums[c] += sum_lanes_512(s);
        squares[c] += sum_lanes_512(q);
    }
    memset(all_sums, 0, (size_t)(2 * 4 * layout->period));
}

/* The smallest byte of `lo` and the largest of `hi` onto *low and *high (SSE2). */
INLINE void fold_extremes(__m128i lo, __m128i hi, uint8_t *low, uint8_t *high) {
    lo = _mm_min_epu8(lo, _mm_srli_si128(lo, 8));
    hi = _mm_max_epu8(hi, _mm_srli_si128(hi, 8));
    lo = _mm_min_epu8(lo, _mm_srli_si128(lo, 4));
    hi = _mm_max_epu8(hi, _mm_srli_si128(hi, 4));
    lo = _mm_min_epu8(lo, _mm_srli_si128(lo, 2));
    hi = _mm_max_epu8(hi, _mm_srli_si128(hi, 2));
    lo = _mm_min_epu8(lo, _mm_srli_si128(lo, 1));
    hi = _mm_max_epu8(hi, _mm_srli_si128(hi, 1));
    const uint8_t l = (uint8_t)_mm_cvtsi128_si32(lo), h = (uint8_t)_mm_cvtsi128_si32(hi);
    *low = l < *low ? l : *low;
    *high = h > *high ? h : *high;
}

/* The AVX-512 end of an image's extremes: channel by channel, masked minima and maxima
 * of the blocks, then of the bytes. */
TARGET_AVX512
static void extremes_avx512(lanes_t *lanes, uint8_t *lows, uint8_t *highs) {
    const layout_t *layout = lanes->layout;
    const extreme_term_t *term = layout->extreme_terms;
    for (Py_ssize_t c = 0; c < layout->channels; c++) {
        __m512i lo = _mm512_set1_epi8((char)255), hi = _mm512_setzero_si512();
        for (; term < layout->extreme_terms + layout->extreme_end[c]; term++) {
            const Py_ssize_t at = BLOCK * term->block;
            lo = _mm512_mask_min_epu8(lo, term->mask, lo, _mm512_loadu_si512(lanes->lows + at));
            hi = _mm512_mask_max_epu8(hi, term->mask, hi, _mm512_loadu_si512(lanes->highs + at));
        }
        const __m256i l = _mm256_min_epu8(_mm512_castsi512_si256(lo),
                                          _mm512_extracti64x4_epi64(lo, 1));
        const __m256i h = _mm256_max_epu8(_mm512_castsi512_si256(hi),
                                          _mm512_extracti64x4_epi64(hi, 1));
        fold_extremes(_mm_min_epu8(_mm256_castsi256_si128(l), _mm256_extracti128_si256(l, 1)),
                      _mm_max_epu8(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)),
                      lows + c, highs + c);
    }
}

TARGET_AVX512 NOINLINE
static void pairs_avx512bw(lanes_t *lanes, const uint8_t *base, Py_ssize_t pairs) {
    pairs_avx512(lanes, base, pairs, square_add_madd);
}

TARGET_AVX512_VNNI NOINLINE
static void pairs_avx512vnni(lanes_t *lanes, const uint8_t *base, Py_ssize_t pairs) {
    pairs_avx512(lanes, base, pairs, square_add_vnni);
}

/* ---------------------------------------------------------------------------------- */
/* AVX-512, three channels, small images: every accumulator in registers               */
/* ---------------------------------------------------------------------------------- */

/* RGB is the common case, and on small images the general end of an image (lanes stored,
 * loaded again, flushed by tables, memsets) cost as much as reading the pixels: 62 ns an
 * image against 87 for the bytes of a 32x32x3 one. For three channels (a period of 3
 * blocks) and images of under SUM_STEPS pairs of periods (128x128x3 and below), the same
 * arithmetic keeps its 24 accumulators in registers, reads the pairs of periods in order
 * (sequential reads: the hardware prefetchers follow them), and ends by blends and
 * register folds. Byte i of block v belongs to channel (64v + i) % 3 = (v + i) % 3. */
#define RGB_PERIOD 192
/* Pairs of periods below SUM_STEPS: at most 127 * 510 = 64,770 in a 16-bit lane; the
 * blocks after them are widened straight into 32-bit lanes, as block_avx512 does. An
 * image's channel total stays below 2^32: (49,152 / 3) * 255^2. */
#define RGB_BYTES (SUM_STEPS * 2 * RGB_PERIOD)

/* rgb_lane_masks[m]: lanes j of a vector of sums or squares whose byte (lane_byte(0, 0, j),
 * a kind's offsets aside) is m modulo 3; rgb_byte_masks[m]: bytes i of a block with
 * i % 3 == m. Set at import. */
static uint16_t rgb_lane_masks[3];
static uint64_t rgb_byte_masks[3];

static void rgb_masks_init(void) {
    for (int j = 0; j < 16; j++)
        rgb_lane_masks[lane_byte(0, 0, j) % 3] |= (uint16_t)(1u << j);
    for (int i = 0; i < BLOCK; i++)
        rgb_byte_masks[i % 3] |= (uint64_t)1 << i;
}

/* Lanes of class r (lane 0's byte r modulo 3) hold channel (r + m) % 3 where lane_byte is
 * m modulo 3: channel c gathers class c's lanes of m = 0, class (c + 2)'s of m = 1 and
 * class (c + 1)'s of m = 2. Its total is below 2^32 (RGB_BYTES). */
TARGET_AVX512 INLINE uint32_t rgb_channel_sum(const __m512i *classes, int c) {
    const __m512i mixed = _mm512_mask_blend_epi32(rgb_lane_masks[2], classes[c],
                                                  classes[(c + 1) % 3]);
    return sum_lanes_512(_mm512_mask_blend_epi32(rgb_lane_masks[1], mixed,
                                                 classes[(c + 2) % 3]));
}

/* Byte i of block v holds channel (v + i) % 3: channel c takes block c's bytes of
 * i % 3 == 0, block (c + 2)'s of 1 and block (c + 1)'s of 2. */
TARGET_AVX512 INLINE __m256i rgb_channel_bytes(const __m512i *blocks, int c, int lowest) {
    const __m512i mixed = _mm512_mask_blend_epi8(rgb_byte_masks[2], blocks[c],
                                                 blocks[(c + 1) % 3]);
    const __m512i bytes = _mm512_mask_blend_epi8(rgb_byte_masks[1], mixed, blocks[(c + 2) % 3]);
    const __m256i a = _mm512_castsi512_si256(bytes), b = _mm512_extracti64x4_epi64(bytes, 1);
    return lowest ? _mm256_min_epu8(a, b) : _mm256_max_epu8(a, b);
}

/* The lanes of squares (q) and of sums widened from 16-bit words (s) of kind k, made by
 * a block (its bytes' words beside zero words): block_avx512's arithmetic, in registers. */
TARGET_AVX512 INLINE void rgb_block(__m512i x, __m512i s[4], __m512i q[4], __m512i *lo,
                                    __m512i *hi) {
    const __m512i zero = _mm512_setzero_si512();
    *lo = _mm512_min_epu8(*lo, x);
    *hi = _mm512_max_epu8(*hi, x);
    const __m512i xe = _mm512_and_si512(x, _mm512_set1_epi16(0x00FF));
    const __m512i xo = _mm512_srli_epi16(x, 8);
    const __m512i u[4] = {_mm512_unpacklo_epi16(xe, zero), _mm512_unpackhi_epi16(xe, zero),
                          _mm512_unpacklo_epi16(xo, zero), _mm512_unpackhi_epi16(xo, zero)};
    for (int k = 0; k < 4; k++) {
        s[k] = _mm512_add_epi32(s[k], u[k]);
        q[k] = _mm512_add_epi32(q[k], _mm512_madd_epi16(u[k], u[k]));
    }
}

TARGET_AVX512 INLINE void rgb_avx512(const uint8_t *pixels, Py_ssize_t length, int64_t *sums,
                                     int64_t *squares, uint8_t *lows, uint8_t *highs,
                                     stream_t *stream, square_add_fn square_add) {
    const __m512i zero = _mm512_setzero_si512();
    const Py_ssize_t pairs = length / (2 * RGB_PERIOD), rest = pairs * 2 * RGB_PERIOD;
    __m512i lo[3], hi[3], sum_classes[3] = {zero, zero, zero};
    __m512i square_classes[3] = {zero, zero, zero};
    /* Offset by offset, as pairs_avx512 (each offset's 8 accumulators in registers, then
     * added into the classes: 20 registers live, not 32), each step asking for the
     * stream's next two lines where the call streams (_stream_ahead.h), the first pass
     * for each step's bytes in order otherwise (PREFETCH_BYTES). Every index is a
     * constant once unrolled: an array indexed at run time would live in memory, stored
     * at every step. */
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++) {
        offset_t a = {{zero, zero, zero, zero}, _mm512_set1_epi8((char)255), zero, zero, zero};
        if (stream_on(stream))
            offset_steps_avx512(pixels + BLOCK * v, RGB_PERIOD, pairs, &a, 0, 0, stream,
                                square_add);
        else
            offset_steps_avx512(pixels + BLOCK * v, RGB_PERIOD, pairs, &a, v == 0, 0, NULL,
                                square_add);
        __m512i *q = a.q;
        __m512i s[4] = {_mm512_unpacklo_epi16(a.even, zero), _mm512_unpackhi_epi16(a.even, zero),
                        _mm512_unpacklo_epi16(a.odd, zero), _mm512_unpackhi_epi16(a.odd, zero)};
        lo[v] = a.lo;
        hi[v] = a.hi;
        /* Under two periods left: the whole blocks of this offset (the v-th and, under
         * two blocks, the (v + 3)-th after the pairs). */
        for (Py_ssize_t at = rest + BLOCK * v; at + BLOCK <= length && at < rest + 5 * BLOCK;
             at += 3 * BLOCK)
            rgb_block(_mm512_loadu_si512(pixels + at), s, q, &lo[v], &hi[v]);
        /* Vectors whose lane 0 holds the same byte modulo 3 (64v + KIND_OFFSET[k]) hold the
         * same channels lane by lane: their class's. */
        for (int k = 0; k < 4; k++) {
            const int r = (BLOCK * v + KIND_OFFSET[k]) % 3;
            sum_classes[r] = _mm512_add_epi32(sum_classes[r], s[k]);
            square_classes[r] = _mm512_add_epi32(square_classes[r], q[k]);
        }
    }
#pragma GCC unroll 3
    for (int c = 0; c < 3; c++) {
        sums[c] += rgb_channel_sum(sum_classes, c);
        squares[c] += rgb_channel_sum(square_classes, c);
        const __m256i l = rgb_channel_bytes(lo, c, 1), h = rgb_channel_bytes(hi, c, 0);
        fold_extremes(_mm_min_epu8(_mm256_castsi256_si128(l), _mm256_extracti128_si256(l, 1)),
                      _mm_max_epu8(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)),
                      lows + c, highs + c);
    }
    /* Under 64 bytes left: straight into the outputs. */
    Py_ssize_t at = rest + (length - rest) / BLOCK * BLOCK;
    for (Py_ssize_t c = at % 3; at < length; at++, c = c + 1 == 3 ? 0 : c + 1) {
        const uint8_t value = pixels[at];
        sums[c] += value;
        squares[c] += (int64_t)value * value;
        lows[c] = value < lows[c] ? value : lows[c];
        highs[c] = value > highs[c] ? value : highs[c];
    }
}

TARGET_AVX512
static void image_avx512(lanes_t *lanes, const uint8_t *pixels, Py_ssize_t length,
                         int64_t *sums, int64_t *squares, uint8_t *lows, uint8_t *highs) {
    if (lanes->layout->channels == 3 && length < RGB_BYTES)
        rgb_avx512(pixels, length, sums, squares, lows, highs, &lanes->stream, square_add_madd);
    else
        lanes_image(lanes, pairs_avx512bw, block_avx512, flush_avx512, extremes_avx512,
                    pixels, length, sums, squares, lows, highs);
}

TARGET_AVX512_VNNI
static void image_avx512vnni(lanes_t *lanes, const uint8_t *pixels, Py_ssize_t length,
                             int64_t *sums, int64_t *squares, uint8_t *lows, uint8_t *highs) {
    if (lanes->layout->channels == 3 && length < RGB_BYTES)
        rgb_avx512(pixels, length, sums, squares, lows, highs, &lanes->stream, square_add_vnni);
    else
        lanes_image(lanes, pairs_avx512vnni, block_avx512, flush_avx512, extremes_avx512,
                    pixels, length, sums, squares, lows, highs);
}

/* ---------------------------------------------------------------------------------- */
/* AVX2: the same lanes, a block as two 32-byte halves                                */
/* ---------------------------------------------------------------------------------- */

/* Half h of a block makes lanes 8h..8h+7 of each kind: the unpacks work within 16-byte
 * granules, AVX2's as AVX-512's. */

/* One half's accumulators, as offset_t: passed to inlined functions only, registers. */
typedef struct {
    __m256i q[4], lo, hi, even, odd;
} half_t;

/* One step: the halves at `p` (period 2t) and `p + period` (period 2t + 1) into one
 * half's accumulators (pair_step_avx512 in two halves). */
TARGET_AVX2 INLINE void pair_step_avx2(const uint8_t *p, Py_ssize_t period, half_t *a) {
    const __m256i low_bytes = _mm256_set1_epi16(0x00FF);
    __m256i x = _mm256_loadu_si256((const __m256i *)p),
            y = _mm256_loadu_si256((const __m256i *)(p + period));
    IN_REGISTERS(x, y);
    a->lo = _mm256_min_epu8(a->lo, _mm256_min_epu8(x, y));
    a->hi = _mm256_max_epu8(a->hi, _mm256_max_epu8(x, y));
    const __m256i xe = _mm256_and_si256(x, low_bytes), xo = _mm256_srli_epi16(x, 8);
    const __m256i ye = _mm256_and_si256(y, low_bytes), yo = _mm256_srli_epi16(y, 8);
    a->even = _mm256_add_epi16(a->even, _mm256_add_epi16(xe, ye));
    a->odd = _mm256_add_epi16(a->odd, _mm256_add_epi16(xo, yo));
    const __m256i u[4] = {_mm256_unpacklo_epi16(xe, ye), _mm256_unpackhi_epi16(xe, ye),
                          _mm256_unpacklo_epi16(xo, yo), _mm256_unpackhi_epi16(xo, yo)};
    for (int k = 0; k < 4; k++)
        a->q[k] = _mm256_add_epi32(a->q[k], _mm256_madd_epi16(u[k], u[k]));
}

TARGET_AVX2 NOINLINE
static void pairs_avx2(lanes_t *lanes, const uint8_t *base, Py_ssize_t pairs) {
    const layout_t *layout = lanes->layout;
    const Py_ssize_t period = layout->period, step = 2 * period, kind = 16 * layout->blocks;
    const __m256i zero = _mm256_setzero_si256();
    const int strided = layout->blocks > 1; /* see PREFETCH_BYTES */
    for (Py_ssize_t first = 0; first < pairs; first += layout->chunk_pairs) {
        const Py_ssize_t steps =
            pairs - first < layout->chunk_pairs ? pairs - first : layout->chunk_pairs;
        const int streamed = stream_on(&lanes->stream);
        const int later = strided && !streamed &&
                          fetches_ahead(lanes->stream.end, base + (first + steps) * step);
        for (Py_ssize_t h = 0; h < 2 * layout->blocks; h++) {
            const Py_ssize_t v = h / 2, lane = 16 * v + 8 * (h % 2), byte = 32 * h;
            uint32_t *s = lanes->sums + lane, *q = lanes->squares + lane;
            half_t a = {{_mm256_loadu_si256((const __m256i *)q),
                         _mm256_loadu_si256((const __m256i *)(q + kind)),
                         _mm256_loadu_si256((const __m256i *)(q + 2 * kind)),
                         _mm256_loadu_si256((const __m256i *)(q + 3 * kind))},
                        _mm256_loadu_si256((const __m256i *)(lanes->lows + byte)),
                        _mm256_loadu_si256((const __m256i *)(lanes->highs + byte)), zero, zero};
            const uint8_t *p = base + first * step + byte;
            for (Py_ssize_t t = 0; t < steps; t++, p += step) {
                if (streamed) /* a step reads two halves: one line */
                    stream_lines(&lanes->stream, 1);
                else if (strided && h == 0)
                    fetch_in_order(p, step);
                if (later && h % 2 == 0) { /* a block's two halves share its lines */
                    fetch_ahead(p);
                    fetch_ahead(p + period);
                }
                pair_step_avx2(p, period, &a);
            }
            for (int k = 0; k < 4; k++)
                _mm256_storeu_si256((__m256i *)(q + k * kind), a.q[k]);
            _mm256_storeu_si256((__m256i *)(lanes->lows + byte), a.lo);
            _mm256_storeu_si256((__m256i *)(lanes->highs + byte), a.hi);
            const __m256i widened[4] = {
                _mm256_unpacklo_epi16(a.even, zero), _mm256_unpackhi_epi16(a.even, zero),
                _mm256_unpacklo_epi16(a.odd, zero), _mm256_unpackhi_epi16(a.odd, zero)};
            for (int k = 0; k < 4; k++) {
                __m256i *sk = (__m256i *)(s + k * kind);
                _mm256_storeu_si256(sk, _mm256_add_epi32(_mm256_loadu_si256(sk), widened[k]));
            }
        }
    }
}

TARGET_AVX2
static void block_avx2(lanes_t *lanes, Py_ssize_t v, const uint8_t *block) {
    const Py_ssize_t kind = 16 * lanes->layout->blocks;
    const __m256i zero = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(block + 32 * h));
        __m256i *lo = (__m256i *)(lanes->lows + BLOCK * v + 32 * h);
        __m256i *hi = (__m256i *)(lanes->highs + BLOCK * v + 32 * h);
        _mm256_storeu_si256(lo, _mm256_min_epu8(_mm256_loadu_si256(lo), x));
        _mm256_storeu_si256(hi, _mm256_max_epu8(_mm256_loadu_si256(hi), x));
        const __m256i xe = _mm256_and_si256(x, _mm256_set1_epi16(0x00FF));
        const __m256i xo = _mm256_srli_epi16(x, 8);
        const __m256i u[4] = {_mm256_unpacklo_epi16(xe, zero), _mm256_unpackhi_epi16(xe, zero),
                              _mm256_unpacklo_epi16(xo, zero), _mm256_unpackhi_epi16(xo, zero)};
        for (int k = 0; k < 4; k++) {
            const Py_ssize_t lane = k * kind + 16 * v + 8 * h;
            __m256i *s = (__m256i *)(lanes->sums + lane), *q = (__m256i *)(lanes->squares + lane);
            _mm256_storeu_si256(s, _mm256_add_epi32(_mm256_loadu_si256(s), u[k]));
            _mm256_storeu_si256(q, _mm256_add_epi32(_mm256_loadu_si256(q),
                                                    _mm256_madd_epi16(u[k], u[k])));
        }
    }
}

/* Lane j of the result all ones where bit j of `bits` is set (j < 8). */
TARGET_AVX2 INLINE __m256i lane_mask(unsigned bits) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)bits), bit), bit);
}

/* Byte j of the result all ones where bit j of `bits` is set (j < 32). */
TARGET_AVX2 INLINE __m256i byte_mask(uint32_t bits) {
    /* Byte j gets byte j / 8 of the bits (vpshufb works within 16-byte halves, each of
     * which holds all four bytes of the broadcast), then keeps bit j % 8 of it. */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i spread_bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread_bits, bit), bit);
}

TARGET_AVX2 INLINE uint32_t sum_lanes(__m256i v) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(h);
}

/* The AVX2 flush: the AVX-512 one with vector masks made from the terms' bits. */
TARGET_AVX2
static void flush_avx2(lanes_t *lanes, int64_t *sums, int64_t *squares) {
    const layout_t *layout = lanes->layout;
    uint32_t *all_sums = lanes->sums, *all_squares = lanes->squares;
    for (Py_ssize_t r = 0, first = 0; r < layout->channels; first = layout->member_end[r++])
        for (int h = 0; h < 16 && layout->member_end[r] - first > 1; h += 8) {
            __m256i *s_first = (__m256i *)(all_sums + layout->members[first] + h);
            __m256i *q_first = (__m256i *)(all_squares + layout->members[first] + h);
            __m256i s = _mm256_loadu_si256(s_first), q = _mm256_loadu_si256(q_first);
            for (Py_ssize_t i = first + 1; i < layout->member_end[r]; i++) {
                const Py_ssize_t at = layout->members[i] + h;
                s = _mm256_add_epi32(s, _mm256_loadu_si256((const __m256i *)(all_sums + at)));
                q = _mm256_add_epi32(q, _mm256_loadu_si256((const __m256i *)(all_squares + at)));
            }
            _mm256_storeu_si256(s_first, s);
            _mm256_storeu_si256(q_first, q);
        }
    const sum_term_t *term = layout->sum_terms;
    for (Py_ssize_t c = 0; c < layout->channels; c++) {
        __m256i s = _mm256_setzero_si256(), q = _mm256_setzero_si256();
        for (; term < layout->sum_terms + layout->sum_end[c]; term++)
            for (int h = 0; h < 16; h += 8) {
                const unsigned bits = (term->mask >> h) & 0xFF;
                if (bits == 0)
                    continue;
                const __m256i mask = lane_mask(bits);
                const Py_ssize_t at = term->lane + h;
                s = _mm256_add_epi32(s, _mm256_and_si256(mask, _mm256_loadu_si256(
                                                                   (const __m256i *)(all_sums + at))));
                q = _mm256_add_epi32(q, _mm256_and_si256(mask, _mm256_loadu_si256(
                                                                   (const __m256i *)(all_squares + at))));
            }
        sums[c] += sum_lanes(s);
        squares[c] += sum_lanes(q);
    }
    memset(all_sums, 0, (size_t)(2 * 4 * layout->period));
}

/* The AVX2 end of an image's extremes: the AVX-512 one with vector masks. */
TARGET_AVX2
static void extremes_avx2(lanes_t *lanes, uint8_t *lows, uint8_t *highs) {
    const layout_t *layout = lanes->layout;
    const extreme_term_t *term = layout->extreme_terms;
    const __m256i ones = _mm256_set1_epi8((char)255);
    for (Py_ssize_t c = 0; c < layout->channels; c++) {
        __m256i lo = ones, hi = _mm256_setzero_si256();
        for (; term < layout->extreme_terms + layout->extreme_end[c]; term++)
            for (int h = 0; h < 64; h += 32) {
                const uint32_t bits = (uint32_t)(term->mask >> h);
                if (bits == 0)
                    continue;
                const __m256i mask = byte_mask(bits);
                const Py_ssize_t at = BLOCK * term->block + h;
                const __m256i x = _mm256_loadu_si256((const __m256i *)(lanes->lows + at));
                const __m256i y = _mm256_loadu_si256((const __m256i *)(lanes->highs + at));
                lo = _mm256_min_epu8(lo, _mm256_blendv_epi8(ones, x, mask));
                hi = _mm256_max_epu8(hi, _mm256_and_si256(mask, y));
            }
        fold_extremes(_mm_min_epu8(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1)),
                      _mm_max_epu8(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)),
                      lows + c, highs + c);
    }
}

/* ---------------------------------------------------------------------------------- */
/* AVX2, three channels, small images: rgb_avx512's plan, a block as two halves        */
/* ---------------------------------------------------------------------------------- */

/* The general end of an image (lanes stored, flushed by tables, memsets) cost as much
 * here as with AVX-512: batches of 32x32x3 images went at 4.7 GB/s from cache on one
 * core of an AMD EPYC without AVX-512, 256x256x3 ones at 8.3. So the same images as
 * rgb_avx512's (three channels, under SUM_STEPS pairs of periods) keep their accumulators
 * here too: each of the period's six 32-byte halves in turn (eight vectors in registers
 * while its steps run), then added into three classes by the channel of their lane 0
 * (sums, squares) or byte 0 (extremes), ended by blends. Half h starts at byte 32h of the
 * period, whose channel is 2h % 3; lane j of a kind holds the byte lane_byte(0, 0, j)
 * after the kind's first (j < 8: the unpacks work within 16-byte granules, as AVX-512's).
 * Where the call streams (_stream_ahead.h), each step asks for the stream's next line;
 * otherwise the first pass fetches the bytes PREFETCH_BYTES ahead, within the call's
 * pixels (the stream's end). Measured on that core: batches of 32x32x3 images 6.7 GB/s
 * from cache, and from memory 5.2 GB/s where the general end gave 4.5 (before the
 * stream). */

/* The lanes of squares (q) and of sums widened from 16-bit words (s) of kind k made by
 * a half (its bytes' words beside zero words): block_avx2's arithmetic, in registers. */
TARGET_AVX2 INLINE void rgb_half(__m256i x, __m256i s[4], __m256i q[4], __m256i *lo,
                                 __m256i *hi) {
    const __m256i zero = _mm256_setzero_si256();
    *lo = _mm256_min_epu8(*lo, x);
    *hi = _mm256_max_epu8(*hi, x);
    const __m256i xe = _mm256_and_si256(x, _mm256_set1_epi16(0x00FF));
    const __m256i xo = _mm256_srli_epi16(x, 8);
    const __m256i u[4] = {_mm256_unpacklo_epi16(xe, zero), _mm256_unpackhi_epi16(xe, zero),
                          _mm256_unpacklo_epi16(xo, zero), _mm256_unpackhi_epi16(xo, zero)};
    for (int k = 0; k < 4; k++) {
        s[k] = _mm256_add_epi32(s[k], u[k]);
        q[k] = _mm256_add_epi32(q[k], _mm256_madd_epi16(u[k], u[k]));
    }
}

/* Channel c of three classes of vectors, class r holding channel (r + m) % 3 in the
 * lanes (or bytes) of `after[m - 1]` (m = 1, 2) and channel r in the others: class c's
 * own, class (c + 2)'s of m = 1 and class (c + 1)'s of m = 2 (as rgb_channel_sum). */
TARGET_AVX2 INLINE __m256i rgb_channel_avx2(const __m256i *classes, int c,
                                            const __m256i after[2]) {
    const __m256i mixed = _mm256_blendv_epi8(classes[c], classes[(c + 1) % 3], after[1]);
    return _mm256_blendv_epi8(mixed, classes[(c + 2) % 3], after[0]);
}

TARGET_AVX2 NOINLINE
static void rgb_avx2(const uint8_t *pixels, Py_ssize_t length, int64_t *sums,
                     int64_t *squares, uint8_t *lows, uint8_t *highs, stream_t *stream) {
    const int streamed = stream_on(stream);
    const __m256i zero = _mm256_setzero_si256(), ones = _mm256_set1_epi8((char)255);
    const Py_ssize_t pairs = length / (2 * RGB_PERIOD), rest = pairs * 2 * RGB_PERIOD;
    __m256i sum_classes[3] = {zero, zero, zero}, square_classes[3] = {zero, zero, zero};
    __m256i low_classes[3] = {ones, ones, ones}, high_classes[3] = {zero, zero, zero};
#pragma GCC unroll 6
    for (int h = 0; h < 6; h++) {
        half_t a = {{zero, zero, zero, zero}, ones, zero, zero, zero};
        const uint8_t *p = pixels + 32 * h;
        for (Py_ssize_t t = 0; t < pairs; t++, p += 2 * RGB_PERIOD) {
            if (streamed) { /* a step reads two halves: one line */
                stream_lines(stream, 1);
            } else if (h == 0) { /* the first pass asks for each step's bytes in order */
                fetch_in_order(p, 2 * RGB_PERIOD);
                if (fetches_ahead(stream->end, p + 2 * RGB_PERIOD))
                    for (Py_ssize_t b = 0; b < 2 * RGB_PERIOD; b += 64)
                        fetch_ahead(p + b);
            }
            pair_step_avx2(p, RGB_PERIOD, &a);
        }
        __m256i *q = a.q, lo = a.lo, hi = a.hi;
        __m256i s[4] = {_mm256_unpacklo_epi16(a.even, zero), _mm256_unpackhi_epi16(a.even, zero),
                        _mm256_unpacklo_epi16(a.odd, zero), _mm256_unpackhi_epi16(a.odd, zero)};
        /* Under two periods left: the whole halves of this offset (the h-th and, under
         * two halves, the (h + 6)-th after the pairs). */
        for (Py_ssize_t at = rest + 32 * h; at + 32 <= length; at += RGB_PERIOD)
            rgb_half(_mm256_loadu_si256((const __m256i *)(pixels + at)), s, q, &lo, &hi);
        for (int k = 0; k < 4; k++) {
            const int r = (32 * h + KIND_OFFSET[k]) % 3;
            sum_classes[r] = _mm256_add_epi32(sum_classes[r], s[k]);
            square_classes[r] = _mm256_add_epi32(square_classes[r], q[k]);
        }
        low_classes[2 * h % 3] = _mm256_min_epu8(low_classes[2 * h % 3], lo);
        high_classes[2 * h % 3] = _mm256_max_epu8(high_classes[2 * h % 3], hi);
    }
    const __m256i lanes_after[2] = {lane_mask(rgb_lane_masks[1] & 0xFF),
                                    lane_mask(rgb_lane_masks[2] & 0xFF)};
    const __m256i bytes_after[2] = {byte_mask((uint32_t)rgb_byte_masks[1]),
                                    byte_mask((uint32_t)rgb_byte_masks[2])};
    for (int c = 0; c < 3; c++) {
        sums[c] += sum_lanes(rgb_channel_avx2(sum_classes, c, lanes_after));
        squares[c] += sum_lanes(rgb_channel_avx2(square_classes, c, lanes_after));
        const __m256i l = rgb_channel_avx2(low_classes, c, bytes_after);
        const __m256i h = rgb_channel_avx2(high_classes, c, bytes_after);
        fold_extremes(_mm_min_epu8(_mm256_castsi256_si128(l), _mm256_extracti128_si256(l, 1)),
                      _mm_max_epu8(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)),
                      lows + c, highs + c);
    }
    /* Under 32 bytes left: straight into the outputs. */
    Py_ssize_t at = rest + (length - rest) / 32 * 32;
    for (Py_ssize_t c = at % 3; at < length; at++, c = c + 1 == 3 ? 0 : c + 1) {
        const uint8_t value = pixels[at];
        sums[c] += value;
        squares[c] += (int64_t)value * value;
        lows[c] = value < lows[c] ? value : lows[c];
        highs[c] = value > highs[c] ? value : highs[c];
    }
}

TARGET_AVX2
static void image_avx2(lanes_t *lanes, const uint8_t *pixels, Py_ssize_t length,
                       int64_t *sums, int64_t *squares, uint8_t *lows, uint8_t *highs) {
    if (lanes->layout->channels == 3 && length < RGB_BYTES)
        rgb_avx2(pixels, length, sums, squares, lows, highs, &lanes->stream);
    else
        lanes_image(lanes, pairs_avx2, block_avx2, flush_avx2, extremes_avx2, pixels,
                    length, sums, squares, lows, highs);
}

typedef void (*image_fn)(lanes_t *lanes, const uint8_t *pixels, Py_ssize_t length,
                         int64_t *sums, int64_t *squares, uint8_t *lows, uint8_t *highs);

static int has_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}
static int has_avx512vnni(void) {
    return has_avx512() && __builtin_cpu_supports("avx512vnni");
}
static int has_avx2(void) { return __builtin_cpu_supports("avx2"); }

/* Layouts by channel count, built on first use (with the GIL held) and kept. */
static layout_t *layouts[CHANNELS_MAX + 1];
#endif /* X86_KERNELS */

/* ---------------------------------------------------------------------------------- */
/* Running sums of the mean image (normstats.maths.mean_image)                        */
/* ---------------------------------------------------------------------------------- */

/* Positions a tile: its uint16 sums and uint32 squares (24 KB) stay in L1 while every
 * image of a call adds onto them, so a stack of images reads and writes the sums once. */
#define RUNNING_TILE 4096

typedef void (*running_fn)(const uint8_t *images, Py_ssize_t count, Py_ssize_t cells,
                           uint16_t *run, uint32_t *squares);

/* `count` images of `cells` bytes each added position by position onto uint16 sums and,
 * unless `squares` is NULL, their squares onto uint32 ones. Unsigned arithmetic wraps
 * modulo 2^16 and 2^32: exact while a run holds at most 257 images (257 * 255 = 65,535
 * and 257 * 255^2 < 2^32), which the caller guarantees by folding the run into int64
 * totals. A square is taken in 16 bits (255^2 < 2^16): one vpmullw for 32 of them.
 * Written as plain loops that gcc and clang vectorise (vpmovzxbw, vpaddw, vpmullw,
 * vpmovzxwd, vpaddd), compiled once per variant below with that variant's
 * instructions; read-modify-write of the sums bounds them, not the arithmetic. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void running_tiles(const uint8_t *restrict images, Py_ssize_t count,
                                 Py_ssize_t cells, uint16_t *restrict run,
                                 uint32_t *restrict squares) {
    for (Py_ssize_t start = 0; start < cells; start += RUNNING_TILE) {
        const Py_ssize_t length = cells - start < RUNNING_TILE ? cells - start : RUNNING_TILE;
        uint16_t *restrict sums = run + start;
        for (Py_ssize_t n = 0; n < count; n++) {
            const uint8_t *restrict pixels = images + n * cells + start;
            if (squares == NULL) {
                for (Py_ssize_t i = 0; i < length; i++)
                    sums[i] = (uint16_t)(sums[i] + pixels[i]);
                continue;
            }
            uint32_t *restrict sq = squares + start;
            for (Py_ssize_t i = 0; i < length; i++) {
                const uint16_t v = pixels[i];
                sums[i] = (uint16_t)(sums[i] + v);
                sq[i] += (uint16_t)(v * v);
            }
        }
    }
}

static void running_portable(const uint8_t *images, Py_ssize_t count, Py_ssize_t cells,
                             uint16_t *run, uint32_t *squares) {
    running_tiles(images, count, cells, run, squares);
}

#if X86_KERNELS
TARGET_AVX512
static void running_avx512(const uint8_t *images, Py_ssize_t count, Py_ssize_t cells,
                           uint16_t *run, uint32_t *squares) {
    running_tiles(images, count, cells, run, squares);
}

TARGET_AVX2
static void running_avx2(const uint8_t *images, Py_ssize_t count, Py_ssize_t cells,
                         uint16_t *run, uint32_t *squares) {
    running_tiles(images, count, cells, run, squares);
}
#endif

/* ---------------------------------------------------------------------------------- */
/* Variants, best first: the first one the CPU supports is used                       */
/* ---------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int (*supported)(void);
    running_fn running; /* running_sums() */
#if X86_KERNELS
    image_fn image; /* NULL: the portable loop */
#endif
} variant_t;

static int always(void) { return 1; }

static const variant_t VARIANTS[] = {
#if X86_KERNELS
    {"avx512vnni", has_avx512vnni, running_avx512, image_avx512vnni},
    {"avx512", has_avx512, running_avx512, image_avx512},
    {"avx2", has_avx2, running_avx2, image_avx2},
    {"portable", always, running_portable, NULL},
#else
    {"portable", always, running_portable},
#endif
};
#define VARIANT_COUNT ((Py_ssize_t)(sizeof VARIANTS / sizeof VARIANTS[0]))

static const variant_t *chosen = NULL; /* set at import, changed only by _select() */
static int forced = 0; /* chosen by _select(name): used for every row, however short */

/* a * b for a, b >= 0, or -1 where the product would pass PY_SSIZE_T_MAX: a size that
 * wrapped (2^57 images of 128 channels: 0 cells) would pass the length checks below and
 * send the kernel past the end of its buffers. */
static Py_ssize_t size_product(Py_ssize_t a, Py_ssize_t b) {
    return a < 0 || b < 0 || (b != 0 && a > PY_SSIZE_T_MAX / b) ? -1 : a * b;
}

/* An output of exactly `expected` bytes, aligned for its elements (int64 ones are
 * written as such). */
static int check_size(const Py_buffer *buffer, Py_ssize_t expected, size_t align,
                      const char *name) {
    if (buffer->len != expected) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, the kernel expects %zd", name,
                     buffer->len, expected);
        return 0;
    }
    if (buffer->len > 0 && (uintptr_t)buffer->buf % align != 0) {
        PyErr_Format(PyExc_ValueError, "%s is not aligned to %zu bytes", name, align);
        return 0;
    }
    return 1;
}

/* No output may share a byte with another buffer of the call: the kernels read and
 * write them through restrict pointers. buffers[0] is the input. */
static int check_apart(Py_buffer *const *buffers, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            const uintptr_t a = (uintptr_t)buffers[i]->buf, b = (uintptr_t)buffers[j]->buf;
            if (buffers[i]->len > 0 && buffers[j]->len > 0 &&
                a < b + (uintptr_t)buffers[j]->len && b < a + (uintptr_t)buffers[i]->len) {
                PyErr_Format(PyExc_ValueError, "%s and %s share memory", names[i], names[j]);
                return 0;
            }
        }
    return 1;
}

/* `count` rows of `row_bytes` through the chosen variant (or the portable loop, rows
 * under min_row_bytes unless `every_row`), without the GIL: no Python object is
 * touched. False when memory ran out. */
/* Fixed-point totals: a sum of nonnegative float64 values times 2^FIXED_BITS, an exact
 * integer (every finite float64 is a multiple of 2^-1074; the scale is
 * normstats.maths.exact.FIXED_BITS), in FIXED_LIMBS limbs of 32 bits, each held in a
 * uint64: limb l weighs 2^(32 l), and Python adds the limbs up. A bin adds less than 2^32
 * into each of three limbs, so nothing carries: a limb would overflow after 2^32 adds, and
 * it takes at most 96 a fold (the bins of the exponents whose three limbs include it),
 * one fold every 2048 cells or more (SPREAD_FOLD blocks of SPREAD_CELLS cells in
 * spread_cells, RECORDS_FOLD images in a records pass): at least 2^36 cells before it
 * could, more than one call takes (SPREAD_MAX_CELLS). */
#define FIXED_BITS 1130
#define FIXED_LIMBS 72
#define SPREAD_MAX_CELLS ((int64_t)1 << 36)

/* What a records() call makes beside each image's moments (the functions are defined with
 * spread_cells, below): the records' extremes as float64, the call's extremes, and the
 * spreads binned image by image as spread_cells bins them: the bins, the caller's totals
 * they fold into, and the halves of the images' sums and squares since the last fold. */
typedef struct {
    Py_ssize_t channels;
    double *lows, *highs; /* the records' extremes (count x channels) */
    uint8_t *extremes;    /* the call's: each channel's minimum, then each one's maximum */
    uint8_t image_low[CHANNELS_MAX], image_high[CHANNELS_MAX]; /* the kernel's, an image */
    uint64_t *bins, *spreads, *totals;
    int64_t high_halves[2 * CHANNELS_MAX];
    uint64_t low_halves[2 * CHANNELS_MAX];
    Py_ssize_t images; /* since the last fold */
    int complete;      /* 0: an image numpy's way must take; nothing more is binned */
} records_pass_t;
static int records_pass_start(records_pass_t *pass, Py_ssize_t channels, Py_ssize_t cells,
                              double *lows, double *highs, uint64_t *spreads,
                              uint64_t *totals, uint8_t *extremes);
static void records_image(records_pass_t *pass, Py_ssize_t index, int64_t n,
                          const int64_t *sums, const int64_t *squares);
static int records_pass_finish(records_pass_t *pass);

/* Zero one image's sums and squares (`channels` cells each): the kernels add onto them. */
static inline void scratch_zeroed(int64_t *sums, int64_t *squares, Py_ssize_t channels) {
    memset(sums, 0, sizeof *sums * (size_t)channels);
    memset(squares, 0, sizeof *squares * (size_t)channels);
}

/* The moments of `count` images into the outputs; with `pass` (records(), summary()),
 * the extremes go to the pass, which makes the rest of each image's record and summary
 * right after its moments, while they are in L1 and the next image's bytes are still on
 * their way. The sums and squares of image n go `n * stride` cells into theirs: a stride
 * of `channels` keeps every image's, one of 0 (summary(), with a pass) reuses one image's
 * cells, zeroed before each image. */
static int run_moments(const variant_t *variant, int every_row, const uint8_t *base,
                       Py_ssize_t count, Py_ssize_t row_bytes, Py_ssize_t channels,
                       int64_t *sum_out, int64_t *sq_out, Py_ssize_t stride, uint8_t *lo_out,
                       uint8_t *hi_out, records_pass_t *pass) {
    const int64_t pixels = channels > 0 ? (int64_t)(row_bytes / channels) : 0;
#define IMAGE_LOWS (pass != NULL ? pass->image_low : lo_out + n * channels)
#define IMAGE_HIGHS (pass != NULL ? pass->image_high : hi_out + n * channels)
#if X86_KERNELS
    if (variant->image != NULL &&
        (every_row || row_bytes >= layouts[channels]->min_row_bytes)) {
        /* 640 bytes per block of the period: on the stack for the usual channel counts
         * (a period of at most 6 blocks), on the heap up to 80 KB for C = 127. */
        const layout_t *layout = layouts[channels];
        const size_t bytes = (size_t)(2 * 4 * layout->period + 2 * layout->period);
        _Alignas(64) uint8_t stack[6 * 640];
        uint8_t *memory = bytes <= sizeof stack ? stack : PyMem_RawMalloc(bytes);
        if (memory == NULL)
            return 0;
        lanes_t lanes = {layout, (uint32_t *)memory,
                         (uint32_t *)(memory + 4 * layout->period),
                         memory + 2 * 4 * layout->period,
                         memory + 2 * 4 * layout->period + layout->period,
                         stream_start(base, count, row_bytes)};
        memset(memory, 0, (size_t)(2 * 4 * layout->period)); /* the sums and squares */
        for (Py_ssize_t n = 0; n < count; n++) {
            int64_t *sums = sum_out + n * stride, *squares = sq_out + n * stride;
            if (stride == 0)
                scratch_zeroed(sums, squares, channels);
            stream_to(&lanes.stream, base + n * row_bytes);
            variant->image(&lanes, base + n * row_bytes, row_bytes, sums, squares, IMAGE_LOWS,
                           IMAGE_HIGHS);
            if (pass != NULL)
                records_image(pass, n, pixels, sums, squares);
        }
        if (memory != stack)
            PyMem_RawFree(memory);
        return 1;
    }
#else
    (void)variant;
    (void)every_row;
#endif
    for (Py_ssize_t n = 0; n < count; n++) {
        int64_t *sums = sum_out + n * stride, *squares = sq_out + n * stride;
        if (stride == 0)
            scratch_zeroed(sums, squares, channels);
        portable_image(base + n * row_bytes, row_bytes, channels, sums, squares, IMAGE_LOWS,
                       IMAGE_HIGHS);
        if (pass != NULL)
            records_image(pass, n, pixels, sums, squares);
    }
    return 1;
#undef IMAGE_LOWS
#undef IMAGE_HIGHS
}

/* The checks moments() and records() share: count and channels in range, the images whole
 * rows of whole pixels, and the cells (count x channels) and their int64 bytes within
 * Py_ssize_t; 0 with an exception set otherwise. */
static int image_rows(const Py_buffer *images, Py_ssize_t count, Py_ssize_t channels,
                      Py_ssize_t *row_bytes, Py_ssize_t *cells, Py_ssize_t *cell_bytes) {
    if (count < 0 || channels < 1 || channels > CHANNELS_MAX) {
        PyErr_SetString(PyExc_ValueError, "count must be >= 0 and channels in 1..128");
        return 0;
    }
    if (count > 0 ? images->len % count != 0 : images->len != 0) {
        PyErr_SetString(PyExc_ValueError, "the images do not split into rows of equal size");
        return 0;
    }
    *row_bytes = count > 0 ? images->len / count : 0;
    if (*row_bytes % channels != 0) {
        PyErr_SetString(PyExc_ValueError, "an image row is not a whole number of pixels");
        return 0;
    }
    *cells = size_product(count, channels);
    *cell_bytes = size_product(*cells, 8);
    if (*cells < 0 || *cell_bytes < 0) {
        PyErr_Format(PyExc_OverflowError,
                     "%zd images of %zd channels: more outputs than memory can hold", count,
                     channels);
        return 0;
    }
    return 1;
}

/* The kernel variant for `channels`, its layout made on first use; NULL: out of memory. */
static const variant_t *variant_for(Py_ssize_t channels) {
#if X86_KERNELS
    if (chosen->image != NULL && layouts[channels] == NULL &&
        (layouts[channels] = layout_new(channels)) == NULL)
        return NULL;
#else
    (void)channels;
#endif
    return chosen;
}

static PyObject *moments(PyObject *self, PyObject *args) {
    Py_buffer images, sums, squares, lows, highs;
    Py_ssize_t count, channels, row_bytes, cells, cell_bytes;
    if (!PyArg_ParseTuple(args, "y*nnw*w*w*w*", &images, &count, &channels, &sums, &squares,
                          &lows, &highs))
        return NULL;
    PyObject *result = NULL;
    Py_buffer *const buffers[] = {&images, &sums, &squares, &lows, &highs};
    static const char *const names[] = {"images", "sums", "squares", "lows", "highs"};
    if (!image_rows(&images, count, channels, &row_bytes, &cells, &cell_bytes) ||
        !check_size(&sums, cell_bytes, 8, "sums") ||
        !check_size(&squares, cell_bytes, 8, "squares") || !check_size(&lows, cells, 1, "lows") ||
        !check_size(&highs, cells, 1, "highs") || !check_apart(buffers, names, 5))
        goto done;
    {
        const variant_t *variant = variant_for(channels);
        const int every_row = forced;
        int ok = 0;
        if (variant != NULL) {
            Py_BEGIN_ALLOW_THREADS
            ok = run_moments(variant, every_row, images.buf, count, row_bytes, channels,
                             sums.buf, squares.buf, channels, lows.buf, highs.buf, NULL);
            Py_END_ALLOW_THREADS
        }
        if (!ok) {
            PyErr_NoMemory();
            goto done;
        }
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

/* records(images, count, channels, sums, squares, lows, highs, spreads, totals, extremes)
 * -> bool: the records of `count` uint8 images and their summary's totals in one pass:
 * int64 sums and squares and float64 lows and highs (count x channels) as moments() gives
 * them; each image's spreads binned onto spreads and totals as spread_sums() bins them
 * (its bool: False, the spreads incomplete, where numpy must compute them); and the
 * extremes of all the images, uint8 (2 x channels: minima, then maxima). */
static PyObject *records(PyObject *self, PyObject *args) {
    Py_buffer images, sums, squares, lows, highs, spreads, totals, extremes;
    Py_ssize_t count, channels, row_bytes, cells, cell_bytes;
    if (!PyArg_ParseTuple(args, "y*nnw*w*w*w*w*w*w*", &images, &count, &channels, &sums,
                          &squares, &lows, &highs, &spreads, &totals, &extremes))
        return NULL;
    PyObject *result = NULL;
    Py_buffer *const buffers[] = {&images, &sums, &squares, &lows, &highs, &spreads, &totals,
                                  &extremes};
    static const char *const names[] = {"images", "sums", "squares", "lows", "highs",
                                        "spreads", "totals", "extremes"};
    if (!image_rows(&images, count, channels, &row_bytes, &cells, &cell_bytes) ||
        !check_size(&sums, cell_bytes, 8, "sums") ||
        !check_size(&squares, cell_bytes, 8, "squares") ||
        !check_size(&lows, cell_bytes, 8, "lows") || !check_size(&highs, cell_bytes, 8, "highs") ||
        !check_size(&spreads, size_product(channels, 3 * FIXED_LIMBS * 8), 8, "spreads") ||
        !check_size(&totals, size_product(channels, 2 * 16), 8, "totals") ||
        !check_size(&extremes, 2 * channels, 1, "extremes") || !check_apart(buffers, names, 8))
        goto done;
    {
        const variant_t *variant = variant_for(channels);
        const int every_row = forced;
        int ok = 0, complete = 0;
        records_pass_t pass;
        if (variant != NULL) {
            Py_BEGIN_ALLOW_THREADS
            ok = records_pass_start(&pass, channels, cells, lows.buf, highs.buf, spreads.buf,
                                    totals.buf, extremes.buf) &&
                 run_moments(variant, every_row, images.buf, count, row_bytes, channels,
                             sums.buf, squares.buf, channels, NULL, NULL, &pass);
            complete = records_pass_finish(&pass);
            Py_END_ALLOW_THREADS
        }
        if (!ok) {
            PyErr_NoMemory();
            goto done;
        }
        result = PyBool_FromLong(complete);
    }
done:
    for (int b = 0; b < 8; b++)
        PyBuffer_Release(buffers[b]);
    return result;
}

static inline void add128(uint64_t *total, uint64_t lo, uint64_t hi); /* below */

/* What _cross exports for summary() (its capsule `_C_API`): the cross sums of `count`
 * images added, summed over the images, onto `pairs` int64 totals; 0: out of memory. */
typedef int (*cross_part_fn)(const uint8_t *base, Py_ssize_t count, Py_ssize_t row_bytes,
                             Py_ssize_t channels, int64_t *totals);
/* With the cross sums, summary() reads this many bytes of images at a time, then the
 * cross kernel reads them again from the core's L2 (2 MB here), not from memory: past
 * 1 MB, where the moments pass streams ahead (_stream_ahead.h). On 50,000 32x32x3 images,
 * 2 threads, the run with the covariance took 10.95-11.16 ms with these parts, 11.4-11.6
 * with 1.5 MB ones, 15.4-15.9 with 512 KB ones (no stream), and 12.1 in two whole passes. */
#define CROSS_PART_BYTES (5 << 18)

/* summary(images, count, channels, spreads, totals, extremes[, cross, cross_totals])
 * -> bool: what records() adds onto spreads, totals and extremes, without the records:
 * each image's sums and squares made in one image's cells, binned and dropped. A run that
 * keeps no record (a summary is all it returns) neither allocates nor writes 96 bytes an
 * RGB image, and fresh outputs cost a page fault every 4 KB (on 50,000 32x32x3 images in
 * memory, 2 threads, 0.43-0.49 ms of a ~5 ms pass). With `cross`, _cross's capsule, the
 * channel cross sums of every pair c < d too, onto `cross_totals` (pairs int128s in two's
 * complement, a low and a high uint64 word each), read part by part (CROSS_PART_BYTES)
 * right after the moments. */
static PyObject *summary(PyObject *self, PyObject *args) {
    Py_buffer images, spreads, totals, extremes, cross_totals = {0};
    Py_ssize_t count, channels, row_bytes, cells, cell_bytes;
    PyObject *cross = Py_None;
    if (!PyArg_ParseTuple(args, "y*nnw*w*w*|Ow*", &images, &count, &channels, &spreads,
                          &totals, &extremes, &cross, &cross_totals))
        return NULL;
    PyObject *result = NULL;
    Py_buffer *const buffers[] = {&images, &spreads, &totals, &extremes, &cross_totals};
    static const char *const names[] = {"images", "spreads", "totals", "extremes",
                                        "cross_totals"};
    const int buffer_count = cross_totals.obj != NULL ? 5 : 4;
    cross_part_fn cross_kernel = NULL;
    if (!image_rows(&images, count, channels, &row_bytes, &cells, &cell_bytes) ||
        !check_size(&spreads, size_product(channels, 3 * FIXED_LIMBS * 8), 8, "spreads") ||
        !check_size(&totals, size_product(channels, 2 * 16), 8, "totals") ||
        !check_size(&extremes, 2 * channels, 1, "extremes"))
        goto done;
    if (cross != Py_None) {
        cross_kernel = (cross_part_fn)PyCapsule_GetPointer(cross,
                                                            "normstats.maths._cross._C_API");
        if (cross_kernel == NULL)
            goto done;
        if (cross_totals.obj == NULL) {
            PyErr_SetString(PyExc_TypeError, "cross sums need cross_totals");
            goto done;
        }
        if (!check_size(&cross_totals, channels * (channels - 1) / 2 * 16, 8, "cross_totals"))
            goto done;
    }
    if (!check_apart(buffers, names, buffer_count))
        goto done;
    {
        const variant_t *variant = variant_for(channels);
        const int every_row = forced;
        int ok = 0, complete = 0;
        records_pass_t pass;
        int64_t sums[CHANNELS_MAX], squares[CHANNELS_MAX];
        const Py_ssize_t pairs = channels * (channels - 1) / 2;
        int64_t *part_totals = pairs > 0 ? PyMem_RawCalloc((size_t)pairs, sizeof(int64_t))
                                         : NULL;
        if (variant != NULL && (cross_kernel == NULL || pairs == 0 || part_totals != NULL)) {
            Py_BEGIN_ALLOW_THREADS
            ok = records_pass_start(&pass, channels, cells, NULL, NULL, spreads.buf,
                                    totals.buf, extremes.buf);
            /* a part: as many images as CROSS_PART_BYTES holds (one at least), or all */
            const Py_ssize_t step = cross_kernel == NULL ? count
                : row_bytes >= CROSS_PART_BYTES ? 1 : CROSS_PART_BYTES / row_bytes;
            const uint8_t *base = images.buf;
            for (Py_ssize_t first = 0; ok && first < count; first += step) {
                const Py_ssize_t rows = count - first < step ? count - first : step;
                ok = run_moments(variant, every_row, base + first * row_bytes, rows, row_bytes,
                                 channels, sums, squares, 0, NULL, NULL, &pass);
                if (ok && cross_kernel != NULL && pairs > 0) {
                    memset(part_totals, 0, (size_t)pairs * sizeof(int64_t));
                    ok = cross_kernel(base + first * row_bytes, rows, row_bytes, channels,
                                      part_totals);
                    uint64_t *words = cross_totals.buf;
                    for (Py_ssize_t p = 0; ok && p < pairs; p++) /* >= 0: no sign words */
                        add128(words + 2 * p, (uint64_t)part_totals[p], 0);
                }
            }
            complete = records_pass_finish(&pass);
            Py_END_ALLOW_THREADS
        }
        PyMem_RawFree(part_totals);
        if (!ok) {
            PyErr_NoMemory();
            goto done;
        }
        result = PyBool_FromLong(complete);
    }
done:
    for (int b = 0; b < buffer_count; b++)
        PyBuffer_Release(buffers[b]);
    return result;
}

static PyObject *running_sums(PyObject *self, PyObject *args) {
    Py_buffer images, run, squares = {0};
    Py_ssize_t count;
    PyObject *squares_arg;
    if (!PyArg_ParseTuple(args, "y*nw*O", &images, &count, &run, &squares_arg))
        return NULL;
    PyObject *result = NULL;
    const int with_squares = squares_arg != Py_None;
    if (with_squares && PyObject_GetBuffer(squares_arg, &squares, PyBUF_WRITABLE) < 0)
        goto done;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "count must be >= 0");
        goto done;
    }
    if (run.len % 2 != 0) {
        PyErr_SetString(PyExc_ValueError, "run is not a whole number of uint16s");
        goto done;
    }
    const Py_ssize_t cells = run.len / 2, image_bytes = size_product(count, cells);
    const Py_ssize_t square_bytes = size_product(cells, 4);
    if (image_bytes < 0 || square_bytes < 0) {
        PyErr_Format(PyExc_OverflowError, "%zd images of %zd values: more than memory can "
                     "hold", count, cells);
        goto done;
    }
    if (images.len != image_bytes) {
        PyErr_Format(PyExc_ValueError, "images hold %zd bytes, %zd images of the run's %zd "
                     "values are %zd", images.len, count, cells, image_bytes);
        goto done;
    }
    Py_buffer *const buffers[] = {&images, &run, &squares};
    static const char *const names[] = {"images", "run", "squares"};
    if (!check_size(&run, run.len, 2, "run") ||
        (with_squares && !check_size(&squares, square_bytes, 4, "squares")) ||
        !check_apart(buffers, names, with_squares ? 3 : 2))
        goto done;
    const running_fn running = chosen->running;
    Py_BEGIN_ALLOW_THREADS
    running(images.buf, count, cells, run.buf, with_squares ? squares.buf : NULL);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&images);
    PyBuffer_Release(&run);
    PyBuffer_Release(&squares); /* nothing to release when it was None */
    return result;
}

/* The variants this CPU runs, best first (for tests and benchmarks). */
static PyObject *variants(PyObject *self, PyObject *unused) {
    PyObject *names = PyList_New(0);
    if (names == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < VARIANT_COUNT; i++) {
        if (!VARIANTS[i].supported())
            continue;
        PyObject *name = PyUnicode_FromString(VARIANTS[i].name);
        if (name == NULL || PyList_Append(names, name) < 0) {
            Py_XDECREF(name);
            Py_DECREF(names);
            return NULL;
        }
        Py_DECREF(name);
    }
    PyObject *result = PyList_AsTuple(names);
    Py_DECREF(names);
    return result;
}

/* The best variant this CPU runs. */
static const variant_t *best_variant(void) {
    Py_ssize_t i = 0;
    while (!VARIANTS[i].supported())
        i++;
    return &VARIANTS[i];
}

/* Make moments() use variant `name` for every row, and running_sums() its loop, or
 * (None) the best one with its bounds; return the previous name, None for the latter. */
static PyObject *select_variant(PyObject *self, PyObject *arg) {
    PyObject *previous = forced ? PyUnicode_FromString(chosen->name) : Py_NewRef(Py_None);
    if (previous == NULL)
        return NULL;
    if (arg == Py_None) {
        chosen = best_variant();
        forced = 0;
        return previous;
    }
    const char *name = PyUnicode_AsUTF8(arg);
    for (Py_ssize_t i = 0; name != NULL && i < VARIANT_COUNT; i++)
        if (strcmp(VARIANTS[i].name, name) == 0) {
            if (!VARIANTS[i].supported()) {
                PyErr_Format(PyExc_ValueError, "this CPU cannot run the %s kernel", name);
                break;
            }
            chosen = &VARIANTS[i];
            forced = 1;
            return previous;
        }
    if (name != NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "no kernel variant is called %R", arg);
    Py_DECREF(previous);
    return NULL;
}

/* The significand of the float64 whose bits are `b`, signed, into column `c` of the bins
 * (2048 x columns) of its biased exponent: its low 27 bits and the rest. Pieces are
 * below 2^27, so the bins stay exact for 2^36 values a column. */
static inline void bin_float(int64_t b, Py_ssize_t c, Py_ssize_t columns, int64_t *low,
                             int64_t *high) {
    const int64_t biased = (b >> 52) & 0x7FF;
    int64_t significand = b & 0xFFFFFFFFFFFFFLL;
    if (biased > 0)
        significand |= (int64_t)1 << 52;
    if (b < 0)
        significand = -significand;
    low[biased * columns + c] += significand & 0x7FFFFFF;
    high[biased * columns + c] += significand >> 27; /* arithmetic shift: floor */
}

/* Add the significands of float64 values (as int64 bits, rows x columns) into int64 bins
 * (2048 x columns) by biased exponent (bin_float). */
static PyObject *exponent_bins(PyObject *self, PyObject *args) {
    Py_buffer bits, low_sums, high_sums;
    Py_ssize_t columns;
    if (!PyArg_ParseTuple(args, "y*nw*w*", &bits, &columns, &low_sums, &high_sums))
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t row_bytes = size_product(columns, 8);
    const Py_ssize_t bin_bytes = size_product(columns, 2048 * 8);
    if (columns < 1) {
        PyErr_SetString(PyExc_ValueError, "columns must be >= 1");
        goto done;
    }
    if (row_bytes < 0 || bin_bytes < 0) {
        PyErr_Format(PyExc_OverflowError, "%zd columns: more bins than memory can hold",
                     columns);
        goto done;
    }
    if (bits.len % row_bytes != 0) {
        PyErr_SetString(PyExc_ValueError, "the values do not split into rows of `columns`");
        goto done;
    }
    Py_buffer *const buffers[] = {&bits, &low_sums, &high_sums};
    static const char *const names[] = {"bits", "low_sums", "high_sums"};
    if (!check_size(&low_sums, bin_bytes, 8, "low_sums") ||
        !check_size(&high_sums, bin_bytes, 8, "high_sums") || !check_apart(buffers, names, 3))
        goto done;
    {
        /* The values are read byte-wise (a numpy view of them may be unaligned). */
        const uint8_t *values = bits.buf;
        int64_t *low = low_sums.buf, *high = high_sums.buf;
        const Py_ssize_t rows = bits.len / row_bytes;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < rows; i++)
            for (Py_ssize_t c = 0; c < columns; c++) {
                int64_t b;
                memcpy(&b, values + row_bytes * i + 8 * c, sizeof b);
                bin_float(b, c, columns, low, high);
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

/* Cells (an image's channel) that spread_cells takes at a time: their divisions and
 * square roots run as vectors (spread_values). */
#define SPREAD_CELLS 256

/* The variance, its square root and the sample std of `count` cells from their numerators
 * and denominators (whole: n·n, sample: n·(n − 1)), each operation correctly rounded. A
 * sample std with a zero denominator is NaN, never binned. The compiler runs it on vectors
 * (SIMD_CLONES; the extension is built with -fno-math-errno, so sqrt() need not set errno
 * and takes vsqrtpd): vdivpd and vsqrtpd round each lane as the scalar instructions do,
 * so the values are the same bits, several cells at a time. */
SIMD_CLONES
static void spread_values(const double *restrict numerators, const double *restrict wholes,
                          const double *restrict samples, double *restrict variances,
                          double *restrict stds, double *restrict sample_stds, int count) {
    for (int j = 0; j < count; j++) {
        variances[j] = numerators[j] / wholes[j];
        stds[j] = sqrt(variances[j]);
        sample_stds[j] = sqrt(numerators[j] / samples[j]);
    }
}

/* Add a 128-bit number (lo, hi) onto the int128 `total` (low and high words), modulo
 * 2^128: two's complement. */
static inline void add128(uint64_t *total, uint64_t lo, uint64_t hi) {
    const uint64_t low = total[0] + lo;
    total[1] += hi + (low < lo);
    total[0] = low;
}

/* The biased exponents a spread can have: a variance is a numerator below 2^63 over a
 * denominator below 2^63 (each rounded to float64), so it is 0 or within [2^-63, 2^63];
 * a std is its square root. Bins of exponents from SPREAD_LOWEST on, SPREAD_EXPONENTS of
 * them, hold every one (a value outside, impossible, leaves the totals to numpy). */
#define SPREAD_LOWEST 960
#define SPREAD_EXPONENTS 128
/* Blocks between folds of the bins: a bin takes at most SPREAD_CELLS significands (below
 * 2^53) a block, so 2^11 of them (2^64) at most between folds. */
#define SPREAD_FOLD (2048 / SPREAD_CELLS)

/* Add a bin's sum of significands, all of biased exponent `biased` (> 0: no subnormal
 * here), into a fixed-point total: sum << (biased - 1075 + FIXED_BITS), as exact.add_bins
 * adds a bin. */
static void add_bin(uint64_t *limbs, int64_t biased, uint64_t sum) {
    const int64_t offset = biased - 1075 + FIXED_BITS, limb = offset >> 5;
    const int shift = (int)(offset & 31);
    /* bits 0..31, 32..63 and 64..95 of sum << shift */
    limbs[limb] += (sum << shift) & 0xFFFFFFFFu;
    limbs[limb + 1] += (sum >> (32 - shift)) & 0xFFFFFFFFu;
    limbs[limb + 2] += shift ? sum >> (64 - shift) : 0;
}

/* Fold the bins (3 x SPREAD_EXPONENTS x channels sums of significands) into the
 * fixed-point totals, and empty them. */
static void fold_bins(uint64_t *bins, Py_ssize_t channels, uint64_t *spreads) {
    for (Py_ssize_t k = 0; k < 3; k++)
        for (Py_ssize_t e = 0; e < SPREAD_EXPONENTS; e++)
            for (Py_ssize_t c = 0; c < channels; c++) {
                uint64_t *at = bins + (k * SPREAD_EXPONENTS + e) * channels + c;
                if (*at) {
                    add_bin(spreads + (k * channels + c) * FIXED_LIMBS, e + SPREAD_LOWEST, *at);
                    *at = 0;
                }
            }
}

/* Add Σ of int64 values given as Σ of their high halves (value >> 32, signed) and of their
 * low halves (value & 0xFFFFFFFF), each of at most 2^31 values, into an int128 (low and
 * high words, two's complement). */
static void add_halves(uint64_t *total, int64_t highs, uint64_t lows) {
    add128(total, lows, 0);
    add128(total, (uint64_t)highs << 32, (uint64_t)(highs >> 32)); /* highs * 2^32 */
}

/* n·n and n·(n − 1), the denominators of an image of n values; 0 where they pass int64
 * or the image has no value (numpy's way then). */
static inline int spread_denominators(int64_t n, int64_t *whole, int64_t *sample) {
    return n >= 1 && !__builtin_mul_overflow(n, n, whole) &&
           !__builtin_mul_overflow(n, n - 1, sample);
}

/* The exact numerator n·Σx² − (Σx)² of a channel's variance; 0 where it passes int64 or is
 * negative (sums that are no variance: numpy's way errs on them). */
static inline int spread_numerator(int64_t n, int64_t sum, int64_t square, int64_t *numerator) {
    int64_t a, b;
    return !__builtin_mul_overflow(n, square, &a) && !__builtin_mul_overflow(sum, sum, &b) &&
           !__builtin_sub_overflow(a, b, numerator) && *numerator >= 0;
}

/* Add a spread `value` (>= 0) of kind k (0 std, 1 sample std, 2 variance) and channel c
 * into its exponent's bin; 0 for an exponent outside the bins (impossible: numpy's way). */
static inline int bin_spread(uint64_t *bins, int k, Py_ssize_t c, Py_ssize_t channels,
                             double value) {
    int64_t bits;
    memcpy(&bits, &value, sizeof bits);
    if (bits == 0)
        return 1; /* a zero adds nothing */
    const int64_t bin = (bits >> 52) - SPREAD_LOWEST;
    if (bin < 0 || bin >= SPREAD_EXPONENTS)
        return 0;
    bins[(k * SPREAD_EXPONENTS + bin) * channels + c] +=
        ((uint64_t)bits & 0xFFFFFFFFFFFFFULL) | ((uint64_t)1 << 52);
    return 1;
}

/* The spreads of `count` images of integer records, each channel's: the population
 * variance (n·Σx² − (Σx)²) / (n·n), its square root, and where n >= 2 the square root of
 * the sample variance (n·Σx² − (Σx)²) / (n·(n − 1)), summed exactly into fixed-point
 * totals (3 x channels x FIXED_LIMBS: std, sample std, variance); and the exact totals
 * of Σx and Σx² over the images into int128s (2 x channels: the pooled moments).
 * Numerator and denominator are exact int64s, each rounded to float64, then divided, as
 * IntegerRecords.image_variance computes them in numpy: the same values bit for bit, so
 * the same totals. The values go into bins by exponent, their significands summed in
 * uint64 (the adds of one bin are independent of the others', where one fixed-point total
 * a channel would chain every add on the last), and the bins into the totals every
 * SPREAD_FOLD blocks, before a bin could overflow, and at the end. 0, the totals
 * incomplete, at the first image numpy's way must take instead (a product past int64, no
 * pixel, a negative numerator: it errs on the last two), when memory runs out, or past
 * SPREAD_MAX_CELLS cells (1 TB of sums and squares: numpy's way then, which has no such
 * bound). */
static int spread_cells(const uint8_t *sums, const uint8_t *squares, const uint8_t *pixels,
                        Py_ssize_t count, Py_ssize_t channels, uint64_t *spreads,
                        uint64_t *totals) {
    double numerators[SPREAD_CELLS], wholes[SPREAD_CELLS], samples[SPREAD_CELLS];
    double values[3][SPREAD_CELLS];
    int64_t image[SPREAD_CELLS];
    Py_ssize_t channel[SPREAD_CELLS];
    /* bins[kind][exponent][channel]: sums of significands below 2^53 */
    uint64_t *bins = PyMem_RawCalloc((size_t)(3 * SPREAD_EXPONENTS * channels),
                                     sizeof(uint64_t));
    /* Σx and Σx² per channel as int128s in two's complement: (low, high) words */
    uint64_t exact[2 * CHANNELS_MAX][2] = {{0}};
    /* Σ of the sums' and squares' halves over one block (< 2^31 values: exact) */
    int64_t highs[2 * CHANNELS_MAX];
    uint64_t lows[2 * CHANNELS_MAX];
    const Py_ssize_t cells_in_call = size_product(count, channels);
    int complete = bins != NULL && cells_in_call >= 0 && (int64_t)cells_in_call < SPREAD_MAX_CELLS;
    for (Py_ssize_t i = 0, block = 1; complete && i < count; block++) {
        int cells = 0;
        memset(highs, 0, sizeof highs[0] * 2 * channels);
        memset(lows, 0, sizeof lows[0] * 2 * channels);
        /* whole images at a time, as many as fit (at least one: channels <= CHANNELS_MAX) */
        for (; i < count && cells + channels <= SPREAD_CELLS; i++) {
            int64_t n, whole, sample; /* read byte-wise: numpy views may be unaligned */
            memcpy(&n, pixels + 8 * i, sizeof n);
            if (!spread_denominators(n, &whole, &sample)) {
                complete = 0;
                break;
            }
            const double whole_value = (double)whole, sample_value = (double)sample;
            for (Py_ssize_t c = 0; c < channels; c++, cells++) {
                int64_t sum, square, numerator;
                memcpy(&sum, sums + 8 * (i * channels + c), sizeof sum);
                memcpy(&square, squares + 8 * (i * channels + c), sizeof square);
                if (!spread_numerator(n, sum, square, &numerator)) {
                    complete = 0;
                    break;
                }
                highs[c] += sum >> 32; /* arithmetic shift: floor */
                lows[c] += (uint64_t)sum & 0xFFFFFFFFu;
                highs[channels + c] += square >> 32;
                lows[channels + c] += (uint64_t)square & 0xFFFFFFFFu;
                numerators[cells] = (double)numerator;
                wholes[cells] = whole_value;
                samples[cells] = sample_value;
                image[cells] = n;
                channel[cells] = c;
            }
            if (!complete)
                break;
        }
        if (!complete)
            break;
        for (Py_ssize_t t = 0; t < 2 * channels; t++)
            add_halves(exact[t], highs[t], lows[t]);
        spread_values(numerators, wholes, samples, values[2], values[0], values[1], cells);
        for (int j = 0; j < cells; j++)
            for (int k = 0; k < 3; k++) {
                if (k == 1 && image[j] < 2)
                    continue; /* one value: no sample std */
                if (!bin_spread(bins, k, channel[j], channels, values[k][j])) {
                    complete = 0;
                    break;
                }
            }
        if (block % SPREAD_FOLD == 0)
            fold_bins(bins, channels, spreads);
    }
    if (complete) {
        fold_bins(bins, channels, spreads);
        for (Py_ssize_t t = 0; t < 2 * channels; t++) /* onto the totals (8-byte aligned) */
            add128(totals + 2 * t, exact[t][0], exact[t][1]);
    }
    PyMem_RawFree(bins);
    return complete;
}

/* Images between two folds of a records pass's bins: an image adds at most one
 * significand (below 2^53) to a bin, so a bin holds below 2^64. */
#define RECORDS_FOLD 2048

/* Start a records pass of `cells` cells (count x channels) with the caller's outputs;
 * 0 when memory runs out. Past SPREAD_MAX_CELLS cells no spread is binned (incomplete
 * from the start). */
static int records_pass_start(records_pass_t *pass, Py_ssize_t channels, Py_ssize_t cells,
                              double *lows, double *highs, uint64_t *spreads,
                              uint64_t *totals, uint8_t *extremes) {
    pass->channels = channels;
    pass->lows = lows;
    pass->highs = highs;
    pass->extremes = extremes;
    pass->spreads = spreads;
    pass->totals = totals;
    pass->images = 0;
    memset(extremes, 255, (size_t)channels);
    memset(extremes + channels, 0, (size_t)channels);
    memset(pass->image_low, 255, sizeof pass->image_low);
    memset(pass->image_high, 0, sizeof pass->image_high);
    memset(pass->high_halves, 0, sizeof pass->high_halves);
    memset(pass->low_halves, 0, sizeof pass->low_halves);
    pass->bins = PyMem_RawCalloc((size_t)(3 * SPREAD_EXPONENTS * channels), sizeof(uint64_t));
    pass->complete = pass->bins != NULL && cells >= 0 && (int64_t)cells < SPREAD_MAX_CELLS;
    return pass->bins != NULL;
}

/* Fold the bins into the fixed-point totals, and the halves into the int128 totals. */
static void records_fold(records_pass_t *pass) {
    fold_bins(pass->bins, pass->channels, pass->spreads);
    for (Py_ssize_t t = 0; t < 2 * pass->channels; t++) {
        add_halves(pass->totals + 2 * t, pass->high_halves[t], pass->low_halves[t]);
        pass->high_halves[t] = 0;
        pass->low_halves[t] = 0;
    }
    pass->images = 0;
}

/* Bin the spreads of one image of n values from its sums and squares (channels each),
 * as spread_cells does; an image it cannot take ends the binning (incomplete). The
 * divisions and roots are the scalar forms of spread_values' vector ones: the same bits. */
static void spread_image(records_pass_t *pass, int64_t n, const int64_t *sums,
                         const int64_t *squares) {
    const Py_ssize_t channels = pass->channels;
    int64_t whole, sample;
    if (!spread_denominators(n, &whole, &sample)) {
        pass->complete = 0;
        return;
    }
    const double whole_value = (double)whole, sample_value = (double)sample;
    for (Py_ssize_t c = 0; c < channels; c++) {
        int64_t numerator;
        if (!spread_numerator(n, sums[c], squares[c], &numerator)) {
            pass->complete = 0;
            return;
        }
        pass->high_halves[c] += sums[c] >> 32; /* arithmetic shift: floor */
        pass->low_halves[c] += (uint64_t)sums[c] & 0xFFFFFFFFu;
        pass->high_halves[channels + c] += squares[c] >> 32;
        pass->low_halves[channels + c] += (uint64_t)squares[c] & 0xFFFFFFFFu;
        const double value = (double)numerator, variance = value / whole_value;
        if (!bin_spread(pass->bins, 2, c, channels, variance) ||
            !bin_spread(pass->bins, 0, c, channels, sqrt(variance)) ||
            (n >= 2 && !bin_spread(pass->bins, 1, c, channels, sqrt(value / sample_value)))) {
            pass->complete = 0;
            return;
        }
    }
    if (++pass->images == RECORDS_FOLD)
        records_fold(pass);
}

/* The rest of image `index`'s record (its extremes as float64), the call's extremes, and
 * its spreads while the pass is complete. */
static void records_image(records_pass_t *pass, Py_ssize_t index, int64_t n,
                          const int64_t *sums, const int64_t *squares) {
    const Py_ssize_t channels = pass->channels;
    uint8_t *minima = pass->extremes, *maxima = pass->extremes + channels;
    if (pass->lows != NULL) /* summary(): no records kept */
        for (Py_ssize_t c = 0; c < channels; c++) {
            pass->lows[index * channels + c] = pass->image_low[c];
            pass->highs[index * channels + c] = pass->image_high[c];
        }
    for (Py_ssize_t c = 0; c < channels; c++) {
        const uint8_t low = pass->image_low[c], high = pass->image_high[c];
        minima[c] = low < minima[c] ? low : minima[c];
        maxima[c] = high > maxima[c] ? high : maxima[c];
        pass->image_low[c] = 255; /* the kernel takes the extremes of what it is given */
        pass->image_high[c] = 0;
    }
    if (pass->complete)
        spread_image(pass, n, sums, squares);
}

/* End the pass: the last fold, the bins freed; whether every image's spreads were binned. */
static int records_pass_finish(records_pass_t *pass) {
    if (pass->complete)
        records_fold(pass);
    PyMem_RawFree(pass->bins);
    return pass->complete;
}

/* spread_sums(sums, squares, pixels, channels, spreads, totals) -> bool: spread_cells on
 * int64 sums and squares (count x channels) and pixels (count), accumulated onto the
 * totals: spreads 3 x channels x FIXED_LIMBS limbs (uint64s), totals 2 x channels int128s
 * in two's complement, each a low and a high uint64 word. */
static PyObject *spread_sums(PyObject *self, PyObject *args) {
    Py_buffer sums, squares, pixels, spreads, totals;
    Py_ssize_t channels;
    if (!PyArg_ParseTuple(args, "y*y*y*nw*w*", &sums, &squares, &pixels, &channels, &spreads,
                          &totals))
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t count = pixels.len / 8, cells = size_product(count, channels);
    const Py_ssize_t cell_bytes = size_product(cells, 8);
    const Py_ssize_t spread_bytes = size_product(channels, 3 * FIXED_LIMBS * 8);
    const Py_ssize_t total_bytes = size_product(channels, 2 * 16);
    if (channels < 1 || channels > CHANNELS_MAX) {
        PyErr_SetString(PyExc_ValueError, "channels must be in 1..128");
        goto done;
    }
    if (pixels.len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError, "pixels is not a whole number of int64s");
        goto done;
    }
    if (cell_bytes < 0) {
        PyErr_Format(PyExc_OverflowError, "%zd images of %zd channels: more than memory can "
                     "hold", count, channels);
        goto done;
    }
    Py_buffer *const buffers[] = {&sums, &squares, &pixels, &spreads, &totals};
    static const char *const names[] = {"sums", "squares", "pixels", "spreads", "totals"};
    if (!check_size(&sums, cell_bytes, 1, "sums") ||
        !check_size(&squares, cell_bytes, 1, "squares") ||
        !check_size(&spreads, spread_bytes, 8, "spreads") ||
        !check_size(&totals, total_bytes, 8, "totals") || !check_apart(buffers, names, 5))
        goto done;
    int complete;
    Py_BEGIN_ALLOW_THREADS
    complete = spread_cells(sums.buf, squares.buf, pixels.buf, count, channels, spreads.buf,
                            totals.buf);
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(complete);
done:
    PyBuffer_Release(&sums);
    PyBuffer_Release(&squares);
    PyBuffer_Release(&pixels);
    PyBuffer_Release(&spreads);
    PyBuffer_Release(&totals);
    return result;
}

/* Histograms of 8- and 16-bit integer values (for exact percentiles).
 *
 * uint8 values with none left out, most images, take count_uint8: each pixel's channels
 * count into one of HISTOGRAM_TABLES tables of uint32 cells, in
 * turn: a run of equal values (a flat sky, a grey border) then updates different cells,
 * where one table would chain every increment through the same store and load. The
 * tables fold into the caller's int64 counts every HISTOGRAM_FOLD pixels, before a cell
 * can pass 2^32 - 1. */
#define HISTOGRAM_TABLES 4
#define HISTOGRAM_FOLD ((Py_ssize_t)1 << 30)
_Static_assert(HISTOGRAM_TABLES == 4, "the unrolled loops of count_uint8 use four tables");

static void fold_tables(uint32_t *restrict tables, Py_ssize_t cells, int64_t *restrict counts) {
    for (Py_ssize_t t = 0; t < HISTOGRAM_TABLES; t++)
        for (Py_ssize_t i = 0; i < cells; i++) {
            counts[i] += tables[t * cells + i];
            tables[t * cells + i] = 0;
        }
}

static void count_uint8(const uint8_t *restrict values, Py_ssize_t pixels, Py_ssize_t channels,
                        uint32_t *restrict tables, int64_t *restrict counts) {
    const Py_ssize_t cells = channels * 256;
    for (Py_ssize_t start = 0; start < pixels; start += HISTOGRAM_FOLD) {
        const Py_ssize_t stop = pixels - start < HISTOGRAM_FOLD ? pixels : start + HISTOGRAM_FOLD;
        Py_ssize_t p = start;
        if (channels == 1) /* grey: the table loop unrolled */
            for (; p + HISTOGRAM_TABLES <= stop; p += HISTOGRAM_TABLES) {
                tables[values[p]]++;
                tables[256 + values[p + 1]]++;
                tables[512 + values[p + 2]]++;
                tables[768 + values[p + 3]]++;
            }
        if (channels == 3) /* RGB, most images: the channel loop unrolled */
            for (; p + HISTOGRAM_TABLES <= stop; p += HISTOGRAM_TABLES)
                for (Py_ssize_t t = 0; t < HISTOGRAM_TABLES; t++) {
                    const uint8_t *restrict pixel = values + 3 * (p + t);
                    uint32_t *restrict table = tables + t * cells;
                    table[pixel[0]]++;
                    table[256 + pixel[1]]++;
                    table[512 + pixel[2]]++;
                }
        for (; p + HISTOGRAM_TABLES <= stop; p += HISTOGRAM_TABLES)
            for (Py_ssize_t t = 0; t < HISTOGRAM_TABLES; t++) {
                const uint8_t *restrict pixel = values + channels * (p + t);
                uint32_t *restrict table = tables + t * cells;
                for (Py_ssize_t c = 0; c < channels; c++)
                    table[256 * c + pixel[c]]++;
            }
        for (; p < stop; p++)
            for (Py_ssize_t c = 0; c < channels; c++)
                tables[256 * c + values[channels * p + c]]++;
        fold_tables(tables, cells, counts);
    }
}

/* Count 8- or 16-bit values one by one into int64 counts (channels x bins), those whose
 * `valid` byte is 0 left out (all counted without `valid`). `flip` maps signed values to
 * their bin (v + 2^(bits-1): the top bit flipped). */
static void count_keyed(const uint8_t *restrict values, Py_ssize_t itemsize, unsigned flip,
                        Py_ssize_t count, Py_ssize_t channels, const uint8_t *restrict valid,
                        int64_t *restrict counts, Py_ssize_t bins) {
    Py_ssize_t c = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        unsigned key;
        if (itemsize == 1) {
            key = values[i] ^ flip;
        } else {
            uint16_t v;
            memcpy(&v, values + 2 * i, sizeof v); /* a view may be unaligned */
            key = v ^ flip;
        }
        if (valid == NULL || valid[i])
            counts[c * bins + key]++;
        if (++c == channels)
            c = 0;
    }
}

/* histogram(values, itemsize, signed, channels, counts, valid): add the histogram of
 * 8- or 16-bit integer `values` (pixels of `channels` interleaved values, one contiguous
 * buffer) onto int64 `counts` (channels, 2^(8 itemsize)), bin k holding value k (k - 2^7
 * or k - 2^15 when signed); `valid` None, or one byte a value, 0 for those left out. */
static PyObject *histogram(PyObject *self, PyObject *args) {
    Py_buffer values, counts, valid = {0};
    Py_ssize_t itemsize, channels;
    int is_signed;
    PyObject *valid_arg;
    if (!PyArg_ParseTuple(args, "y*npnw*O", &values, &itemsize, &is_signed, &channels, &counts,
                          &valid_arg))
        return NULL;
    PyObject *result = NULL;
    uint32_t *tables = NULL;
    const int with_valid = valid_arg != Py_None;
    if (with_valid && PyObject_GetBuffer(valid_arg, &valid, PyBUF_SIMPLE) < 0)
        goto done;
    if (itemsize != 1 && itemsize != 2) {
        PyErr_SetString(PyExc_ValueError, "values must be of 1 or 2 bytes");
        goto done;
    }
    if (channels < 1) {
        PyErr_SetString(PyExc_ValueError, "channels must be >= 1");
        goto done;
    }
    const Py_ssize_t bins = itemsize == 1 ? 256 : 65536;
    const Py_ssize_t cells = size_product(channels, bins), count_bytes = size_product(cells, 8);
    const Py_ssize_t table_bytes = size_product(cells, 4 * HISTOGRAM_TABLES);
    const Py_ssize_t pixel_bytes = size_product(channels, itemsize);
    if (count_bytes < 0 || table_bytes < 0 || pixel_bytes < 0) {
        PyErr_Format(PyExc_OverflowError, "%zd channels: more bins than memory can hold",
                     channels);
        goto done;
    }
    if (values.len % pixel_bytes != 0) {
        PyErr_SetString(PyExc_ValueError, "the values do not split into pixels of `channels`");
        goto done;
    }
    const Py_ssize_t count = values.len / itemsize;
    if (with_valid && valid.len != count) {
        PyErr_Format(PyExc_ValueError, "valid holds %zd bytes for %zd values", valid.len,
                     count);
        goto done;
    }
    Py_buffer *const buffers[] = {&values, &counts};
    static const char *const names[] = {"values", "counts"};
    if (!check_size(&counts, count_bytes, 8, "counts") || !check_apart(buffers, names, 2))
        goto done;
    if (with_valid) {
        Py_buffer *const read[] = {&valid, &counts};
        static const char *const read_names[] = {"valid", "counts"};
        if (!check_apart(read, read_names, 2))
            goto done;
    }
    if (itemsize == 1 && !is_signed && !with_valid) {
        tables = PyMem_RawCalloc((size_t)cells * HISTOGRAM_TABLES, sizeof *tables);
        if (tables == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        count_uint8(values.buf, count / channels, channels, tables, counts.buf);
        Py_END_ALLOW_THREADS
    } else {
        const unsigned flip = is_signed ? (itemsize == 1 ? 0x80u : 0x8000u) : 0u;
        Py_BEGIN_ALLOW_THREADS
        count_keyed(values.buf, itemsize, flip, count, channels, with_valid ? valid.buf : NULL,
                    counts.buf, bins);
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_RawFree(tables);
    PyBuffer_Release(&values);
    PyBuffer_Release(&counts);
    PyBuffer_Release(&valid); /* nothing to release when it was None */
    return result;
}

static PyMethodDef methods[] = {
    {"moments", moments, METH_VARARGS,
     "moments(images, count, channels, sums, squares, lows, highs)\n\n"
     "Accumulate the per-channel sum, sum of squares, min and max of `count` uint8 images\n"
     "(one contiguous buffer, channels interleaved) into int64 sums and squares and uint8\n"
     "lows and highs, each (count, channels)."},
    {"records", records, METH_VARARGS,
     "records(images, count, channels, sums, squares, lows, highs, spreads, totals,\n"
     "        extremes) -> bool\n\n"
     "moments() with float64 lows and highs, in the same pass each image's spreads added\n"
     "onto spreads and totals as spread_sums() adds them (its bool), and the extremes of\n"
     "all the images into uint8 extremes (2, channels): minima, then maxima."},
    {"summary", summary, METH_VARARGS,
     "summary(images, count, channels, spreads, totals, extremes[, cross, cross_totals])\n"
     "        -> bool\n\n"
     "records() without the records: the same spreads, totals and extremes (its bool\n"
     "likewise: False where numpy must compute the spreads from records); with `cross`\n"
     "(normstats.maths._cross._C_API), each pair's cross sums over the images too, onto\n"
     "int128 cross_totals (pairs x 2 uint64 words)."},
    {"running_sums", running_sums, METH_VARARGS,
     "running_sums(images, count, run, squares)\n\n"
     "Add `count` uint8 images (one contiguous buffer) position by position onto the uint16\n"
     "sums `run`, one per value of an image, and, unless `squares` is None, their squares\n"
     "onto uint32 sums of squares `squares`: modulo 2**16 and 2**32, exact for runs of at\n"
     "most 257 images."},
    {"histogram", histogram, METH_VARARGS,
     "histogram(values, itemsize, signed, channels, counts, valid)\n\n"
     "Add the histogram of 8- or 16-bit integer values (pixels of `channels` interleaved\n"
     "values, one contiguous buffer) onto int64 counts (channels, 256 or 65536), bin k\n"
     "holding value k (k - 128 or k - 32768 when signed); `valid`: None, or one byte a\n"
     "value, 0 for those left out."},
    {"exponent_bins", exponent_bins, METH_VARARGS,
     "exponent_bins(bits, columns, low_sums, high_sums)\n\n"
     "Add the significands of float64 values, given as int64 bits (rows, columns), into\n"
     "int64 bins (2048, columns) by biased exponent: the low 27 bits and the rest."},
    {"spread_sums", spread_sums, METH_VARARGS,
     "spread_sums(sums, squares, pixels, channels, spreads, totals) -> bool\n\n"
     "Add each image's population std, sample std (images of two pixels or more) and\n"
     "population variance per channel, from int64 sums and squares (count, channels) of\n"
     "int64 pixels (count) values, into fixed-point totals (3, channels, 72) of uint64\n"
     "limbs (value * 2**1130, limb l weighing 2**(32 l)), and the sums and squares\n"
     "themselves into totals (2, channels) int128s (low and high uint64 words). False,\n"
     "the totals incomplete, where numpy must compute them (int64 overflow, images\n"
     "without pixels, sums that are no variance)."},
    {"_variants", variants, METH_NOARGS,
     "_variants() -> tuple of the moments() kernels this CPU runs, best first."},
    {"_select", select_variant, METH_O,
     "_select(name) -> the previous name: make moments() use kernel `name` for every row\n"
     "(and running_sums() its loop);\n"
     "None: the best one, and the portable loop for rows too short to pay for it (tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_moments",
    "normstats' compiled statistics kernels (see normstats.maths.fused).", -1, methods,
};

PyMODINIT_FUNC PyInit__moments(void) {
#if X86_KERNELS
    __builtin_cpu_init();
    rgb_masks_init();
#endif
    chosen = best_variant();
    return PyModule_Create(&module);
}
