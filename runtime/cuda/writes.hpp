/* runtime/cuda/writes.hpp: which entries of an sb_backend table (runtime.h)
 * may write device memory, and a copy of a table with each of those
 * wrapped to call a hook after it (C++17; the cuda backend and
 * tests/mpi/test_bf16_keep.cc).
 *
 * The cuda backend in bf16 keeps the bf16 conversions of GEMM operands
 * that are no weight's for later GEMMs (sbc_act_cache in cuda_host.h); its
 * hook drops those whose source lies in memory an entry may write, so a
 * kept conversion is never read after its fp32 source changed. The
 * wrapper finds that memory from the entry's parameter types
 * (sbc_out_kind): the blocks its non-const pointers to numbers point into,
 * or everything for a pointer to pointers it may write through, a pointer
 * to another type, or an entry that names no pointer. That is only safe if
 * every entry that may write is wrapped, so the two lists below name every
 * function member of sb_backend: a member added to runtime.h and to
 * neither list fails the static_assert at the end until it is classified.
 *
 * The quiet ones write no device memory: the allocator, the copy to the
 * host, sync, the timing marks, weight_set (host bookkeeping), the
 * communicator bookkeeping, the size queries; the GEMM, which drops the
 * conversions of what its output overlaps itself, and release, which
 * drops those in the block it frees. A quiet entry that takes a pointer
 * it may write through, other than to_host, marks_read, the GEMM and
 * release, fails a static_assert too. tests/mpi/test_bf16_keep.cc runs the executor's real
 * sequences of calls through a CPU table wrapped the same way. */
#ifndef SHARDBENCH_CUDA_WRITES_HPP
#define SHARDBENCH_CUDA_WRITES_HPP

#include <cstddef>
#include <type_traits>

#include "shardbench/runtime.h"

#define SBC_QUIET_ENTRIES(X)                                                             \
    X(alloc) X(release) X(to_host) X(sync) X(mark) X(marks_read) X(weight_set)           \
    X(comm_release) X(comm_split) X(gemm_batched) X(conv2d_work_floats)                  \
    X(moe_gate_work_floats)

#define SBC_WRITING_ENTRIES(X)                                                           \
    X(zero) X(from_host) X(finalize) X(allreduce) X(alltoallv) X(reduce_scatter)         \
    X(allgather) X(conv2d_forward) X(conv2d_backward_data) X(conv2d_backward_filter)     \
    X(maxpool2d_forward) X(maxpool2d_backward) X(avgpool2d_forward)                      \
    X(avgpool2d_backward) X(embedding_forward) X(embedding_backward)                     \
    X(lstm_pointwise_forward) X(lstm_pointwise_backward) X(norm_finish_stats)            \
    X(norm_mean) X(norm_rstd) X(layernorm_centered) X(batchnorm_centered)                \
    X(layernorm_stats) X(layernorm_apply) X(layernorm_backward_stats)                    \
    X(layernorm_backward_apply) X(rmsnorm_stats) X(rmsnorm_apply)                        \
    X(rmsnorm_backward_stats) X(rmsnorm_backward_apply) X(batchnorm_stats)               \
    X(batchnorm_apply) X(batchnorm_backward_stats) X(batchnorm_backward_apply)           \
    X(softmax_partial_max) X(softmax_partial_sumexp) X(softmax_apply)                    \
    X(softmax_backward_dot) X(softmax_backward_apply) X(causal_mask) X(rope_forward)     \
    X(rope_backward) X(xent_partial_picked) X(xent_loss) X(softmax_xent_backward)        \
    X(moe_gate_forward) X(moe_gate_backward) X(add_forward) X(add_backward)              \
    X(reduce_mean_forward) X(reduce_mean_backward) X(act_forward) X(act_backward)        \
    X(mul_forward) X(mul_backward) X(expand_forward) X(expand_backward) X(box_copy)      \
    X(permute) X(sgd_update) X(adam_update)

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

/* Tag: one wrapped table per tag type (its entries read the wrapped
 * table's functions from a copy kept here). The hook gets the pointers an
 * entry may write through (NULLs left out) and `all` = 1 when it may
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

    template <auto M, typename F> struct entry;
    template <auto M, typename R, typename... A> struct entry<M, R (*)(A...)> {
        static R call(A... a)
        {
            void *outs[sizeof...(A) + 1] = {};
            int n = 0, all = !((sbc_out_kind<A>() != 0) || ... || false);
            (collect<A>(a, outs, &n, &all), ...);
            if constexpr (std::is_void_v<R>) {
                (inner.*M)(a...);
                hook(outs, n, all);
            } else {
                R r = (inner.*M)(a...);
                hook(outs, n, all);
                return r;
            }
        }
    };

    template <auto M> static void wrap(sb_backend *out)
    {
        using F = std::remove_reference_t<decltype(inner.*M)>;
        if (inner.*M) /* an entry the table leaves out stays out */
            out->*M = &entry<M, F>::call;
    }

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
        SBC_WRITING_ENTRIES(SBC_WRAP_ONE)
        SBC_QUIET_ENTRIES(SBC_NAMED)
#undef SBC_NAMED
#undef SBC_WRAP_ONE
    }
};

/* An entry with a parameter it may write through is quiet only where that
 * memory is the host's (to_host, marks_read) or the entry drops the kept
 * conversions itself (the GEMM: what its output overlaps; release: those
 * in the block it frees). */
template <typename F> struct sbc_takes_out_ptr;
template <typename R, typename... A> struct sbc_takes_out_ptr<R (*)(A...)> {
    static constexpr bool value = ((sbc_out_kind<A>() != 0) || ... || false);
};
constexpr bool sbc_same(const char *a, const char *b)
{
    return *a == *b && (*a == 0 || sbc_same(a + 1, b + 1));
}
#define SBC_QUIET_OK(m)                                                                  \
    static_assert(!sbc_takes_out_ptr<decltype(sb_backend::m)>::value ||                 \
                      sbc_same(#m, "to_host") || sbc_same(#m, "marks_read") ||           \
                      sbc_same(#m, "gemm_batched") || sbc_same(#m, "release"),           \
                  "sb_backend::" #m " takes a pointer it may write through: list it in " \
                  "SBC_WRITING_ENTRIES");
SBC_QUIET_ENTRIES(SBC_QUIET_OK)
#undef SBC_QUIET_OK

#define SBC_COUNT_ONE(m) +1
static_assert((sizeof(sb_backend) - offsetof(sb_backend, alloc)) / sizeof(void (*)(void)) ==
                  0 SBC_QUIET_ENTRIES(SBC_COUNT_ONE) SBC_WRITING_ENTRIES(SBC_COUNT_ONE),
              "an sb_backend entry is in neither list of runtime/cuda/writes.hpp: say whether it "
              "may write device memory");
#undef SBC_COUNT_ONE

#endif
