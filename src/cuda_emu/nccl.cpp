// NCCL for the CUDA emulation (emu.h), served by MPI: a communicator is an MPI communicator of
// the member processes, made by ncclCommInitRank from the unique id (which names the root's
// rank in the world, MPI_COMM_WORLD unless ahEmuNcclSetWorld set another: the members tell the
// root their ranks, the root answers with the member list, and MPI_Comm_create_group makes the
// communicator). Every call checks its arguments as
// NCCL does (device buffers of the right size, root and peer in range, NCCL's in-place layouts)
// and its exchange, unlike the rest of the emulation's work, runs at once with the work it depends
// on (its stream's, emu.h): on GPUs the ranks' collectives meet in program order because each GPU
// runs independently of its host, and a lazily run exchange would wait for a peer whose host is
// busy in a host-side MPI call (a deadlock no GPU has). What it writes, though, lands in device
// memory only when the write, queued on its stream, runs: until then the buffers hold what they
// held before the call, so work that does not wait for the call's stream (an event) reads the
// buffer unreduced, as it could on a GPU. Calls between ncclGroupStart and ncclGroupEnd run as
// one operation at ncclGroupEnd, point-to-point ones posted first and waited for last. 16-bit reductions widen to fp32, reduce, and round once (NCCL rounds
// at each step of its ring: a difference within the half types' rounding). Requires MPI to be
// initialised, as the program does before it creates a communicator.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <memory>
#include <utility>
#include <vector>

#include "cuda_emu/emu.h"
#include "cuda_emu/include/nccl.h"

struct ah_emu_nccl {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0, size = 1;
};

namespace {

using ah_emu::api_lock;

static MPI_Comm g_world = MPI_COMM_NULL; // ahEmuNcclSetWorld's; NULL: MPI_COMM_WORLD

static MPI_Comm world_comm() { return g_world != MPI_COMM_NULL ? g_world : MPI_COMM_WORLD; }

struct id_body {
    char magic[8];
    int root_world;
    unsigned nonce;
};
// One call: the device bytes it writes, and its exchange (MPI; non-blocking requests appended).
struct call {
    std::vector<std::pair<void *, size_t>> writes;
    std::function<void(std::vector<MPI_Request> &)> run;
};
int group_depth = 0;
std::vector<call> group_ops;
cudaStream_t group_stream = nullptr;

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    }
    return 0;
}

MPI_Datatype mpi_type(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclFloat16: case ncclBfloat16: return MPI_UINT16_T; // moved as bits, reduced as fp32
    }
    return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ncclRedOp_t op) {
    return op == ncclProd ? MPI_PROD : op == ncclMax ? MPI_MAX : op == ncclMin ? MPI_MIN : MPI_SUM;
}

ncclResult_t bad(const char *call, const char *why) {
    fprintf(stderr, "NCCL WARN (cuda emulation) %s: %s\n", call, why);
    return ncclInvalidArgument;
}

// The checks every call makes: a live communicator, a known type, buffers in device memory.
ncclResult_t check(const char *call, ncclComm_t comm, ncclDataType_t t, const void *send, size_t send_n,
                   const void *recv, size_t recv_n) {
    char why[256];
    if (!comm || comm->comm == MPI_COMM_NULL) return bad(call, "not a communicator from ncclCommInitRank");
    if (!type_size(t)) return bad(call, "unknown data type");
    if (send && send_n && !ah_emu::is_device(send, send_n * type_size(t))) {
        snprintf(why, sizeof why, "send buffer %p of %zu elements is not inside one device allocation", send, send_n);
        return bad(call, why);
    }
    if (recv && recv_n && !ah_emu::is_device(recv, recv_n * type_size(t))) {
        snprintf(why, sizeof why, "receive buffer %p of %zu elements is not inside one device allocation", recv, recv_n);
        return bad(call, why);
    }
    return ncclSuccess;
}

// Reduces n elements of type t from `in` into `out` (MPI_IN_PLACE when in == out) on comm, to
// every rank (root < 0) or to root.
void reduce(const void *in, void *out, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, const ah_emu_nccl *c) {
    const bool half = t == ncclFloat16 || t == ncclBfloat16;
    std::vector<float> wide;
    const void *src = in;
    void *dst = out;
    MPI_Datatype mt = mpi_type(t);
    if (half) {
        wide.resize(n);
        for (size_t i = 0; i < n; i++) {
            const uint16_t b = ((const uint16_t *)in)[i];
            wide[i] = t == ncclBfloat16 ? ah_emu_bf16_bits_to_float(b) : ah_emu_half_bits_to_float(b);
        }
        src = dst = wide.data();
        mt = MPI_FLOAT;
    }
    const bool in_place = src == dst;
    if (root < 0) MPI_Allreduce(in_place ? MPI_IN_PLACE : src, dst, (int)n, mt, mpi_op(op), c->comm);
    else MPI_Reduce(in_place && c->rank == root ? MPI_IN_PLACE : src, dst, (int)n, mt, mpi_op(op), root, c->comm);
    const bool mine = root < 0 || c->rank == root;
    if (mine && op == ncclAvg) {
        for (size_t i = 0; i < n; i++) {
            if (half) wide[i] /= (float)c->size;
            else if (t == ncclFloat32) ((float *)out)[i] /= (float)c->size;
            else if (t == ncclFloat64) ((double *)out)[i] /= (double)c->size;
        }
    }
    if (half && mine)
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)out)[i] = t == ncclBfloat16 ? ah_emu_float_to_bf16_bits(wide[i]) : ah_emu_float_to_half_bits(wide[i]);
}

// Runs the calls' exchanges now, after the work they depend on on `stream`, and queues on the
// stream the write of their results into device memory (restored to its old bytes meanwhile).
ncclResult_t issue(cudaStream_t stream, const std::vector<call> &calls) {
    ah_emu::enqueue(stream, []() { return cudaSuccess; }); // the call's place and dependencies
    if (ah_emu::drain(stream, false) != cudaSuccess) return ncclUnhandledCudaError;
    std::vector<std::pair<void *, size_t>> writes;
    for (const call &c : calls) writes.insert(writes.end(), c.writes.begin(), c.writes.end());
    auto results = std::make_shared<std::vector<std::vector<char>>>();
    ah_emu::with_device_access([&] {
        std::vector<std::vector<char>> before;
        for (const auto &w : writes) before.emplace_back((char *)w.first, (char *)w.first + w.second);
        std::vector<MPI_Request> reqs;
        for (const call &c : calls) c.run(reqs); // collectives in call order, p2p posted
        MPI_Waitall((int)reqs.size(), reqs.data(), MPI_STATUSES_IGNORE);
        for (const auto &w : writes) results->emplace_back((char *)w.first, (char *)w.first + w.second);
        for (size_t i = writes.size(); i-- > 0;) memcpy(writes[i].first, before[i].data(), writes[i].second);
    });
    ah_emu::enqueue(stream, [writes, results]() {
        for (size_t i = 0; i < writes.size(); i++) memcpy(writes[i].first, (*results)[i].data(), writes[i].second);
        return cudaSuccess;
    });
    return ah_emu::sticky() == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

// Issues one call, or adds it to the open group. `writes`: the device bytes it writes.
ncclResult_t submit(cudaStream_t stream, std::vector<std::pair<void *, size_t>> writes,
                    std::function<void(std::vector<MPI_Request> &)> run) {
    if (ah_emu::sticky() != cudaSuccess) return ncclUnhandledCudaError;
    if (group_depth > 0) {
        if (group_ops.empty()) group_stream = stream;
        group_ops.push_back(call{std::move(writes), std::move(run)});
        return ncclSuccess;
    }
    return issue(stream, {call{std::move(writes), std::move(run)}});
}

int handshake_tag(const id_body &b) { return 17000 + (int)(b.nonce % 8000u); }

} // namespace

extern "C" {

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    }
    return "unknown result code";
}

void ahEmuNcclSetWorld(MPI_Comm world) {
    api_lock l;
    g_world = world;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) return ncclSystemError;
    static unsigned counter = 0;
    id_body b;
    memcpy(b.magic, "AHEMUID", 8);
    MPI_Comm_rank(world_comm(), &b.root_world);
    b.nonce = (unsigned)getpid() * 2654435761u + ++counter * 40503u;
    memset(id, 0, sizeof *id);
    memcpy(id->internal, &b, sizeof b);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
    api_lock l;
    id_body b;
    memcpy(&b, id.internal, sizeof b);
    if (memcmp(b.magic, "AHEMUID", 8) != 0) return bad("ncclCommInitRank", "not an id from ncclGetUniqueId");
    if (nranks < 1 || rank < 0 || rank >= nranks) return bad("ncclCommInitRank", "rank or nranks out of range");
    int world = 0, device = 0;
    MPI_Comm_rank(world_comm(), &world);
    cudaGetDevice(&device);
    char host[64] = {0};
    gethostname(host, sizeof host - 1);
    // Each member's (rank, world rank, device, host), gathered by the root, which answers with
    // the member list (world ranks in rank order) or -1 entries when the group is unusable.
    struct member { int rank, world, device; char host[64]; } me{rank, world, device, {0}};
    memcpy(me.host, host, sizeof host);
    const int tag = handshake_tag(b);
    std::vector<int> worlds(nranks, -1);
    if (rank == 0) {
        std::vector<member> all(nranks);
        all[0] = me;
        for (int i = 1; i < nranks; i++) {
            member m;
            MPI_Recv(&m, sizeof m, MPI_BYTE, MPI_ANY_SOURCE, tag, world_comm(), MPI_STATUS_IGNORE);
            if (m.rank > 0 && m.rank < nranks) all[m.rank] = m;
        }
        bool ok = true;
        for (int i = 0; i < nranks; i++)
            for (int j = i + 1; j < nranks; j++)
                if (all[i].device == all[j].device && strcmp(all[i].host, all[j].host) == 0) {
                    fprintf(stderr, "NCCL WARN (cuda emulation) Duplicate GPU detected: rank %d and rank %d both on CUDA device %d of %s\n",
                            i, j, all[i].device, all[i].host);
                    ok = false;
                }
        for (int i = 0; i < nranks; i++) worlds[i] = ok ? all[i].world : -1;
        for (int i = 1; i < nranks; i++) MPI_Send(worlds.data(), nranks, MPI_INT, all[i].world, tag, world_comm());
    } else {
        MPI_Send(&me, sizeof me, MPI_BYTE, b.root_world, tag, world_comm());
        MPI_Recv(worlds.data(), nranks, MPI_INT, b.root_world, tag, world_comm(), MPI_STATUS_IGNORE);
    }
    if (worlds[0] < 0) return ncclInvalidUsage;
    MPI_Group wg, g;
    MPI_Comm_group(world_comm(), &wg);
    MPI_Group_incl(wg, nranks, worlds.data(), &g);
    ah_emu_nccl *c = new ah_emu_nccl;
    MPI_Comm_create_group(world_comm(), g, tag, &c->comm);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    c->rank = rank;
    c->size = nranks;
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    api_lock l;
    if (!comm) return ncclInvalidArgument;
    ah_emu::drain(nullptr, true); // queued operations of the communicator finish first
    if (comm->comm != MPI_COMM_NULL) MPI_Comm_free(&comm->comm);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    if (!comm) return ncclInvalidArgument;
    *count = comm->size;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    if (!comm) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t s) {
    api_lock l;
    ncclResult_t r = check("ncclAllReduce", c, t, send, n, recv, n);
    if (r != ncclSuccess) return r;
    if (send != recv && (const char *)send < (char *)recv + n * type_size(t) && (const char *)recv < (const char *)send + n * type_size(t))
        return bad("ncclAllReduce", "send and receive buffers overlap without being the same (in place)");
    return submit(s, {{recv, n * type_size(t)}}, [=](std::vector<MPI_Request> &) { reduce(send, recv, n, t, op, -1, c); });
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t n, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t c, cudaStream_t s) {
    api_lock l;
    if (c && (root < 0 || root >= c->size)) return bad("ncclReduce", "root out of range");
    ncclResult_t r = check("ncclReduce", c, t, send, n, c && c->rank == root ? recv : nullptr, n);
    if (r != ncclSuccess) return r;
    std::vector<std::pair<void *, size_t>> writes;
    if (c->rank == root) writes.push_back({recv, n * type_size(t)});
    return submit(s, writes, [=](std::vector<MPI_Request> &) { reduce(send, recv, n, t, op, root, c); });
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t s) {
    api_lock l;
    if (c && (root < 0 || root >= c->size)) return bad("ncclBroadcast", "root out of range");
    ncclResult_t r = check("ncclBroadcast", c, t, c && c->rank == root ? send : nullptr, n, recv, n);
    if (r != ncclSuccess) return r;
    return submit(s, {{recv, n * type_size(t)}}, [=](std::vector<MPI_Request> &) {
        if (c->rank == root && send != recv) memmove(recv, send, n * type_size(t));
        MPI_Bcast(recv, (int)n, mpi_type(t), root, c->comm);
    });
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t s) {
    api_lock l;
    ncclResult_t r = check("ncclAllGather", c, t, send, n, recv, c ? n * (size_t)c->size : 0);
    if (r != ncclSuccess) return r;
    const bool in_place = (const char *)send == (const char *)recv + (size_t)c->rank * n * type_size(t);
    return submit(s, {{recv, n * (size_t)c->size * type_size(t)}}, [=](std::vector<MPI_Request> &) {
        MPI_Allgather(in_place ? MPI_IN_PLACE : send, (int)n, mpi_type(t), recv, (int)n, mpi_type(t), c->comm);
    });
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t s) {
    api_lock l;
    ncclResult_t r = check("ncclReduceScatter", c, t, send, c ? n * (size_t)c->size : 0, recv, n);
    if (r != ncclSuccess) return r;
    return submit(s, {{recv, n * type_size(t)}}, [=](std::vector<MPI_Request> &) {
        // Reduce the whole buffer, keep this rank's part (the same sums, in MPI's order).
        std::vector<char> full((const char *)send, (const char *)send + n * (size_t)c->size * type_size(t));
        reduce(full.data(), full.data(), n * (size_t)c->size, t, op, -1, c);
        memmove(recv, full.data() + (size_t)c->rank * n * type_size(t), n * type_size(t));
    });
}

ncclResult_t ncclSend(const void *send, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    api_lock l;
    if (c && (peer < 0 || peer >= c->size)) return bad("ncclSend", "peer out of range");
    ncclResult_t r = check("ncclSend", c, t, send, n, nullptr, 0);
    if (r != ncclSuccess) return r;
    return submit(s, {}, [=](std::vector<MPI_Request> &reqs) {
        reqs.emplace_back();
        MPI_Isend(send, (int)n, mpi_type(t), peer, 0, c->comm, &reqs.back());
    });
}

ncclResult_t ncclRecv(void *recv, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    api_lock l;
    if (c && (peer < 0 || peer >= c->size)) return bad("ncclRecv", "peer out of range");
    ncclResult_t r = check("ncclRecv", c, t, nullptr, 0, recv, n);
    if (r != ncclSuccess) return r;
    return submit(s, {{recv, n * type_size(t)}}, [=](std::vector<MPI_Request> &reqs) {
        reqs.emplace_back();
        MPI_Irecv(recv, (int)n, mpi_type(t), peer, 0, c->comm, &reqs.back());
    });
}

ncclResult_t ncclGroupStart(void) {
    api_lock l;
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
    api_lock l;
    if (group_depth == 0) return bad("ncclGroupEnd", "no matching ncclGroupStart");
    if (--group_depth > 0 || group_ops.empty()) return ncclSuccess;
    auto ops = std::move(group_ops);
    group_ops.clear();
    return issue(group_stream, ops);
}

} // extern "C"
