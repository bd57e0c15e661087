// The CUDA emulation's runtime (emu.h): errors, devices, the work queue that streams and events
// share, and launches. Work runs lazily: nothing queued runs until the host waits for it, and then
// only what the awaited operation depends on (its stream's earlier work, the events its stream
// waits for, the legacy default stream's implicit synchronisation with blocking streams).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cuda_emu/emu.h"

struct ah_emu_stream {
    uint64_t last = 0; // the sequence number of its last queued operation (0: none)
    unsigned flags = 0;
};
struct ah_emu_event {
    uint64_t seq = 0; // the record operation's sequence number (0: never recorded)
    bool done = false, timing = true;
    double ms = 0.0;
};

namespace ah_emu {
namespace {

struct op {
    std::vector<uint64_t> deps; // operations that must run before it (smaller sequence numbers)
    std::function<cudaError_t()> work;
};

std::recursive_mutex lock;
std::map<uint64_t, op> queue; // queued, not yet run, by sequence number
uint64_t next_seq = 1;
ah_emu_stream legacy;
std::set<ah_emu_stream *> blocking_streams; // created without cudaStreamNonBlocking, alive
cudaError_t sticky_error = cudaSuccess;
thread_local cudaError_t last_error = cudaSuccess;
int current_device = 0;

int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}
int device_count() { return env_int("AH_CUDA_EMU_DEVICES", 8); }

ah_emu_stream *stream_of(cudaStream_t s) { return s ? s : &legacy; }

void run_op(op &o) {
    if (sticky_error != cudaSuccess) return; // a failed context runs nothing more
    cudaError_t e = cudaSuccess;
    with_device_access([&] { e = o.work(); });
    if (e != cudaSuccess) sticky_error = e;
}

// Runs operation `seq` (if still queued) and every queued operation it depends on, transitively,
// in sequence order; work it does not depend on stays queued.
cudaError_t drain_to(uint64_t seq) {
    std::set<uint64_t> need{seq};
    for (auto it = queue.upper_bound(seq); it != queue.begin();) { // newest first: deps are older
        --it;
        if (need.count(it->first))
            for (uint64_t d : it->second.deps) need.insert(d);
    }
    for (uint64_t n : need) { // ascending: every dependency before its dependant
        auto it = queue.find(n);
        if (it == queue.end()) continue; // already run
        op o = std::move(it->second);
        queue.erase(it);
        run_op(o);
    }
    return sticky_error;
}

cudaError_t drain_all() {
    while (!queue.empty()) {
        op o = std::move(queue.begin()->second);
        queue.erase(queue.begin());
        run_op(o);
    }
    return sticky_error;
}

double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// AH_CUDA_EMU_PROFILE=1: launches, emulated threads and milliseconds per kernel, on stderr at exit.
struct kernel_stats {
    long long launches = 0, threads = 0;
    double ms = 0.0;
};
std::map<std::string, kernel_stats> *profile;

void print_profile() {
    fprintf(stderr, "cuda emulation profile (pid %d): kernel, launches, threads, ms\n", (int)getpid());
    for (const auto &kv : *profile)
        fprintf(stderr, "  %-28s %8lld %12lld %10.1f\n", kv.first.c_str(), kv.second.launches,
                kv.second.threads, kv.second.ms);
}

bool run_timed(const launch_config &cfg, const std::function<void()> &body) {
    if (!profile) return run_grid(cfg, body);
    const double t = now_ms();
    const bool ok = run_grid(cfg, body);
    kernel_stats &k = (*profile)[cfg.kernel];
    k.launches++;
    k.threads += (long long)cfg.grid.x * cfg.grid.y * cfg.grid.z * cfg.block.x * cfg.block.y * cfg.block.z;
    k.ms += now_ms() - t;
    return ok;
}

} // namespace

api_lock::api_lock() { lock.lock(); }
api_lock::~api_lock() { lock.unlock(); }

cudaError_t sticky() { return sticky_error; }
cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}

// An operation's implicit dependencies: its stream's last one; on the legacy stream, the last of
// every blocking stream; on a blocking stream, the legacy stream's last (CUDA's legacy default
// stream semantics). A non-blocking stream orders only against events it waits for.
static std::vector<uint64_t> implicit_deps(ah_emu_stream *s) {
    std::vector<uint64_t> deps;
    if (s->last) deps.push_back(s->last);
    if (s == &legacy) {
        for (ah_emu_stream *b : blocking_streams)
            if (b->last) deps.push_back(b->last);
    } else if (!(s->flags & cudaStreamNonBlocking) && legacy.last) {
        deps.push_back(legacy.last);
    }
    return deps;
}

static void enqueue_after(cudaStream_t stream, std::vector<uint64_t> extra, std::function<cudaError_t()> work) {
    ah_emu_stream *s = stream_of(stream);
    std::vector<uint64_t> deps = implicit_deps(s);
    deps.insert(deps.end(), extra.begin(), extra.end());
    const uint64_t seq = next_seq++;
    s->last = seq;
    queue.emplace(seq, op{std::move(deps), std::move(work)});
}

void enqueue(cudaStream_t stream, std::function<cudaError_t()> work) { enqueue_after(stream, {}, std::move(work)); }

cudaError_t drain(cudaStream_t stream, bool all) {
    return all ? drain_all() : drain_to(stream_of(stream)->last);
}

void launch(const launch_config &cfg, std::function<void()> body) {
    api_lock l;
    const dim3 g = cfg.grid, b = cfg.block;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (sticky_error != cudaSuccess) {
        set_error(sticky_error);
        return;
    }
    if (!b.x || !b.y || !b.z || !g.x || !g.y || !g.z || b.x > 1024 || b.y > 1024 || b.z > 64 ||
        threads > 1024 || g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        set_error(cudaErrorInvalidConfiguration);
        return;
    }
    if (cfg.shared_bytes > 48 * 1024) {
        set_error(cudaErrorInvalidValue);
        return;
    }
    if (!profile && getenv("AH_CUDA_EMU_PROFILE") && *getenv("AH_CUDA_EMU_PROFILE") == '1') {
        profile = new std::map<std::string, kernel_stats>;
        atexit(print_profile);
    }
    enqueue(cfg.stream, [cfg, body]() { return run_timed(cfg, body) ? cudaSuccess : cudaErrorLaunchFailure; });
}

} // namespace ah_emu

using namespace ah_emu;

extern "C" {

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
#define NAME(x) \
    case x: return #x;
        NAME(cudaSuccess) NAME(cudaErrorInvalidValue) NAME(cudaErrorMemoryAllocation)
        NAME(cudaErrorInitializationError) NAME(cudaErrorInvalidConfiguration)
        NAME(cudaErrorInvalidDevicePointer) NAME(cudaErrorInvalidMemcpyDirection)
        NAME(cudaErrorNoDevice) NAME(cudaErrorInvalidDevice) NAME(cudaErrorInvalidResourceHandle)
        NAME(cudaErrorNotReady) NAME(cudaErrorIllegalAddress) NAME(cudaErrorLaunchOutOfResources)
        NAME(cudaErrorLaunchFailure) NAME(cudaErrorUnknown)
#undef NAME
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error";
    }
}

cudaError_t cudaGetLastError(void) {
    api_lock l;
    if (sticky_error != cudaSuccess) return sticky_error;
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    api_lock l;
    return sticky_error != cudaSuccess ? sticky_error : last_error;
}

cudaError_t cudaGetDeviceCount(int *n) {
    *n = device_count();
    return *n > 0 ? cudaSuccess : set_error(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
    api_lock l;
    if (device < 0 || device >= device_count()) return set_error(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    api_lock l;
    if (device_count() <= 0) return set_error(cudaErrorNoDevice);
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device) {
    if (device < 0 || device >= device_count()) return set_error(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "CUDA emulation on the CPU (device %d)", device);
    size_t free_b = 0;
    cudaMemGetInfo(&free_b, &p->totalGlobalMem);
    p->sharedMemPerBlock = 48 * 1024;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    api_lock l;
    return drain(nullptr, true);
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    api_lock l;
    *s = new ah_emu_stream;
    (*s)->flags = flags;
    if (!(flags & cudaStreamNonBlocking)) blocking_streams.insert(*s);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    api_lock l;
    if (!s) return set_error(cudaErrorInvalidResourceHandle);
    drain(s, false); // its queued work still runs, as CUDA lets it finish
    blocking_streams.erase(s);
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    api_lock l;
    return drain(s, false);
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
    api_lock l;
    return drain(s, false); // finds it done, having run it
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)flags;
    api_lock l;
    if (!e) return set_error(cudaErrorInvalidResourceHandle);
    // A no-op on s after e's record as it stands now (a later record does not move it), so that
    // s's later work, and a wait for s, run the recorded work first. Never recorded: no wait.
    enqueue_after(s, e->seq ? std::vector<uint64_t>{e->seq} : std::vector<uint64_t>{}, []() { return cudaSuccess; });
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    api_lock l;
    *e = new ah_emu_event;
    (*e)->timing = !(flags & cudaEventDisableTiming);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    api_lock l;
    if (!e) return set_error(cudaErrorInvalidResourceHandle);
    drain_to(e->seq); // a queued record must not touch freed memory
    delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    api_lock l;
    if (!e) return set_error(cudaErrorInvalidResourceHandle);
    e->done = false;
    enqueue(s, [e]() {
        e->done = true;
        e->ms = now_ms();
        return cudaSuccess;
    });
    e->seq = stream_of(s)->last;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    api_lock l;
    if (!e) return set_error(cudaErrorInvalidResourceHandle);
    return drain_to(e->seq);
}

cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    api_lock l;
    if (!start || !end || !start->timing || !end->timing) return set_error(cudaErrorInvalidResourceHandle);
    if (!start->done || !end->done) return set_error(cudaErrorNotReady);
    *ms = (float)(end->ms - start->ms);
    return cudaSuccess;
}

} // extern "C"
