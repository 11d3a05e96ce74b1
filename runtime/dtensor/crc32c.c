/* crc32c.c: CRC-32C (Castagnoli polynomial, reflected 0x82F63B78), the
 * checksum of checkpoint shards and dataset records. On x86-64 CPUs with
 * SSE4.2 (checked once at run time) the CRC32 instruction, 8 bytes per
 * step; elsewhere table driven, slicing-by-8 (eight 256-entry tables, 8
 * bytes per step; the byte-wise loop finishes the tail), the tables built
 * once on first use (pthread_once). Both give the same values
 * (tests/unit/test_dtensor.c compares them). */
#include "shardbench/dtensor.h"

#include <pthread.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define SB_CRC_HW 1
#endif

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t sb_crc32c_portable(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        /* little-endian words: the first four bytes fold into crc */
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                             | (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff]
              ^ crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]]
              ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    for (; n; n--, p++)
        crc = crc_table[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#ifdef SB_CRC_HW
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t c = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8); /* any alignment */
        c = _mm_crc32_u64(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    for (; n; n--, p++)
        c32 = _mm_crc32_u8(c32, *p);
    return ~c32;
}

static int hw_ok = -1;
static void hw_detect(void) { hw_ok = __builtin_cpu_supports("sse4.2") ? 1 : 0; }
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;
#endif

int sb_crc32c_hardware(void)
{
#ifdef SB_CRC_HW
    pthread_once(&hw_once, hw_detect);
    return hw_ok;
#else
    return 0;
#endif
}

uint32_t sb_crc32c(uint32_t crc, const void *data, size_t n)
{
#ifdef SB_CRC_HW
    if (sb_crc32c_hardware())
        return crc_hw(crc, data, n);
#endif
    return sb_crc32c_portable(crc, data, n);
}
