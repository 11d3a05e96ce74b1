/* runtime/cuda/writes.hpp: which entries of a backend (backend.h) may
 * write device memory, and a copy of a backend with each of those wrapped
 * to call a hook after it (C++17; the cuda backend and
 * tests/mpi/test_bf16_keep.cc).
 *
 * The cuda backend in bf16 keeps the bf16 conversions of GEMM operands
 * that are no weight's for later GEMMs (sbc_act_cache in cuda_host.h); its
 * hook drops those whose source lies in memory an entry may write, so a
 * kept conversion is never read after its fp32 source changed. The
 * wrapper finds that memory from the entry's parameter types
 * (sbc_out_kind): the blocks its non-const pointers to numbers point into,
 * or everything for a pointer to pointers it may write through, a pointer
 * to another type, or a core entry that names no pointer. That is only
 * safe if every entry that may write is wrapped:
 *
 * - The core is classified by name, in the two lists below; a core member
 *   added to backend.h and to neither list fails a static_assert. The
 *   quiet ones write no device memory: the allocator, the copy to the
 *   host, sync, the timing marks, weight_set (host bookkeeping), the
 *   communicator bookkeeping; and release, which drops the conversions in
 *   the block it frees. A quiet one that takes a pointer it may write
 *   through, other than to_host, marks_read and release, fails a
 *   static_assert too.
 * - A kernel family is classified as a whole, with no names: a kernel
 *   touches only its arguments (kernels.h), so every entry that takes a
 *   pointer it may write through is wrapped, and one that takes none is a
 *   size query (quiet; a static_assert holds it to returning a value). A
 *   new kernel in a family needs no line here, nor a new family in
 *   SB_KERNEL_FAMILIES. The gemm family is quiet as a whole: the GEMM drops
 *   the conversions of what its output overlaps itself (a static_assert
 *   holds that family to its one entry).
 *
 * tests/mpi/test_bf16_keep.cc runs the executor's real sequences of calls
 * through a CPU backend wrapped the same way. */
#ifndef SHARDBENCH_CUDA_WRITES_HPP
#define SHARDBENCH_CUDA_WRITES_HPP

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "shardbench/backend.h"

#define SBC_QUIET_CORE(X)                                                                \
    X(alloc) X(release) X(to_host) X(weight_set) X(sync) X(mark) X(marks_read)           \
    X(comm_release) X(comm_split)

#define SBC_WRITING_CORE(X)                                                              \
    X(zero) X(from_host) X(finalize) X(allreduce) X(alltoallv) X(reduce_scatter) X(allgather)

/* What an entry may write through one parameter of type T: 0 nothing (not
 * a pointer, a pointer to const, an MPI handle), 1 the memory it points
 * into (a pointer to numbers or void), 2 anything (a pointer to pointers
 * it may write through, a pointer to some other type). */
template <typename T> constexpr int sbc_out_kind()
{
    if constexpr (std::is_same_v<T, MPI_Comm> || std::is_same_v<T, MPI_Op> ||
                  std::is_same_v<T, MPI_Datatype> || !std::is_pointer_v<T>) {
        return 0;
    } else {
        using P = std::remove_pointer_t<T>; /* the pointee, with its qualifiers */
        using U = std::remove_cv_t<P>;
        if constexpr (std::is_pointer_v<U>)
            return std::is_const_v<std::remove_pointer_t<U>> ? 0 : 2;
        else if constexpr (std::is_const_v<P>)
            return 0;
        else if constexpr (std::is_arithmetic_v<U> || std::is_void_v<U>)
            return 1;
        else
            return 2;
    }
}

/* whether an entry of type F takes a pointer it may write through */
template <typename F> struct sbc_takes_out_ptr;
template <typename R, typename... A> struct sbc_takes_out_ptr<R (*)(A...)> {
    static constexpr bool value = ((sbc_out_kind<A>() != 0) || ... || false);
    static constexpr bool returns = !std::is_void_v<R>;
};

/* The entries of a kernel family F (every member a function pointer) as
 * a tuple of references to them, by structured binding. */
template <typename F> constexpr std::size_t sbc_entries = sizeof(F) / sizeof(void (*)(void));
#define SBC_BIND(N, ...)                                                                 \
    if constexpr (n == N) {                                                              \
        auto &[__VA_ARGS__] = f;                                                         \
        return std::tie(__VA_ARGS__);                                                    \
    } else
template <typename F> auto sbc_members(F &f)
{
    constexpr std::size_t n = sbc_entries<F>;
    SBC_BIND(1, a)
    SBC_BIND(2, a, b)
    SBC_BIND(3, a, b, c)
    SBC_BIND(4, a, b, c, d)
    SBC_BIND(5, a, b, c, d, e)
    SBC_BIND(6, a, b, c, d, e, f1)
    SBC_BIND(7, a, b, c, d, e, f1, g)
    SBC_BIND(8, a, b, c, d, e, f1, g, h)
    SBC_BIND(9, a, b, c, d, e, f1, g, h, i)
    SBC_BIND(10, a, b, c, d, e, f1, g, h, i, j)
    SBC_BIND(11, a, b, c, d, e, f1, g, h, i, j, k)
    SBC_BIND(12, a, b, c, d, e, f1, g, h, i, j, k, l)
    SBC_BIND(13, a, b, c, d, e, f1, g, h, i, j, k, l, m)
    SBC_BIND(14, a, b, c, d, e, f1, g, h, i, j, k, l, m, n1)
    SBC_BIND(15, a, b, c, d, e, f1, g, h, i, j, k, l, m, n1, o)
    SBC_BIND(16, a, b, c, d, e, f1, g, h, i, j, k, l, m, n1, o, p)
    SBC_BIND(17, a, b, c, d, e, f1, g, h, i, j, k, l, m, n1, o, p, q)
    SBC_BIND(18, a, b, c, d, e, f1, g, h, i, j, k, l, m, n1, o, p, q, r)
    SBC_BIND(19, a, b, c, d, e, f1, g, h, i, j, k, l, m, n1, o, p, q, r, s)
    SBC_BIND(20, a, b, c, d, e, f1, g, h, i, j, k, l, m, n1, o, p, q, r, s, t)
    {
        static_assert(sizeof(F) == 0, "a kernel family of more than 20 entries: add a line");
    }
}
#undef SBC_BIND

/* the family whose entries drop the kept conversions themselves */
template <typename F> inline constexpr bool sbc_quiet_family = false;
template <> inline constexpr bool sbc_quiet_family<sb_gemm_kernels> = true;
static_assert(sbc_entries<sb_gemm_kernels> == 1,
              "the gemm family is quiet as a whole for gemm_batched alone: say whether a new "
              "entry may write device memory (runtime/cuda/writes.hpp)");

/* Tag: one wrapped backend per tag type (its entries read the wrapped
 * backend's functions from copies kept here). The hook gets the pointers
 * an entry may write through (NULLs left out) and `all` = 1 when it may
 * write anything (a kind-2 parameter, or no pointer named at all). */
template <typename Tag> struct sbc_writes {
    static inline sb_backend inner;
    static inline void (*hook)(void *const *outs, int n, int all);

    template <typename T> static void collect(T x, void **outs, int *n, int *all)
    {
        constexpr int k = sbc_out_kind<T>();
        if constexpr (k == 1) {
            if (x)
                outs[(*n)++] = (void *)x;
        } else if constexpr (k == 2) {
            *all = 1;
        }
        (void)x, (void)outs, (void)n, (void)all;
    }

    /* f(a...), then the hook with what it may have written */
    template <typename R, typename... A> static R run(R (*f)(A...), A... a)
    {
        void *outs[sizeof...(A) + 1] = {};
        int n = 0, all = !((sbc_out_kind<A>() != 0) || ... || false);
        (collect<A>(a, outs, &n, &all), ...);
        if constexpr (std::is_void_v<R>) {
            f(a...);
            hook(outs, n, all);
        } else {
            R r = f(a...);
            hook(outs, n, all);
            return r;
        }
    }

    /* a core entry, by member */
    template <auto M, typename F> struct entry;
    template <auto M, typename R, typename... A> struct entry<M, R (*)(A...)> {
        static R call(A... a) { return run<R, A...>(inner.*M, a...); }
    };
    template <auto M> static void wrap(sb_backend *out)
    {
        using F = std::remove_reference_t<decltype(inner.*M)>;
        if (inner.*M) /* an entry the backend leaves out stays out */
            out->*M = &entry<M, F>::call;
    }

    /* a kernel family's table F, every entry by its place */
    template <typename F> struct family {
        static inline F in, out;
        template <std::size_t I, typename E> struct entry;
        template <std::size_t I, typename R, typename... A> struct entry<I, R (*)(A...)> {
            static R call(A... a) { return run<R, A...>(std::get<I>(sbc_members(in)), a...); }
        };
        template <std::size_t I> static void wrap_one()
        {
            auto &slot = std::get<I>(sbc_members(out));
            using E = std::remove_reference_t<decltype(slot)>;
            static_assert(sbc_takes_out_ptr<E>::value || sbc_takes_out_ptr<E>::returns,
                          "a kernel that takes no pointer it may write through must be a size "
                          "query (return a value)");
            if constexpr (sbc_takes_out_ptr<E>::value)
                if (slot)
                    slot = &entry<I, E>::call;
        }
        template <std::size_t... I> static void wrap_all(std::index_sequence<I...>)
        {
            (wrap_one<I>(), ...);
        }
        /* the wrapped copy of t; NULL (a family left out) stays NULL */
        static const F *table(const F *t)
        {
            static_assert(sizeof(F) % sizeof(void (*)(void)) == 0, "a family holds functions");
            if (!t)
                return nullptr;
            in = *t;
            out = *t;
            if constexpr (!sbc_quiet_family<F>)
                wrap_all(std::make_index_sequence<sbc_entries<F>>{});
            return &out;
        }
    };

    /* *out = *in with every writing entry calling h after it: only GEMMs
     * read kept conversions, and no entry runs one. */
    static void table(const sb_backend *in, sb_backend *out,
                      void (*h)(void *const *outs, int n, int all))
    {
        inner = *in;
        hook = h;
        *out = *in;
#define SBC_WRAP_ONE(m) wrap<&sb_backend::m>(out);
#define SBC_NAMED(m) (void)&sb_backend::m; /* a quiet entry's name is a member's */
#define SBC_WRAP_FAMILY(E, m, T) out->m = family<T>::table(in->m);
        SBC_WRITING_CORE(SBC_WRAP_ONE)
        SBC_QUIET_CORE(SBC_NAMED)
        SB_KERNEL_FAMILIES(SBC_WRAP_FAMILY)
#undef SBC_WRAP_FAMILY
#undef SBC_NAMED
#undef SBC_WRAP_ONE
    }
};

/* A quiet core entry with a parameter it may write through writes host
 * memory (to_host, marks_read) or drops the kept conversions itself
 * (release: those in the block it frees). */
constexpr bool sbc_same(const char *a, const char *b)
{
    return *a == *b && (*a == 0 || sbc_same(a + 1, b + 1));
}
#define SBC_QUIET_OK(m)                                                                  \
    static_assert(!sbc_takes_out_ptr<decltype(sb_backend::m)>::value ||                 \
                      sbc_same(#m, "to_host") || sbc_same(#m, "marks_read") ||           \
                      sbc_same(#m, "release"),                                           \
                  "sb_backend::" #m " takes a pointer it may write through: list it in " \
                  "SBC_WRITING_CORE");
SBC_QUIET_CORE(SBC_QUIET_OK)
#undef SBC_QUIET_OK

/* the core (alloc up to the first family) is in the lists, the rest is
 * SB_KERNEL_FAMILIES' tables */
#define SBC_COUNT_ONE(m) +1
static_assert(offsetof(sb_backend, gemm) - offsetof(sb_backend, alloc) ==
                  (0 SBC_QUIET_CORE(SBC_COUNT_ONE) SBC_WRITING_CORE(SBC_COUNT_ONE)) *
                      sizeof(void (*)(void)),
              "an sb_backend core entry is in neither list of runtime/cuda/writes.hpp: say "
              "whether it may write device memory");
static_assert(sizeof(sb_backend) - offsetof(sb_backend, gemm) == SB_FAMILY_COUNT * sizeof(void *),
              "sb_backend's members after the core are SB_KERNEL_FAMILIES' tables");
#undef SBC_COUNT_ONE

#endif
