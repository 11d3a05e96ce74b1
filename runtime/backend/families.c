/* families.c: the kernel families of a backend (backend.h) by name, and
 * the check that a backend has the families something needs, every entry
 * filled: what a new backend has not written yet fails here, naming the
 * family and who needs it, instead of a call through NULL. */
#include <stdio.h>
#include <string.h>

#include "shardbench/backend.h"

/* sb_backend's family members are SB_KERNEL_FAMILIES, in its order, and
 * nothing follows them */
#define SB_FAMILY_AT_(E, m, T)                                                                     \
    _Static_assert(offsetof(sb_backend, m)                                                         \
                       == offsetof(sb_backend, gemm) + SB_FAMILY_##E * sizeof(const void *),       \
                   "sb_backend." #m ": not in SB_KERNEL_FAMILIES' order");
SB_KERNEL_FAMILIES(SB_FAMILY_AT_)
#undef SB_FAMILY_AT_
_Static_assert(sizeof(sb_backend) == offsetof(sb_backend, gemm) + SB_FAMILY_COUNT * sizeof(void *),
               "sb_backend ends with its kernel families");

typedef void (*any_fn)(void);

static const struct {
    const char *name;
    size_t entries; /* function pointers in the family's table */
} families[] = {
#define SB_FAMILY_ROW_(E, m, T) {#m, sizeof(T) / sizeof(any_fn)},
    SB_KERNEL_FAMILIES(SB_FAMILY_ROW_)
#undef SB_FAMILY_ROW_
};

const char *sb_kernel_family_name(sb_kernel_family f)
{
    return f >= 0 && f < SB_FAMILY_COUNT ? families[f].name : "?";
}

/* be's table of family f, or NULL */
static const void *family_table(const sb_backend *be, sb_kernel_family f)
{
    const void *t;
    memcpy(&t, (const char *)be + offsetof(sb_backend, gemm) + (size_t)f * sizeof t, sizeof t);
    return t;
}

int sb_backend_require(const sb_backend *be, unsigned need, const char *who, sb_error *err)
{
    if (!be)
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: no backend", who);
    for (int f = 0; f < SB_FAMILY_COUNT; f++) {
        if (!(need & (1u << f)))
            continue;
        const char *t = family_table(be, (sb_kernel_family)f);
        if (!t)
            return sb_fail(err, SB_EXIT_INPUT,
                           "backend '%s' has no %s kernels (sb_backend.%s is NULL), needed by %s",
                           be->name, families[f].name, families[f].name, who);
        for (size_t i = 0; i < families[f].entries; i++) {
            any_fn fn;
            memcpy(&fn, t + i * sizeof fn, sizeof fn);
            if (!fn)
                return sb_fail(err, SB_EXIT_INPUT,
                               "backend '%s': its %s kernels leave entry %zu of %zu empty "
                               "(sb_backend.%s), needed by %s",
                               be->name, families[f].name, i + 1, families[f].entries,
                               families[f].name, who);
        }
    }
    return 0;
}
