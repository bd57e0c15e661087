// The CUDA emulation's memory (emu.h): device allocations as guarded mappings that only device
// work may touch, pinned host memory, and the copies and fills between them.
//
// Every device allocation is one mapping: its bytes end at most 255 bytes before an inaccessible
// guard page, and the whole mapping is inaccessible while host code runs; with_device_access()
// opens every allocation for the duration of device work. Where the CPU has memory protection
// keys (pkeys: Intel since Skylake-SP, AMD since Zen 3) every allocation carries one key and
// opening or closing them all is one register write; elsewhere (or with AH_CUDA_EMU_NO_PKEYS=1)
// each allocation's pages are re-protected (mprotect), slower, same behaviour. A SIGSEGV on an
// allocation's pages prints who touched what (host code, or the kernel, block and thread) and
// aborts.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "cuda_emu/emu.h"

namespace ah_emu {
namespace {

const size_t PAGE = 4096;
struct allocation {
    char *map;       // the mapping: data pages, then one guard page
    size_t map_len;  // including the guard page
    size_t bytes;    // what was asked for
};
std::map<uintptr_t, allocation> device; // by the pointer handed out
std::map<uintptr_t, size_t> pinned;      // by the pointer handed out
size_t device_used = 0;
int open_depth = 0;
int pkey = -2; // the protection key of device memory; -1: none (mprotect); -2: not chosen yet

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t device_total() {
    const char *v = getenv("AH_CUDA_EMU_MEMORY_MIB");
    return (size_t)(v && *v ? atoll(v) : 16384) << 20;
}

void choose_pkey() {
    if (pkey != -2) return;
    const char *no = getenv("AH_CUDA_EMU_NO_PKEYS");
    pkey = no && *no == '1' ? -1 : pkey_alloc(0, PKEY_DISABLE_ACCESS);
    if (pkey < 0) pkey = -1;
}

void protect_all(bool open) {
    if (pkey >= 0) {
        pkey_set(pkey, open ? 0 : PKEY_DISABLE_ACCESS);
        return;
    }
    for (auto &kv : device) mprotect(kv.second.map, kv.second.map_len - PAGE, open ? PROT_READ | PROT_WRITE : PROT_NONE);
}

// The allocation holding address a (its mapping, guard page included), or NULL.
const std::pair<const uintptr_t, allocation> *owner(uintptr_t a) {
    for (auto &kv : device)
        if (a >= (uintptr_t)kv.second.map && a < (uintptr_t)kv.second.map + kv.second.map_len) return &kv;
    return nullptr;
}

void on_segv(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    const uintptr_t a = (uintptr_t)si->si_addr;
    const auto *o = owner(a);
    if (!o) { // not ours: the default action
        signal(sig, SIG_DFL);
        return;
    }
    char who[256], msg[768];
    describe_current(who, sizeof who);
    const allocation &al = o->second;
    const long long off = (long long)(a - o->first);
    if (a >= (uintptr_t)al.map + al.map_len - PAGE)
        snprintf(msg, sizeof msg, "cuda emulation: %s touched byte %lld of the device allocation of %zu bytes at %p: past its end\n",
                 who, off, al.bytes, (void *)o->first);
    else if (!open_depth)
        snprintf(msg, sizeof msg, "cuda emulation: %s touched device memory at %p (byte %lld of the allocation of %zu bytes at %p): "
                 "the host reaches device memory only through cudaMemcpy, after the work that writes it has been waited for\n",
                 who, (void *)a, off, al.bytes, (void *)o->first);
    else if (off < 0)
        snprintf(msg, sizeof msg, "cuda emulation: %s touched byte %lld of the device allocation of %zu bytes at %p: before its start\n",
                 who, off, al.bytes, (void *)o->first);
    else
        snprintf(msg, sizeof msg, "cuda emulation: a thread other than the one running device work touched byte %lld of the device "
                 "allocation of %zu bytes at %p (device memory is open only to the thread that waits for it)\n",
                 off, al.bytes, (void *)o->first);
    if (write(2, msg, strlen(msg)) < 0) {}
    abort();
}

void install_handler() {
    static bool done = false;
    if (done) return;
    done = true;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
}

bool is_pinned(const void *p, size_t bytes) {
    auto it = pinned.upper_bound((uintptr_t)p);
    if (it == pinned.begin()) return false;
    --it;
    return (uintptr_t)p + bytes <= it->first + it->second;
}

// Whether a copy of `kind` between dst and src is one the runtime accepts; says why not.
bool copy_ok(void *dst, const void *src, size_t bytes, cudaMemcpyKind *kind) {
    const bool dd = is_device(dst, bytes), sd = is_device(src, bytes);
    if (*kind == cudaMemcpyDefault)
        *kind = dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                   : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    const bool want_dd = *kind == cudaMemcpyHostToDevice || *kind == cudaMemcpyDeviceToDevice;
    const bool want_sd = *kind == cudaMemcpyDeviceToHost || *kind == cudaMemcpyDeviceToDevice;
    if (dd == want_dd && sd == want_sd) return true;
    fprintf(stderr, "cuda emulation: cudaMemcpy of %zu bytes, kind %d: the destination %p is %s and the source %p is %s "
            "(a device range must lie inside one cudaMalloc allocation)\n", bytes, (int)*kind, dst,
            dd ? "device memory" : "not device memory", src, sd ? "device memory" : "not device memory");
    return false;
}

} // namespace

void with_device_access(const std::function<void()> &work) {
    if (open_depth++ == 0) protect_all(true);
    work();
    if (--open_depth == 0) protect_all(false);
}

bool is_device(const void *p, size_t bytes) {
    auto it = device.upper_bound((uintptr_t)p);
    if (it == device.begin()) return false;
    --it;
    return (uintptr_t)p + bytes <= it->first + it->second.bytes;
}

} // namespace ah_emu

using namespace ah_emu;

extern "C" {

cudaError_t cudaMalloc(void **p, size_t bytes) {
    api_lock l;
    *p = nullptr;
    if (sticky() != cudaSuccess) return sticky();
    const size_t n = bytes ? bytes : 1, data = round_up(round_up(n, 256), PAGE);
    if (device_used + n > device_total()) return set_error(cudaErrorMemoryAllocation);
    void *m = mmap(nullptr, data + PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return set_error(cudaErrorMemoryAllocation);
    install_handler();
    choose_pkey();
    char *ptr = (char *)m + data - round_up(n, 256);
    device[(uintptr_t)ptr] = allocation{(char *)m, data + PAGE, n};
    if (pkey >= 0) pkey_mprotect(m, data, PROT_READ | PROT_WRITE, pkey);
    else if (open_depth) mprotect(m, data, PROT_READ | PROT_WRITE);
    device_used += n;
    *p = ptr;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    api_lock l;
    if (!p) return cudaSuccess;
    drain(nullptr, true); // cudaFree waits for the device, as CUDA's does
    auto it = device.find((uintptr_t)p);
    if (it == device.end()) {
        fprintf(stderr, "cuda emulation: cudaFree(%p): not a pointer cudaMalloc returned\n", p);
        return set_error(cudaErrorInvalidValue);
    }
    munmap(it->second.map, it->second.map_len);
    device_used -= it->second.bytes;
    device.erase(it);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) {
    api_lock l;
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return set_error(cudaErrorMemoryAllocation);
    pinned[(uintptr_t)*p] = bytes;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags) {
    (void)flags;
    return cudaMallocHost(p, bytes);
}

cudaError_t cudaFreeHost(void *p) {
    api_lock l;
    if (!p) return cudaSuccess;
    drain(nullptr, true);
    auto it = pinned.find((uintptr_t)p);
    if (it == pinned.end()) {
        fprintf(stderr, "cuda emulation: cudaFreeHost(%p): not a pointer cudaMallocHost returned\n", p);
        return set_error(cudaErrorInvalidValue);
    }
    pinned.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    api_lock l;
    *total_bytes = device_total();
    *free_bytes = *total_bytes - device_used;
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    api_lock l;
    if (!bytes) return cudaSuccess;
    if (!copy_ok(dst, src, bytes, &kind)) return set_error(cudaErrorInvalidValue);
    // On the legacy stream: after its earlier work and the blocking streams' (not after a
    // non-blocking stream's, which an event must order).
    enqueue(nullptr, []() { return cudaSuccess; });
    const cudaError_t e = drain(nullptr, false);
    if (e != cudaSuccess) return e;
    with_device_access([&] { memmove(dst, src, bytes); });
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
    api_lock l;
    if (!bytes) return cudaSuccess;
    if (!copy_ok(dst, src, bytes, &kind)) return set_error(cudaErrorInvalidValue);
    if (sticky() != cudaSuccess) return sticky();
    if (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, bytes)) {
        // To pageable memory CUDA returns only once the copy is done.
        const cudaError_t e = drain(stream, false);
        if (e == cudaSuccess) with_device_access([&] { memmove(dst, src, bytes); });
        return e;
    }
    if (kind == cudaMemcpyHostToDevice && !is_pinned(src, bytes)) {
        // From pageable memory CUDA stages the source before returning.
        std::vector<char> staged((const char *)src, (const char *)src + bytes);
        enqueue(stream, [dst, staged]() {
            memcpy(dst, staged.data(), staged.size());
            return cudaSuccess;
        });
        return cudaSuccess;
    }
    enqueue(stream, [dst, src, bytes]() {
        memmove(dst, src, bytes);
        return cudaSuccess;
    });
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream) {
    api_lock l;
    if (!bytes) return cudaSuccess;
    if (!is_device(p, bytes)) {
        fprintf(stderr, "cuda emulation: cudaMemset of %zu bytes at %p: not inside one device allocation\n", bytes, p);
        return set_error(cudaErrorInvalidValue);
    }
    if (sticky() != cudaSuccess) return sticky();
    enqueue(stream, [p, value, bytes]() {
        memset(p, value, bytes);
        return cudaSuccess;
    });
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t bytes) { return cudaMemsetAsync(p, value, bytes, nullptr); }

cudaError_t cudaDeviceReset(void) {
    api_lock l;
    drain(nullptr, true);
    for (auto &kv : device) munmap(kv.second.map, kv.second.map_len);
    device.clear();
    device_used = 0;
    return cudaSuccess;
}

} // extern "C"
