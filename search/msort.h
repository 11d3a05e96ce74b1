/* msort.h: one stable merge sort for search/ (dp.c's configs by cost,
 * pipeline.c's entries by scratch and its bound values). Internal to
 * search/.
 *
 * SB_DEFINE_MSORT(name, T, LESS) defines
 *     static void name(T *a, T *tmp, size_t n, const void *ctx);
 * which sorts a[0, n) ascending by LESS(ctx, x, y) ("x before y"), keeping
 * equal elements in their order (stable), bottom-up: runs of 16 sorted by
 * insertion, then runs of 16, 32, 64, ... merged between a and tmp (n
 * elements of scratch; two runs already in order are copied), the result
 * in a. A stable sort's output is fixed by LESS alone, so this gives what
 * any other stable sort gives. */
#ifndef SB_SEARCH_MSORT_H
#define SB_SEARCH_MSORT_H

#include <stddef.h>
#include <string.h>

#define SB_DEFINE_MSORT(name, T, LESS)                                                         \
    static void name(T *a, T *tmp, size_t n, const void *ctx)                                  \
    {                                                                                          \
        (void)ctx;                                                                             \
        T *src = a, *dst = tmp;                                                                \
        for (size_t lo = 0; lo < n; lo += 16) {                                                \
            size_t hi = lo + 16 < n ? lo + 16 : n;                                             \
            for (size_t i = lo + 1; i < hi; i++) {                                             \
                T x = a[i];                                                                    \
                size_t j = i;                                                                  \
                for (; j > lo && LESS(ctx, x, a[j - 1]); j--)                                  \
                    a[j] = a[j - 1];                                                           \
                a[j] = x;                                                                      \
            }                                                                                  \
        }                                                                                      \
        for (size_t w = 16; w < n; w *= 2) {                                                   \
            for (size_t lo = 0; lo < n; lo += 2 * w) {                                         \
                size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;    \
                size_t i = lo, j = mid, o = lo;                                                \
                if (mid >= hi || !LESS(ctx, src[mid], src[mid - 1])) {                         \
                    memcpy(dst + lo, src + lo, (hi - lo) * sizeof *dst);                       \
                    continue;                                                                  \
                }                                                                              \
                while (i < mid && j < hi)                                                      \
                    dst[o++] = LESS(ctx, src[j], src[i]) ? src[j++] : src[i++];                \
                while (i < mid)                                                                \
                    dst[o++] = src[i++];                                                       \
                while (j < hi)                                                                 \
                    dst[o++] = src[j++];                                                       \
            }                                                                                  \
            T *sw = src;                                                                       \
            src = dst;                                                                         \
            dst = sw;                                                                          \
        }                                                                                      \
        if (src != a)                                                                          \
            memcpy(a, src, n * sizeof *a);                                                     \
    }

#endif
