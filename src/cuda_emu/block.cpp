// The CUDA emulation's block scheduler (emu.h): the threads of a block as fibers on the calling
// OS thread, __syncthreads and the warp exchanges as the points where a fiber yields, and the
// ThreadSanitizer annotations that make those the only synchronisation between threads.
// A fiber runs until it waits or exits; the scheduler resumes, in thread order, every fiber whose
// wait is over, and reports a fault when a full pass finds none.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <vector>

#include "cuda_emu/emu.h"

#ifdef AH_CUDA_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#define TSAN(call) call
#else
#define TSAN(call) ((void)0)
#endif

// Saves the callee-saved registers, the SSE and x87 control words and the stack pointer in
// *save, and continues on `load` (a stack saved by an earlier switch or built by start_stack).
extern "C" void ah_emu_switch(void **save, void *load);
__asm__(".text\n"
        ".globl ah_emu_switch\n"
        ".type ah_emu_switch,@function\n"
        "ah_emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size ah_emu_switch, .-ah_emu_switch\n");

namespace ah_emu {
namespace {

const size_t STACK_BYTES = 128 * 1024, PAGE = 4096;
enum { RUNNABLE, AT_BARRIER, AT_WARP, DONE };

struct fiber {
    void *sp = nullptr;
    char *stack = nullptr; // STACK_BYTES, its lowest page a guard
    void *tsan = nullptr;
    uint3 tid{0, 0, 0};
    unsigned linear = 0;
    int state = DONE;
    unsigned wait_gen = 0;
};

struct warp_state {
    unsigned mask = 0, arrived = 0, gen = 0, exited = 0;
    const char *what = nullptr;
    uint64_t slot[2][32];
};

// The scheduler's state; one launch runs at a time (the runtime holds its lock).
struct {
    std::vector<fiber> pool; // grown to the largest block seen
    fiber *cur = nullptr;
    void *sched_sp = nullptr, *sched_tsan = nullptr;
    const launch_config *cfg = nullptr;
    const std::function<void()> *body = nullptr;
    uint3 block{0, 0, 0};
    unsigned n = 0, live = 0, bar_arrived = 0, bar_gen = 0;
    warp_state warps[32];
    std::vector<unsigned char> dyn_shared;
    bool faulted = false;
    // TSan sync objects: the block's start and end, the barrier's and each warp's two
    // generations (a thread that is one generation ahead releases into the other one).
    char start_obj, end_obj, bar_obj[2], warp_obj[32][2];
} S;

void to_scheduler() {
    fiber *f = S.cur;
    TSAN(__tsan_switch_to_fiber(S.sched_tsan, __tsan_switch_to_fiber_no_sync));
    ah_emu_switch(&f->sp, S.sched_sp);
}

void fiber_entry() {
    TSAN(__tsan_acquire(&S.start_obj));
    (*S.body)();
    fiber *f = S.cur;
    f->state = DONE;
    S.warps[f->linear / 32].exited |= 1u << (f->linear % 32);
    S.live--;
    // Exited threads count as arrived at the barrier.
    if (S.bar_arrived && S.bar_arrived == S.live) {
        S.bar_arrived = 0;
        S.bar_gen++;
    }
    TSAN(__tsan_release(&S.end_obj));
    to_scheduler();
    abort(); // never resumed
}

// A fresh stack for fiber f whose first switch "returns" into fiber_entry.
void start_stack(fiber *f) {
    char *top = f->stack + STACK_BYTES;
    uint64_t *ret_slot = (uint64_t *)(top - 16); // 16-aligned: fiber_entry starts as if called
    *ret_slot = (uint64_t)(uintptr_t)fiber_entry;
    uint64_t *sp = ret_slot - 7; // six registers and the control words
    memset(sp, 0, 7 * sizeof *sp);
    uint32_t mxcsr = 0x1f80;
    uint16_t fpucw = 0x037f;
    memcpy(sp, &mxcsr, 4);
    memcpy((char *)sp + 4, &fpucw, 2);
    f->sp = sp;
}

void grow_pool(unsigned n) {
    while (S.pool.size() < n) {
        fiber f;
        void *m = mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "cuda emulation: no memory for a thread's stack\n");
            abort();
        }
        mprotect(m, PAGE, PROT_NONE);
        f.stack = (char *)m;
        TSAN(f.tsan = __tsan_create_fiber(0));
        S.pool.push_back(f);
    }
}

// Nobody can move: names the first waiting thread and what it waits for.
void report_deadlock() {
    for (unsigned i = 0; i < S.n; i++) {
        const fiber &f = S.pool[i];
        if (f.state == DONE) continue;
        char what[200];
        if (f.state == AT_WARP) {
            const warp_state &w = S.warps[f.linear / 32];
            snprintf(what, sizeof what, "%s with mask 0x%08x: lanes 0x%08x arrived, the others exited or never call it",
                     w.what, w.mask, w.arrived);
        } else {
            snprintf(what, sizeof what, "__syncthreads: %u of %u live threads arrived, the others wait elsewhere",
                     S.bar_arrived, S.live);
        }
        fprintf(stderr, "cuda emulation: kernel %s, block (%u,%u,%u), thread (%u,%u,%u) waits forever in %s\n",
                S.cfg->kernel, S.block.x, S.block.y, S.block.z, f.tid.x, f.tid.y, f.tid.z, what);
        return;
    }
}

bool ready(const fiber &f) {
    if (f.state == AT_BARRIER) return f.wait_gen != S.bar_gen;
    if (f.state == AT_WARP) return f.wait_gen != S.warps[f.linear / 32].gen;
    return f.state == RUNNABLE;
}

bool run_block(const uint3 &b) {
    const dim3 bd = S.cfg->block;
    S.block = b;
    S.live = S.n;
    S.bar_arrived = 0;
    for (warp_state &w : S.warps) w.mask = w.arrived = w.exited = 0, w.what = nullptr;
    // Shared memory starts undefined on a GPU: here all ones (a NaN in every float).
    if (!S.dyn_shared.empty()) memset(S.dyn_shared.data(), 0xff, S.dyn_shared.size());
    for (unsigned i = 0; i < S.n; i++) {
        fiber &f = S.pool[i];
        f.linear = i;
        f.tid = uint3{i % bd.x, i / bd.x % bd.y, i / (bd.x * bd.y)};
        f.state = RUNNABLE;
        start_stack(&f);
    }
    TSAN(__tsan_release(&S.start_obj));
    for (;;) {
        bool moved = false;
        for (unsigned i = 0; i < S.n; i++) {
            fiber &f = S.pool[i];
            if (f.state == DONE || !ready(f)) continue;
            f.state = RUNNABLE;
            S.cur = &f;
            TSAN(__tsan_switch_to_fiber(f.tsan, __tsan_switch_to_fiber_no_sync));
            ah_emu_switch(&S.sched_sp, f.sp);
            S.cur = nullptr;
            if (S.faulted) return false;
            moved = true;
        }
        if (S.live == 0) break;
        if (!moved) {
            report_deadlock();
            return false;
        }
    }
    TSAN(__tsan_acquire(&S.end_obj));
    return true;
}

fiber *self(const char *what) {
    if (!S.cur) {
        fprintf(stderr, "cuda emulation: %s used outside a kernel\n", what);
        abort();
    }
    return S.cur;
}

} // namespace

bool run_grid(const launch_config &cfg, const std::function<void()> &body) {
    S.cfg = &cfg;
    S.body = &body;
    S.n = cfg.block.x * cfg.block.y * cfg.block.z;
    S.faulted = false;
    S.dyn_shared.assign(cfg.shared_bytes, 0xff);
    grow_pool(S.n);
    TSAN(S.sched_tsan = __tsan_get_current_fiber());
    bool ok = true;
    for (unsigned z = 0; ok && z < cfg.grid.z; z++)
        for (unsigned y = 0; ok && y < cfg.grid.y; y++)
            for (unsigned x = 0; ok && x < cfg.grid.x; x++) ok = run_block(uint3{x, y, z});
    S.cfg = nullptr;
    S.body = nullptr;
    return ok;
}

void describe_current(char *buf, size_t len) {
    if (!S.cfg) {
        snprintf(buf, len, "host code");
        return;
    }
    const uint3 t = S.cur ? S.cur->tid : uint3{0, 0, 0};
    snprintf(buf, len, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u)", S.cfg->kernel, S.block.x,
             S.block.y, S.block.z, t.x, t.y, t.z);
}

uint3 thread_idx() { return self("threadIdx")->tid; }
uint3 block_idx() { return self("blockIdx"), S.block; }
dim3 block_dim() { return self("blockDim"), S.cfg->block; }
dim3 grid_dim() { return self("gridDim"), S.cfg->grid; }
unsigned lane_id() { return self("a warp intrinsic")->linear % 32; }

void *dynamic_shared() {
    self("dynamic shared memory");
    if (S.dyn_shared.empty()) device_fault("dynamic shared memory used, but the launch gave 0 bytes of it");
    return S.dyn_shared.data();
}

void device_fault(const char *what) {
    fiber *f = self("a device fault");
    fprintf(stderr, "cuda emulation: kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s\n",
            S.cfg->kernel, S.block.x, S.block.y, S.block.z, f->tid.x, f->tid.y, f->tid.z, what);
    S.faulted = true;
    to_scheduler();
    abort(); // a faulted block is never resumed
}

// Arrival at a barrier of generation *gen: the last one to arrive (`last`) opens it for the
// others (the next generation), the others wait as `state` until it opens.
void arrive(fiber *f, bool last, unsigned *arrived, unsigned *gen, int state) {
    if (last) {
        *arrived = 0;
        ++*gen;
        return;
    }
    f->state = state;
    f->wait_gen = *gen;
    to_scheduler();
}

void syncthreads() {
    fiber *f = self("__syncthreads");
    TSAN(__tsan_release(&S.bar_obj[S.bar_gen & 1]));
    const unsigned gen = S.bar_gen;
    S.bar_arrived++;
    arrive(f, S.bar_arrived == S.live, &S.bar_arrived, &S.bar_gen, AT_BARRIER);
    TSAN(__tsan_acquire(&S.bar_obj[gen & 1]));
    (void)gen;
}

const uint64_t *warp_exchange(unsigned mask, uint64_t mine, const char *what) {
    fiber *f = self(what);
    const unsigned lane = f->linear % 32, wi = f->linear / 32;
    warp_state &w = S.warps[wi];
    char msg[200];
    if (!(mask >> lane & 1u)) {
        snprintf(msg, sizeof msg, "%s with mask 0x%08x, which does not name the calling lane %u", what, mask, lane);
        device_fault(msg);
    }
    const unsigned lanes_here = S.n - wi * 32 < 32 ? S.n - wi * 32 : 32;
    if (lanes_here < 32 && (mask >> lanes_here)) {
        snprintf(msg, sizeof msg, "%s with mask 0x%08x names lanes past the block's last thread (%u lanes in this warp)",
                 what, mask, lanes_here);
        device_fault(msg);
    }
    if (mask & w.exited) {
        snprintf(msg, sizeof msg, "%s with mask 0x%08x names lanes 0x%08x, which have exited", what, mask, mask & w.exited);
        device_fault(msg);
    }
    if (w.arrived && w.mask != mask) {
        snprintf(msg, sizeof msg, "%s with mask 0x%08x while lanes 0x%08x of the warp wait in %s with mask 0x%08x",
                 what, mask, w.arrived, w.what, w.mask);
        device_fault(msg);
    }
    const unsigned gen = w.gen;
    w.mask = mask;
    w.what = what;
    w.slot[gen & 1][lane] = mine;
    TSAN(__tsan_release(&S.warp_obj[wi][gen & 1]));
    w.arrived |= 1u << lane;
    arrive(f, w.arrived == mask, &w.arrived, &w.gen, AT_WARP);
    TSAN(__tsan_acquire(&S.warp_obj[wi][gen & 1]));
    return w.slot[gen & 1];
}

} // namespace ah_emu
