/*
 * SIMD_CLONES: a loop written in plain C compiled three times, for x86-64-v4 (AVX-512),
 * AVX2 and plain x86-64, the variant the CPU runs picked once as the module loads (gcc's
 * target_clones, which needs glibc's ifunc: Linux). Elsewhere, one plain build. Used by
 * the loops the compiler vectorises itself in normstats/maths/_moments.c, _cross.c and
 * _masked.c.
 */

#ifndef NORMSTATS_SIMD_CLONES_H
#define NORMSTATS_SIMD_CLONES_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define SIMD_CLONES
#endif

#endif
