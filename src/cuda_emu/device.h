// The device side of the CUDA emulation, for the .cu sources compiled as C++ (-DAH_CUDA_EMU=ON):
// CUDA's keywords, the built-in indices, the launch (AH_LAUNCH), barriers, warp shuffles and
// votes, atomics and the device math the kernels use. What each models: src/cuda_emu/emu.h.
#ifndef AH_CUDA_EMU_DEVICE_H
#define AH_CUDA_EMU_DEVICE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <tuple>
#include <utility>

#include "cuda_emu/half.h"

// A kernel is an ordinary function; __shared__ variables are function statics, which is one copy
// per block because the blocks of a launch run one after another (emu.h).
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict
#define __launch_bounds__(...)

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
    dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

namespace ah_emu {

// The running thread's coordinates (valid inside a kernel only; elsewhere a fault).
uint3 thread_idx();
uint3 block_idx();
dim3 block_dim();
dim3 grid_dim();
// __syncthreads: every thread of the block that has not exited arrives before any leaves.
void syncthreads();
// The launch's dynamic shared memory (its third launch parameter, in bytes).
void *dynamic_shared();
// Warp exchange: the calling lane publishes `mine`, waits for every lane of `mask` (which must
// name the caller, be the same on every lane, and name only live lanes), and gets the 32 lanes'
// values (valid for the lanes of the mask; the array stays valid until the caller's next
// exchange). `what` names the intrinsic in errors.
const uint64_t *warp_exchange(unsigned mask, uint64_t mine, const char *what);
unsigned lane_id();
// A fault inside a kernel: the launch fails (cudaErrorLaunchFailure at the next sync), the
// message names the kernel, block and thread. Does not return.
[[noreturn]] void device_fault(const char *what);

// ---- launches ----
struct launch_config {
    dim3 grid, block;
    size_t shared_bytes;
    struct ah_emu_stream *stream;
    const char *kernel;
};
// Checks the configuration (errors as CUDA reports them, through cudaGetLastError) and queues
// the grid on the stream; `body` runs once per thread, with the indices above set.
void launch(const launch_config &cfg, std::function<void()> body);

template <class... P> struct launcher {
    void (*kernel)(P...);
    launch_config cfg;
    template <class... A> void operator()(A &&...args) const {
        static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong argument count");
        // Arguments are converted to the parameters' types and copied, as a launch does.
        std::tuple<typename std::decay<P>::type...> copy(static_cast<P>(std::forward<A>(args))...);
        void (*k)(P...) = kernel;
        launch(cfg, [k, copy]() { std::apply(k, copy); });
    }
};
template <class... P>
launcher<P...> make_launcher(void (*k)(P...), dim3 grid, dim3 block, size_t shared,
                             struct ah_emu_stream *stream, const char *name) {
    return launcher<P...>{k, launch_config{grid, block, shared, stream, name}};
}

template <class T> static inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8, "a warp intrinsic takes at most 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}
template <class T> static inline T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}
// Lane `src` of the exchange; a lane outside the mask is an error (CUDA leaves it undefined).
template <class T> static inline T pick(unsigned mask, const uint64_t *all, int src, const char *what) {
    if (!(mask >> src & 1u)) device_fault(what);
    return from_bits<T>(all[src]);
}

} // namespace ah_emu

// The runtime's C++ overloads for typed pointers, as cuda_runtime.h has them.
template <class T> static inline cudaError_t cudaMalloc(T **p, size_t bytes) { return cudaMalloc((void **)p, bytes); }
template <class T> static inline cudaError_t cudaMallocHost(T **p, size_t bytes) {
    return cudaMallocHost((void **)p, bytes);
}

#define AH_LAUNCH(kernel, grid, block, shared, stream) \
    ::ah_emu::make_launcher(kernel, grid, block, shared, stream, #kernel)
#define AH_DYNAMIC_SHARED(type, name) type *name = (type *)::ah_emu::dynamic_shared()

#define threadIdx (::ah_emu::thread_idx())
#define blockIdx (::ah_emu::block_idx())
#define blockDim (::ah_emu::block_dim())
#define gridDim (::ah_emu::grid_dim())
static constexpr int warpSize = 32;

static inline void __syncthreads() { ah_emu::syncthreads(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    ah_emu::warp_exchange(mask, 0, "__syncwarp");
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __trap() { ah_emu::device_fault("__trap() called"); }

// ---- warp shuffles and votes (width: a power of two <= 32 splitting the warp in segments) ----
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    const uint64_t *all = ah_emu::warp_exchange(mask, ah_emu::to_bits(v), "__shfl_sync");
    const int lane = (int)ah_emu::lane_id(), base = lane & ~(width - 1);
    return ah_emu::pick<T>(mask, all, base + (src & (width - 1)), "__shfl_sync: source lane not in the mask");
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    const uint64_t *all = ah_emu::warp_exchange(mask, ah_emu::to_bits(v), "__shfl_xor_sync");
    const int lane = (int)ah_emu::lane_id(), src = lane ^ lane_mask;
    if ((src & ~(width - 1)) != (lane & ~(width - 1))) return v; // outside the segment: own value
    return ah_emu::pick<T>(mask, all, src, "__shfl_xor_sync: source lane not in the mask");
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const uint64_t *all = ah_emu::warp_exchange(mask, ah_emu::to_bits(v), "__shfl_down_sync");
    const int lane = (int)ah_emu::lane_id(), src = lane + (int)delta;
    if ((src & ~(width - 1)) != (lane & ~(width - 1))) return v;
    return ah_emu::pick<T>(mask, all, src, "__shfl_down_sync: source lane not in the mask");
}
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const uint64_t *all = ah_emu::warp_exchange(mask, ah_emu::to_bits(v), "__shfl_up_sync");
    const int lane = (int)ah_emu::lane_id(), src = lane - (int)delta;
    if (src < (lane & ~(width - 1))) return v;
    return ah_emu::pick<T>(mask, all, src, "__shfl_up_sync: source lane not in the mask");
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    const uint64_t *all = ah_emu::warp_exchange(mask, pred != 0, "__ballot_sync");
    unsigned b = 0;
    for (int l = 0; l < 32; l++) b |= (unsigned)((mask >> l & 1u) && all[l]) << l;
    return b;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }
static inline unsigned __activemask() { return 0xffffffffu; }

// ---- atomics (sequentially consistent, as seen by ThreadSanitizer) ----
template <class T> static inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
namespace ah_emu {
// A floating-point add as a compare-and-swap loop (the __atomic builtins add integers only).
template <class T> static inline T atomic_add_float(T *p, T v) {
    T old;
    __atomic_load(p, &old, __ATOMIC_SEQ_CST);
    for (;;) {
        T want = old + v;
        if (__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return old;
    }
}
} // namespace ah_emu
static inline float atomicAdd(float *p, float v) { return ah_emu::atomic_add_float(p, v); }
static inline double atomicAdd(double *p, double v) { return ah_emu::atomic_add_float(p, v); }
template <class T> static inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
template <class T> static inline T atomicMax(T *p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
}
template <class T> static inline T atomicMin(T *p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
}
template <class T> static inline T atomicCAS(T *p, T expected, T v) {
    __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}

// ---- device math: IEEE single precision, no contraction (the build passes -ffp-contract=off) ----
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline size_t min(size_t a, size_t b) { return a < b ? a : b; }
static inline size_t max(size_t a, size_t b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float rsqrtf(float a) { return 1.0f / sqrtf(a); }
template <class T> static inline T __ldg(const T *p) { return *p; }

#endif
