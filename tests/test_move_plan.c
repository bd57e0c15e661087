/* The in-place move's slice plan (ckpt/move_plan.h): which new rank gets which piece from which old rank,
 * on hand-built plans of tiny-gpt2 (4 blocks, tied head): a pipeline change where the leaver alone holds
 * blocks, replicas sharing the sending, a TP change (2 -> 1: both pieces of each split group, one of an
 * unsplit one), and the refusals. Pure: no MPI, no trainer. */
#include <string.h>

#include "ckpt/move_plan.h"
#include "harness.h"

static ah_model_t model(void) {
    ah_model_t m;
    ah_error_t err;
    CHECK(ah_model_preset("tiny-gpt2", &m, &err) == AH_OK, "%s", err.msg);
    return m;
}

/* A hand-built plan of m: n pipelines, TP tp, over a cluster of nodes nodes. */
static ah_plan_t plan_of(ah_model_t m, int tp, ah_pipeline_t *p, int n, int nodes) {
    ah_plan_t plan = {.tp = tp, .n_pipelines = n, .pipelines = p, .model = m};
    plan.cluster.n_nodes = nodes;
    return plan;
}

static void placements(const ah_plan_t *from, const ah_plan_t *to, ah_placement_t *a, ah_placement_t *b) {
    ah_error_t err;
    CHECK(ah_placement_build(from, NULL, 0, a, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_placement_build(to, NULL, 0, b, &err) == AH_OK, "%s", err.msg);
}

/* The item of mp that brings (kind, layer, piece) to old rank dst, or NULL. */
static const ah_move_item_t *find(const ah_move_plan_t *mp, int dst, ah_shard_kind_t kind, int layer, int piece) {
    for (int i = 0; i < mp->n; i++)
        if (mp->items[i].dst == dst && mp->items[i].g.kind == kind && mp->items[i].g.layer == layer &&
            mp->items[i].piece == piece)
            return &mp->items[i];
    return NULL;
}

static int src_of(const ah_move_plan_t *mp, int dst, ah_shard_kind_t kind, int layer, int piece) {
    const ah_move_item_t *it = find(mp, dst, kind, layer, piece);
    return it ? it->src : -9;
}

/* pp3 (n0: embedding + blocks 0-1, n1: block 2, n2: block 3 + head) -> pp2 (blocks 0-1, 2-3) of old ranks 0, 1;
 * old rank 2 leaves, handing over block 3 and the head, which only it holds; the tied embedding new rank 1
 * loads on its last stage comes from old rank 0. */
static void test_pipeline_change(void) {
    ah_model_t m = model();
    ah_stage_t s3[3] = {{.first = 0, .last = 2, .devices = {{0, 0}}}, {.first = 2, .last = 3, .devices = {{1, 0}}},
                        {.first = 3, .last = 4, .devices = {{2, 0}}}};
    ah_stage_t s2[2] = {{.first = 0, .last = 2, .devices = {{0, 0}}}, {.first = 2, .last = 4, .devices = {{1, 0}}}};
    ah_pipeline_t p3 = {.n_stages = 3, .stages = s3}, p2 = {.n_stages = 2, .stages = s2};
    ah_plan_t from = plan_of(m, 1, &p3, 1, 3), to = plan_of(m, 1, &p2, 1, 3);
    ah_placement_t a, b;
    ah_move_plan_t mp;
    ah_error_t err;
    placements(&from, &to, &a, &b);
    const int to_rank[3] = {0, 1, -1};
    CHECK(ah_move_plan_build(&m, &a, &b, to_rank, &mp, &err) == AH_OK, "%s", err.msg);
    CHECK_EQ_I64(mp.n, 3 + 4); /* new 0: embed, b0, b1; new 1: embed (tied), b2, b3, head */
    CHECK_EQ_I64(src_of(&mp, 0, AH_SHARD_EMBED, -1, 0), 0);
    CHECK_EQ_I64(src_of(&mp, 0, AH_SHARD_BLOCK, 1, 0), 0);
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_EMBED, -1, 0), 0);
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_BLOCK, 2, 0), 1);  /* kept */
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_BLOCK, 3, 0), 2);  /* the leaver's */
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_HEAD, -1, 0), 2);
    const int64_t emb = ah_move_group_floats(&m, (ah_shard_group_t){AH_SHARD_EMBED, -1}, 1),
                  blk = ah_move_group_floats(&m, (ah_shard_group_t){AH_SHARD_BLOCK, 3}, 1),
                  head = ah_move_group_floats(&m, (ah_shard_group_t){AH_SHARD_HEAD, -1}, 1);
    /* 3 floats a parameter: a block of tiny-gpt2 (C 64) is 12 C^2 + 13 C parameters */
    CHECK_EQ_I64(blk, 3 * (12 * 64 * 64 + 13 * 64));
    CHECK_EQ_I64(mp.moved_floats, emb + blk + head);
    CHECK_EQ_I64(mp.kept_floats, emb + 3 * blk);
    CHECK(mp.items[3].dst == 1 && mp.items[3].g.kind == AH_SHARD_EMBED && mp.items[3].gi == 0 &&
              mp.items[6].g.kind == AH_SHARD_HEAD && mp.items[6].gi == 3, "by receiver, in its load order");
    ah_move_plan_free(&mp);

    /* renumbered: old rank 1 runs new rank 0 (it gets the embedding, blocks 0-1 from old rank 0); old rank 0 runs
     * new rank 1 and keeps only the embedding its last stage loads */
    const int swapped[3] = {1, 0, -1};
    CHECK(ah_move_plan_build(&m, &a, &b, swapped, &mp, &err) == AH_OK, "%s", err.msg);
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_BLOCK, 0, 0), 0);
    CHECK_EQ_I64(src_of(&mp, 0, AH_SHARD_BLOCK, 2, 0), 1);
    CHECK_EQ_I64(src_of(&mp, 0, AH_SHARD_BLOCK, 3, 0), 2);
    CHECK_EQ_I64(mp.kept_floats, ah_move_group_floats(&m, (ah_shard_group_t){AH_SHARD_EMBED, -1}, 1)); /* the tied one */
    ah_move_plan_free(&mp);

    /* refusals: a new rank no old rank runs, one given twice, one out of range */
    const int none[3] = {0, -1, -1}, twice[3] = {0, 0, -1}, out[3] = {0, 5, -1};
    CHECK(ah_move_plan_build(&m, &a, &b, none, &mp, &err) == AH_ERR_INVALID && strstr(err.msg, "no old rank runs new rank 1"),
          "%s", err.msg);
    CHECK(ah_move_plan_build(&m, &a, &b, twice, &mp, &err) == AH_ERR_INVALID && strstr(err.msg, "another old rank"),
          "%s", err.msg);
    CHECK(ah_move_plan_build(&m, &a, &b, out, &mp, &err) == AH_ERR_INVALID && strstr(err.msg, "not a rank"), "%s",
          err.msg);
    CHECK(mp.n == 0 && !mp.items, "a refused plan holds nothing");
    ah_placement_free(&a);
    ah_placement_free(&b);
}

/* pp2 x dp2 (pipeline 0: old ranks 0, 1; pipeline 1: old ranks 2, 3) -> one stage dp2 on old ranks 0, 1: each
 * needs the half it lacks, held by two replicas; the sending goes to the one that has sent less. */
static void test_replicas_share(void) {
    ah_model_t m = model();
    ah_stage_t a0[2] = {{.first = 0, .last = 2, .devices = {{0, 0}}}, {.first = 2, .last = 4, .devices = {{0, 1}}}};
    ah_stage_t a1[2] = {{.first = 0, .last = 2, .devices = {{1, 0}}}, {.first = 2, .last = 4, .devices = {{1, 1}}}};
    ah_stage_t b0[1] = {{.first = 0, .last = 4, .devices = {{0, 0}}}}, b1[1] = {{.first = 0, .last = 4, .devices = {{0, 1}}}};
    ah_pipeline_t pa[2] = {{.n_stages = 2, .stages = a0}, {.n_stages = 2, .stages = a1}};
    ah_pipeline_t pb[2] = {{.n_stages = 1, .stages = b0}, {.n_stages = 1, .stages = b1}};
    ah_plan_t from = plan_of(m, 1, pa, 2, 2), to = plan_of(m, 1, pb, 2, 2);
    ah_placement_t a, b;
    ah_move_plan_t mp;
    ah_error_t err;
    placements(&from, &to, &a, &b);
    const int to_rank[4] = {0, 1, -1, -1};
    CHECK(ah_move_plan_build(&m, &a, &b, to_rank, &mp, &err) == AH_OK, "%s", err.msg);
    /* new 0 (old 0) lacks blocks 2, 3 and the head: old 1 or old 3 hold them; alternating, the lowest first */
    CHECK_EQ_I64(src_of(&mp, 0, AH_SHARD_BLOCK, 2, 0), 1);
    CHECK_EQ_I64(src_of(&mp, 0, AH_SHARD_BLOCK, 3, 0), 3);
    CHECK_EQ_I64(src_of(&mp, 0, AH_SHARD_HEAD, -1, 0), 1); /* old 1 sent one block, old 3 one: the lower */
    /* new 1 (old 1) lacks the embedding and blocks 0, 1: old 0 or old 2 */
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_EMBED, -1, 0), 0);
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_BLOCK, 0, 0), 2);
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_BLOCK, 1, 0), 0); /* old 0 sent the embedding only, fewer floats than a block */
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_BLOCK, 2, 0), 1); /* kept */
    ah_move_plan_free(&mp);
    ah_placement_free(&a);
    ah_placement_free(&b);
}

/* TP 2 (one stage on old ranks 0, 1) -> TP 1 on old rank 1 (old rank 0 leaves): the split groups' both pieces
 * (its own kept, the other from old rank 0), the tied head (the final norm, unsplit) piece 0 only. */
static void test_tp_change(void) {
    ah_model_t m = model();
    ah_stage_t s2[1] = {{.first = 0, .last = 4, .devices = {{0, 0}, {0, 1}}}};
    ah_stage_t s1[1] = {{.first = 0, .last = 4, .devices = {{0, 1}}}};
    ah_pipeline_t p2 = {.n_stages = 1, .stages = s2}, p1 = {.n_stages = 1, .stages = s1};
    ah_plan_t from = plan_of(m, 2, &p2, 1, 1), to = plan_of(m, 1, &p1, 1, 1);
    ah_placement_t a, b;
    ah_move_plan_t mp;
    ah_error_t err;
    placements(&from, &to, &a, &b);
    const int to_rank[2] = {-1, 0};
    CHECK(ah_move_plan_build(&m, &a, &b, to_rank, &mp, &err) == AH_OK, "%s", err.msg);
    CHECK_EQ_I64(mp.n, 2 + 4 * 2 + 1); /* embed (vocabulary-parallel) and blocks: 2 pieces; head: 1 */
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_BLOCK, 2, 0), 0);
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_BLOCK, 2, 1), 1);
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_EMBED, -1, 0), 0);
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_HEAD, -1, 0), 0);
    CHECK(!find(&mp, 1, AH_SHARD_HEAD, -1, 1), "the unsplit head: piece 0 only");
    const ah_move_item_t *q0 = find(&mp, 1, AH_SHARD_BLOCK, 0, 0), *q1 = find(&mp, 1, AH_SHARD_BLOCK, 0, 1);
    CHECK(q0 && q1 && q1 == q0 + 1 && q0->gi == q1->gi, "a group's pieces in ah_reshard_pieces' order");
    CHECK_EQ_I64(mp.moved_floats + mp.kept_floats, 2 * ah_move_group_floats(&m, (ah_shard_group_t){AH_SHARD_BLOCK, 0}, 2) * 4 +
                 ah_move_group_floats(&m, (ah_shard_group_t){AH_SHARD_EMBED, -1}, 2) * 2 +
                 ah_move_group_floats(&m, (ah_shard_group_t){AH_SHARD_HEAD, -1}, 2));
    ah_move_plan_free(&mp);
    ah_placement_free(&a);
    ah_placement_free(&b);
}

/* The item of mp that brings (kind, layer) to joining new rank n: its src, or -9; *via (may be NULL) its via. */
static int join_src_via(const ah_move_plan_t *mp, int n, ah_shard_kind_t kind, int layer, int *via) {
    for (int i = 0; i < mp->n; i++)
        if (mp->items[i].dst == -1 && mp->items[i].to == n && mp->items[i].g.kind == kind && mp->items[i].g.layer == layer) {
            if (via) *via = mp->items[i].via;
            return mp->items[i].src;
        }
    return -9;
}

static int join_src(const ah_move_plan_t *mp, int n, ah_shard_kind_t kind, int layer) {
    int via = -9;
    const int src = join_src_via(mp, n, kind, layer, &via);
    CHECK(src == -9 || via == -1, "a staying holder's piece is not relayed (via %d)", via);
    return src;
}

/* The move's buffers in host memory (ah_move_plan_host_bytes, ah_move_plan_host_check; joinmove (b)), on test_join's
 * dp2 -> dp3 (mp; from, to of nodes n0..n2) with new rank 2 joining on n2: each staying node holds a packed copy of
 * what it sends the joining rank, n2 a buffer for all of it; a node whose host_memory_gib cannot hold its part
 * (with what it holds besides: held) is named, a node without host_memory_gib is not checked. */
static void check_host(const ah_model_t *m, const ah_move_plan_t *mp, ah_plan_t *from, const ah_placement_t *a,
                       ah_plan_t *to, const ah_placement_t *b) {
    ah_node_t nodes[3] = {{.name = "n0"}, {.name = "n1"}, {.name = "n2"}};
    ah_error_t err;
    from->cluster.nodes = to->cluster.nodes = nodes;
    int64_t ob[2], nb[3];
    ah_move_plan_host_bytes(m, mp, a, b, false, ob, nb);
    const int64_t all = 4 * (4 * ah_move_group_floats(m, (ah_shard_group_t){AH_SHARD_BLOCK, 0}, 1) +
                             ah_move_group_floats(m, (ah_shard_group_t){AH_SHARD_EMBED, -1}, 1) +
                             ah_move_group_floats(m, (ah_shard_group_t){AH_SHARD_HEAD, -1}, 1));
    CHECK_EQ_I64(nb[2], all);
    CHECK_EQ_I64(ob[0] + ob[1], all);
    CHECK(ob[0] > 0 && ob[1] > 0 && nb[0] == 0 && nb[1] == 0, "ob %lld %lld nb %lld %lld", (long long)ob[0],
          (long long)ob[1], (long long)nb[0], (long long)nb[1]);
    CHECK(ah_move_plan_host_check(mp, from, a, to, b, NULL, false, &err) == AH_OK, "unchecked nodes: %s", err.msg);
    int64_t vb[2], vn[3]; /* on a device: each old rank's host copy of its stage (the whole model here) besides */
    ah_move_plan_host_bytes(m, mp, a, b, true, vb, vn);
    CHECK(vb[0] == ob[0] + all && vb[1] == ob[1] + all && vn[2] == nb[2], "views %lld %lld", (long long)vb[0],
          (long long)vb[1]);
    nodes[0].host_memory_gib = (double)(ob[0] - 1) / 1073741824.0; /* one byte short */
    CHECK(ah_move_plan_host_check(mp, from, a, to, b, NULL, false, &err) == AH_ERR_INVALID &&
          strstr(err.msg, "node n0's host memory: the move's buffers") && strstr(err.msg, "over its host_memory_gib"),
          "%s", err.msg);
    nodes[0].host_memory_gib = (double)ob[0] / 1073741824.0; /* exactly */
    CHECK(ah_move_plan_host_check(mp, from, a, to, b, NULL, false, &err) == AH_OK, "%s", err.msg);
    const int64_t held[2] = {1, 0}; /* a byte of snapshots on n0 besides */
    CHECK(ah_move_plan_host_check(mp, from, a, to, b, held, false, &err) == AH_ERR_INVALID &&
          strstr(err.msg, "snapshots and replicas (1 bytes)"), "%s", err.msg);
    nodes[0].host_memory_gib = 0, nodes[2].host_memory_gib = 1.0 / 1024; /* the joining node: 1 MiB */
    CHECK(all > 1048576, "tiny-gpt2's %lld bytes", (long long)all);
    CHECK(ah_move_plan_host_check(mp, from, a, to, b, NULL, false, &err) == AH_ERR_INVALID &&
          strstr(err.msg, "node n2's host memory"), "%s", err.msg);
    from->cluster.nodes = to->cluster.nodes = NULL;
}

/* An in-place join: dp2 (old ranks 0, 1, the whole model each) -> dp3, new rank 2 a joining process that held
 * nothing: its every group from the staying replicas, alternating, the others keep theirs. pp2 -> dp2 where the
 * leaver alone held blocks 2, 3 and the head: the leaver hands them to the staying rank, which relays them to the
 * joiner (via; until session 24 refused, and the change restored from the checkpoint); with no rank staying to
 * relay, refused, named; without the join form a new rank no old rank runs is refused as before. */
static void test_join(void) {
    ah_model_t m = model();
    ah_stage_t d0[1] = {{.first = 0, .last = 4, .devices = {{0, 0}}}}, d1[1] = {{.first = 0, .last = 4, .devices = {{1, 0}}}},
               d2[1] = {{.first = 0, .last = 4, .devices = {{2, 0}}}};
    ah_pipeline_t p2[2] = {{.n_stages = 1, .stages = d0}, {.n_stages = 1, .stages = d1}};
    ah_pipeline_t p3[3] = {{.n_stages = 1, .stages = d0}, {.n_stages = 1, .stages = d1}, {.n_stages = 1, .stages = d2}};
    ah_plan_t from = plan_of(m, 1, p2, 2, 2), to = plan_of(m, 1, p3, 3, 3);
    ah_placement_t a, b;
    ah_move_plan_t mp;
    ah_error_t err;
    placements(&from, &to, &a, &b);
    const int to_rank[2] = {0, 1};
    CHECK(ah_move_plan_build(&m, &a, &b, to_rank, &mp, &err) == AH_ERR_INVALID &&
          strstr(err.msg, "no old rank runs new rank 2"), "%s", err.msg);
    CHECK(ah_move_plan_build_join(&m, &a, &b, to_rank, &mp, &err) == AH_OK, "%s", err.msg);
    CHECK_EQ_I64(src_of(&mp, 0, AH_SHARD_BLOCK, 2, 0), 0); /* kept */
    CHECK_EQ_I64(src_of(&mp, 1, AH_SHARD_HEAD, -1, 0), 1);
    CHECK_EQ_I64(join_src(&mp, 2, AH_SHARD_EMBED, -1), 0);
    CHECK_EQ_I64(join_src(&mp, 2, AH_SHARD_BLOCK, 0), 1);
    CHECK_EQ_I64(join_src(&mp, 2, AH_SHARD_BLOCK, 1), 0); /* old 0 sent the embedding only: fewer floats */
    CHECK(mp.moved_floats > 0 && mp.kept_floats > 0, "moved %lld kept %lld", (long long)mp.moved_floats,
          (long long)mp.kept_floats);
    check_host(&m, &mp, &from, &a, &to, &b);
    ah_move_plan_free(&mp);
    ah_placement_free(&a);
    /* pp2 on n0, n1 -> dp2 on n0, n2: old rank 1 leaves, new rank 1 joins */
    ah_stage_t s2[2] = {{.first = 0, .last = 2, .devices = {{0, 0}}}, {.first = 2, .last = 4, .devices = {{1, 0}}}};
    ah_pipeline_t pp[1] = {{.n_stages = 2, .stages = s2}}, q[2] = {{.n_stages = 1, .stages = d0}, {.n_stages = 1, .stages = d2}};
    from = plan_of(m, 1, pp, 1, 2);
    to.n_pipelines = 2, to.pipelines = q;
    ah_placement_free(&b);
    placements(&from, &to, &a, &b);
    const int leaves[2] = {0, -1};
    CHECK(ah_move_plan_build_join(&m, &a, &b, leaves, &mp, &err) == AH_OK, "%s", err.msg);
    int via = -9;
    CHECK_EQ_I64(join_src_via(&mp, 1, AH_SHARD_BLOCK, 2, &via), 0); /* the leaver's, relayed by old rank 0 */
    CHECK_EQ_I64(via, 1);
    CHECK_EQ_I64(join_src_via(&mp, 1, AH_SHARD_HEAD, -1, &via), 0);
    CHECK_EQ_I64(via, 1);
    CHECK_EQ_I64(join_src(&mp, 1, AH_SHARD_BLOCK, 0), 0); /* a staying holder's: sent, not relayed */
    CHECK_EQ_I64(join_src(&mp, 1, AH_SHARD_EMBED, -1), 0);
    CHECK_EQ_I64(src_of(&mp, 0, AH_SHARD_BLOCK, 3, 0), 1); /* the staying rank's own from the leaver, as before */
    const int64_t blk = ah_move_group_floats(&m, (ah_shard_group_t){AH_SHARD_BLOCK, 0}, 1),
                  emb = ah_move_group_floats(&m, (ah_shard_group_t){AH_SHARD_EMBED, -1}, 1),
                  head = ah_move_group_floats(&m, (ah_shard_group_t){AH_SHARD_HEAD, -1}, 1);
    /* old world: blocks 2, 3, the head to old rank 0 and again to it as the relay; new world: the whole model */
    CHECK_EQ_I64(mp.moved_floats, 2 * (2 * blk + head) + (4 * blk + emb + head));
    CHECK_EQ_I64(mp.kept_floats, 2 * blk + emb);
    /* host memory (check_host): the leaver packs its pieces twice (old rank 0's own load, the relay), old
     * rank 0 receives both and packs its own for the joiner, which receives the whole model */
    int64_t ob[2], nb[3];
    ah_move_plan_host_bytes(&m, &mp, &a, &b, false, ob, nb);
    CHECK_EQ_I64(ob[1], 8 * (2 * blk + head));
    CHECK_EQ_I64(ob[0], 4 * (2 * (2 * blk + head) + 2 * blk + emb));
    CHECK_EQ_I64(nb[2], 4 * (4 * blk + emb + head));
    ah_move_plan_free(&mp);
    const int none[2] = {-1, -1}; /* both leave: no rank stays to relay */
    CHECK(ah_move_plan_build_join(&m, &a, &b, none, &mp, &err) == AH_ERR_INVALID &&
          strstr(err.msg, "no rank of the old plan stays to relay embed") && strstr(err.msg, "the joining rank 0"),
          "%s", err.msg);
    ah_placement_free(&a);
    ah_placement_free(&b);
}

int main(void) {
    test_join();
    test_pipeline_change();
    test_replicas_share();
    test_tp_change();
    return ah_test_finish();
}
