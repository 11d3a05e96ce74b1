/* dp_reuse.c: repeated work of the exact DP, copied instead of computed
 * (dp_reuse.h says when; search/README.md, "Exact shortcuts"). */
#include "dp_reuse.h"

#include "shardbench/common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

/* One remembered key: a pair table (its id, and its table while kept) or an
 * elimination (its result and the result's id). */
struct dp_memo_entry {
    uint64_t h;
    int pair;       /* 1: a pair table's key */
    unsigned char *key;
    size_t klen;
    uint64_t id;
    int64_t size;   /* entries of t (pair table) or g and arg (elimination) */
    double *t;      /* pair table or elimination table (dp_bufs); NULL: not kept */
    uint16_t *arg;
    int ncm;
    int *cm[DP_MAX_SCOPE]; /* elimination: the result's classes (dp_result) */
    double bytes;
};

static void free_cms(dp_memo_entry *e)
{
    for (int i = 0; i < e->ncm; i++) {
        dp_buf_free(e->cm[i]);
        e->cm[i] = NULL;
    }
}

/* The reference count and the capacity sit in a header before the table. */
typedef struct {
    int64_t refs;
    size_t cap; /* bytes after the header (keeps the table 16-byte aligned) */
} buf_head;

/* Freed tables of at least POOL_MIN bytes are kept (up to POOL_SLOTS of
 * them and pool_limit bytes, oldest dropped first) and handed out again
 * for a request they fit without wasting more than a quarter: a fresh
 * large block costs a page fault and a zeroed page per 4 KiB on first
 * touch (a quarter of the transformer's CPU time at p = 1024 before).
 * Per thread (a search allocates on one thread), emptied by
 * dp_buf_pool_drain. */
#define POOL_MIN ((size_t)1 << 20)
#define POOL_SLOTS 16

static _Thread_local struct {
    buf_head *h[POOL_SLOTS]; /* oldest first */
    int n;
    size_t bytes, limit;
} pool;

static void pool_drop(int i)
{
    pool.bytes -= pool.h[i]->cap;
    free(pool.h[i]);
    memmove(pool.h + i, pool.h + i + 1, (size_t)(pool.n - 1 - i) * sizeof *pool.h);
    pool.n--;
}

void dp_buf_pool_limit(size_t bytes)
{
    pool.limit = bytes;
    while (pool.n && pool.bytes > pool.limit)
        pool_drop(0);
}

void dp_buf_pool_drain(void)
{
    while (pool.n)
        pool_drop(0);
}

/* Large blocks backed by transparent huge pages where the kernel offers
 * them on request (one fault per 2 MiB instead of per 4 KiB). */
static void advise_huge(buf_head *h, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (bytes < ((size_t)4 << 20))
        return;
    uintptr_t lo = ((uintptr_t)(h + 1) + 4095) & ~(uintptr_t)4095;
    uintptr_t hi = ((uintptr_t)(h + 1) + bytes) & ~(uintptr_t)4095;
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)h;
    (void)bytes;
#endif
}

void *dp_buf_alloc(size_t bytes)
{
    bytes = bytes ? bytes : 1;
    if (bytes >= POOL_MIN) {
        int best = -1;
        for (int i = 0; i < pool.n; i++)
            if (pool.h[i]->cap >= bytes && pool.h[i]->cap - bytes <= bytes / 4
                && (best < 0 || pool.h[i]->cap < pool.h[best]->cap))
                best = i;
        if (best >= 0) {
            buf_head *h = pool.h[best];
            pool.bytes -= h->cap;
            memmove(pool.h + best, pool.h + best + 1,
                    (size_t)(pool.n - 1 - best) * sizeof *pool.h);
            pool.n--;
            h->refs = 1;
            return h + 1;
        }
        /* a miss: the pool makes room first, so that it never adds more
         * than its limit to the memory live at once */
        while (pool.n && pool.bytes + bytes > pool.limit)
            pool_drop(0);
    }
    buf_head *h = malloc(sizeof *h + bytes);
    if (!h)
        return NULL;
    h->refs = 1;
    h->cap = bytes;
    (void)advise_huge;
    return h + 1;
}

void *dp_buf_ref(void *p)
{
    ((buf_head *)p - 1)->refs++;
    return p;
}

void dp_buf_free(void *p)
{
    if (!p || --((buf_head *)p - 1)->refs)
        return;
    buf_head *h = (buf_head *)p - 1;
    if (h->cap < POOL_MIN || h->cap > pool.limit) {
        free(h);
        return;
    }
    while (pool.n && (pool.n == POOL_SLOTS || pool.bytes + h->cap > pool.limit))
        pool_drop(0);
    pool.h[pool.n++] = h;
    pool.bytes += h->cap;
}

int dp_buf_shared(const void *p)
{
    return ((const buf_head *)p - 1)->refs > 1;
}

void dp_key_add(dp_key *k, const void *p, size_t n)
{
    if (k->failed)
        return;
    if (k->len + n > k->cap) {
        size_t nc = k->cap ? k->cap : 256;
        while (nc < k->len + n)
            nc *= 2;
        unsigned char *nb = realloc(k->b, nc);
        if (!nb) {
            k->failed = 1;
            return;
        }
        k->b = nb;
        k->cap = nc;
    }
    memcpy(k->b + k->len, p, n);
    k->len += n;
}

void dp_key_free(dp_key *k)
{
    free(k->b);
    *k = (dp_key){0};
}

static uint64_t hash_bytes(const unsigned char *c, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, c + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 32;
    }
    for (size_t i = n & ~(size_t)7; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ULL;
    return h;
}

static dp_memo_entry *find(dp_memo *m, int pair, const dp_key *k, uint64_t h)
{
    for (int i = m->n - 1; i >= 0; i--) {
        dp_memo_entry *e = &m->e[i];
        if (e->h == h && e->pair == pair && e->klen == k->len && memcmp(e->key, k->b, k->len) == 0)
            return e;
    }
    return NULL;
}

/* Moves e to the newest end (entries are dropped oldest first, so a key
 * used again stays): least recently used, not least recently added. The
 * entry's new address. */
static dp_memo_entry *touch(dp_memo *m, dp_memo_entry *e)
{
    dp_memo_entry keep = *e;
    int i = (int)(e - m->e);
    memmove(m->e + i, m->e + i + 1, (size_t)(m->n - 1 - i) * sizeof *m->e);
    m->e[m->n - 1] = keep;
    return &m->e[m->n - 1];
}

static void drop_table(dp_memo *m, dp_memo_entry *e)
{
    m->bytes -= e->bytes - (double)e->klen;
    e->bytes = (double)e->klen;
    dp_buf_free(e->t);
    dp_buf_free(e->arg);
    free_cms(e);
    e->t = NULL;
    e->arg = NULL;
}

/* Adds an entry (key copied; t and arg taken over, may be NULL), dropping
 * the oldest entries' tables, then the oldest entries, beyond the cap.
 * NULL when memory is short. */
static dp_memo_entry *add(dp_memo *m, int pair, const dp_key *k, uint64_t h, uint64_t id,
                          int64_t size, double *t, uint16_t *arg, const dp_result *r)
{
    double bytes = (double)k->len + (t ? (double)size * 8 : 0) + (arg ? (double)size * 2 : 0);
    dp_memo_entry e = {.h = h, .pair = pair, .klen = k->len, .id = id, .size = size, .t = t,
                       .arg = arg};
    for (int i = 0; r && t && i < r->ncm; i++)
        e.cm[i] = r->cm[i] ? dp_buf_ref(r->cm[i]) : NULL;
    e.ncm = r && t ? r->ncm : 0;
    if (bytes > m->cap / 2) { /* too large to keep: the key only */
        dp_buf_free(e.t);
        dp_buf_free(e.arg);
        free_cms(&e);
        t = NULL;
        arg = NULL;
        e.t = NULL;
        e.arg = NULL;
        bytes = (double)k->len;
    }
    e.bytes = bytes;
    e.key = malloc(k->len ? k->len : 1);
    /* doubling: one copy per entry on average, not per add */
    int grown = sb_grow((void **)&m->e, &m->ecap, m->n, sizeof *m->e, 64) == 0;
    if (!e.key || !grown) {
        free(e.key);
        dp_buf_free(t);
        dp_buf_free(arg);
        free_cms(&e);
        return NULL;
    }
    memcpy(e.key, k->b, k->len);
    for (int i = 0; i < m->n && m->bytes + bytes > m->cap; i++)
        if (m->e[i].t)
            drop_table(m, &m->e[i]);
    int drop = 0;
    while (drop < m->n && m->bytes + bytes > m->cap) {
        m->bytes -= m->e[drop].bytes;
        dp_buf_free(m->e[drop].t);
        dp_buf_free(m->e[drop].arg);
        free_cms(&m->e[drop]);
        free(m->e[drop++].key);
    }
    memmove(m->e, m->e + drop, (size_t)(m->n - drop) * sizeof *m->e);
    m->n -= drop;
    m->e[m->n++] = e;
    m->bytes += bytes;
    return &m->e[m->n - 1];
}

uint64_t dp_memo_pair(dp_memo *m, const dp_key *k, double *t, int64_t size, int *have)
{
    *have = 0;
    if (k->failed)
        return m->next_id++;
    uint64_t h = hash_bytes(k->b, k->len);
    dp_memo_entry *e = find(m, 1, k, h);
    if (e) {
        e = touch(m, e);
        if (t && e->t && e->size == size) {
            memcpy(t, e->t, (size_t)size * sizeof *t);
            *have = 1;
            m->pair_hits++;
        }
        return e->id;
    }
    uint64_t id = m->next_id++;
    add(m, 1, k, h, id, size, NULL, NULL, NULL);
    return id;
}

void dp_memo_pair_put(dp_memo *m, uint64_t id, const double *t, int64_t size)
{
    for (int i = m->n - 1; i >= 0; i--) {
        dp_memo_entry *e = &m->e[i];
        if (!e->pair || e->id != id)
            continue;
        /* a pair table is kept only up to an eighth of the cap: it is
         * cheap to build again, and larger ones (12532 x 3719 doubles,
         * 373 MB, in llama3-70b at p = 4096) would push out the
         * eliminations of the layer before, which are not */
        if (e->t || (double)size * 8 > m->cap / 8)
            return;
        double *c = dp_buf_alloc((size_t)size * sizeof *c);
        if (!c)
            return;
        memcpy(c, t, (size_t)size * sizeof *c);
        for (int j = 0; j < m->n && m->bytes + (double)size * 8 > m->cap; j++)
            if (m->e[j].t && j != i)
                drop_table(m, &m->e[j]);
        e->t = c;
        e->size = size;
        e->bytes += (double)size * 8;
        m->bytes += (double)size * 8;
        return;
    }
}

int dp_memo_take(dp_memo *m, const dp_key *k, dp_result *r, uint64_t *id)
{
    if (k->failed)
        return 0;
    dp_memo_entry *e = find(m, 0, k, hash_bytes(k->b, k->len));
    if (!e)
        return 0;
    e = touch(m, e);
    if (!e->t)
        return 0;
    r->g = dp_buf_ref(e->t);
    r->arg = dp_buf_ref(e->arg);
    r->size = e->size;
    r->ncm = e->ncm;
    for (int i = 0; i < e->ncm; i++)
        r->cm[i] = e->cm[i] ? dp_buf_ref(e->cm[i]) : NULL;
    *id = e->id;
    m->hits++;
    return 1;
}

uint64_t dp_memo_put(dp_memo *m, const dp_key *k, const dp_result *r)
{
    if (k->failed)
        return m->next_id++;
    uint64_t h = hash_bytes(k->b, k->len);
    dp_memo_entry *e = find(m, 0, k, h);
    if (e) { /* its table was too large to keep or dropped: the same result, the same id */
        double bytes = (double)r->size * (8 + 2);
        if (e->t || bytes > m->cap / 2)
            return e->id;
        e = touch(m, e); /* kept again (the newest), dropping the oldest tables */
        for (int j = 0; j < m->n - 1 && m->bytes + bytes > m->cap; j++)
            if (m->e[j].t)
                drop_table(m, &m->e[j]);
        e->t = dp_buf_ref(r->g);
        e->arg = dp_buf_ref(r->arg);
        e->ncm = r->ncm;
        for (int i = 0; i < r->ncm; i++)
            e->cm[i] = r->cm[i] ? dp_buf_ref(r->cm[i]) : NULL;
        e->size = r->size;
        e->bytes += bytes;
        m->bytes += bytes;
        return e->id;
    }
    uint64_t id = m->next_id++;
    add(m, 0, k, h, id, r->size, dp_buf_ref(r->g), dp_buf_ref(r->arg), r);
    return id;
}

void dp_memo_free(dp_memo *m)
{
    for (int i = 0; i < m->n; i++) {
        free(m->e[i].key);
        dp_buf_free(m->e[i].t);
        dp_buf_free(m->e[i].arg);
        free_cms(&m->e[i]);
    }
    free(m->e);
    *m = (dp_memo){0};
}
