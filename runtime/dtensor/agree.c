/* agree.c: one verdict for every rank of a communicator (dtensor.h). */
#include "shardbench/dtensor.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sb_agree(MPI_Comm comm, int rc, sb_error *err, int *failed_rank)
{
    int rank, code = rc ? (err->code ? err->code : SB_EXIT_INTERNAL) : 0, worst = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, comm);
    if (!worst)
        return 0;
    /* the message of the lowest failing rank, to every rank */
    int who = code ? rank : 1 << 30, first = 0;
    MPI_Allreduce(&who, &first, 1, MPI_INT, MPI_MIN, comm);
    char msg[sizeof err->msg];
    if (rank == first)
        snprintf(msg, sizeof msg, "%s", err->msg);
    MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, comm);
    if (rank != first)
        snprintf(err->msg, sizeof err->msg, "%s", msg);
    err->code = worst;
    if (failed_rank)
        *failed_rank = first;
    return -1;
}

/* ---- ranks that must hold the same text -------------------------------------------- */

static uint64_t fnv1a64(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h ^ n;
}

/* Line k of text (without its '\n'): *len its length; NULL past the end. */
static const char *line_at(const char *text, size_t n, size_t k, size_t *len)
{
    const char *p = text, *end = text + n;
    for (size_t i = 0; p < end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        if (i == k) {
            *len = (size_t)(e - p);
            return p;
        }
        p = nl ? nl + 1 : end;
    }
    *len = 0;
    return NULL;
}

int sb_agree_text(MPI_Comm comm, const char *what, const char *text, sb_error *err)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    size_t n = text ? strlen(text) : 0;
    unsigned long long h = fnv1a64(text ? text : "", n), h0 = h;
    MPI_Bcast(&h0, 1, MPI_UNSIGNED_LONG_LONG, 0, comm);
    int mine = h != h0 ? rank : INT_MAX, other = INT_MAX;
    MPI_Allreduce(&mine, &other, 1, MPI_INT, MPI_MIN, comm);
    if (other == INT_MAX)
        return 0;
    /* rank 0's and the first differing rank's text, to every rank, so each
     * writes the same message */
    long long len[2] = {(long long)n, (long long)n};
    MPI_Bcast(&len[0], 1, MPI_LONG_LONG, 0, comm);
    MPI_Bcast(&len[1], 1, MPI_LONG_LONG, other, comm);
    char *t[2] = {NULL, NULL};
    int ok = len[0] < INT_MAX && len[1] < INT_MAX;
    for (int i = 0; ok && i < 2; i++)
        ok = (t[i] = malloc((size_t)len[i] + 1)) != NULL;
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (all_ok) {
        const int root[2] = {0, other};
        for (int i = 0; i < 2; i++) {
            if (rank == root[i])
                memcpy(t[i], text ? text : "", (size_t)len[i]);
            MPI_Bcast(t[i], (int)len[i], MPI_CHAR, root[i], comm);
            t[i][len[i]] = 0;
        }
        const char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        for (size_t k = 0;; k++) {
            a = line_at(t[0], (size_t)len[0], k, &la);
            b = line_at(t[1], (size_t)len[1], k, &lb);
            if (!a || !b || la != lb || memcmp(a, b, la))
                break;
        }
        if (la > 400)
            la = 400;
        if (lb > 400)
            lb = 400;
        sb_fail(err, SB_EXIT_INPUT, "ranks disagree on the %s: rank 0 has %.*s, rank %d has %.*s",
                what, a ? (int)la : 9, a ? a : "no more", other, b ? (int)lb : 9,
                b ? b : "no more");
    } else {
        sb_fail(err, SB_EXIT_INPUT, "ranks disagree on the %s: rank 0 and rank %d differ", what,
                other);
    }
    free(t[0]);
    free(t[1]);
    return -1;
}
