/* Shard placement (who holds which shard, the lowest holder per node and in the job, survival)
 * on hand-built plans (one with context parallelism), and the save-at-notice rule at its boundaries (ckpt/placement.h,
 * ckpt/policy.h). Pure: no MPI, no files. */
#include <string.h>

#include "ckpt/placement.h"
#include "ckpt/policy.h"
#include "harness.h"

/* Two nodes, TP 2, 4 blocks. Pipeline 0 on node 0: stage 0 blocks [0, 2) on GPUs 0-1 (ranks 0,
 * 1), stage 1 blocks [2, 4) on GPUs 2-3 (ranks 2, 3). Pipeline 1 on node 1: one stage, every
 * block, GPUs 0-1 (ranks 4, 5). */
static void test_placement(void) {
    ah_stage_t p0[2] = {{.first = 0, .last = 2, .devices = {{0, 0}, {0, 1}}},
                        {.first = 2, .last = 4, .devices = {{0, 2}, {0, 3}}}};
    ah_stage_t p1[1] = {{.first = 0, .last = 4, .devices = {{1, 0}, {1, 1}}}};
    ah_pipeline_t pls[2] = {{.n_stages = 2, .stages = p0}, {.n_stages = 1, .stages = p1}};
    ah_plan_t plan = {.tp = 2, .n_pipelines = 2, .pipelines = pls};
    plan.model.n_layer = 4;
    plan.cluster.n_nodes = 2;
    ah_placement_t pl;
    ah_error_t err;
    CHECK(ah_placement_build(&plan, NULL, 0, &pl, &err) == AH_OK, "%s", err.msg);
    CHECK(pl.n_ranks == 6 && pl.n_nodes == 2 && pl.max_groups == 6, "6 ranks on 2 nodes, room for 6 groups");
    CHECK(pl.node_leader[0] == 0 && pl.node_leader[1] == 4, "leaders %d, %d", pl.node_leader[0], pl.node_leader[1]);
    CHECK(pl.ranks[3].node == 0 && pl.ranks[3].index == 3 && pl.ranks[3].tp_index == 1 && pl.ranks[3].head &&
              !pl.ranks[3].embed, "rank 3: node 0 GPU 3, TP index 1, a last stage");

    ah_shard_group_t g[6];
    CHECK_EQ_I64(ah_placement_groups(&pl, 0, false, g), 3); /* embed, blocks 0-1 */
    CHECK(g[0].kind == AH_SHARD_EMBED && g[1].kind == AH_SHARD_BLOCK && g[1].layer == 0 && g[2].layer == 1,
          "rank 0 writes embed, block 0, block 1");
    CHECK_EQ_I64(ah_placement_groups(&pl, 2, false, g), 3); /* blocks 2-3, head */
    CHECK_EQ_I64(ah_placement_groups(&pl, 2, true, g), 4);  /* + the tied embedding to load */
    CHECK(g[0].kind == AH_SHARD_EMBED && g[3].kind == AH_SHARD_HEAD, "a last stage loads the embedding");
    CHECK_EQ_I64(ah_placement_groups(&pl, 4, false, g), 6);

    const ah_shard_group_t b3 = {AH_SHARD_BLOCK, 3}, emb = {AH_SHARD_EMBED, -1}, head = {AH_SHARD_HEAD, -1};
    CHECK(ah_placement_holds(&pl, 3, b3, 1) && !ah_placement_holds(&pl, 3, b3, 0) && !ah_placement_holds(&pl, 1, b3, 1),
          "block 3 at TP index 1: rank 3, not at index 0, not rank 1");
    CHECK_EQ_I64(ah_placement_lowest_holder(&pl, b3, 1, -1), 3);
    CHECK_EQ_I64(ah_placement_lowest_holder(&pl, b3, 1, 1), 5);
    CHECK_EQ_I64(ah_placement_lowest_holder(&pl, emb, 0, -1), 0);
    CHECK_EQ_I64(ah_placement_lowest_holder(&pl, head, 0, 1), 4);

    const bool only1[2] = {false, true}, only0[2] = {true, false}, none[2] = {false, false};
    CHECK(ah_placement_survives(&pl, (ah_shard_group_t){AH_SHARD_BLOCK, 1}, 0, only1), "block 1 on node 1");
    CHECK(ah_placement_survives(&pl, head, 1, only0), "the head on node 0 (rank 3)");
    CHECK(!ah_placement_survives(&pl, head, 1, none), "nothing survives with no node");
    ah_placement_free(&pl);

    /* A sub-cluster's plan on a 3-node cluster: plan node 0 is node 2, plan node 1 is node 0. */
    const int map[2] = {2, 0};
    CHECK(ah_placement_build(&plan, map, 3, &pl, &err) == AH_OK, "%s", err.msg);
    CHECK(pl.n_nodes == 3 && pl.ranks[0].node == 2 && pl.ranks[4].node == 0, "nodes mapped");
    CHECK(pl.node_leader[2] == 0 && pl.node_leader[0] == 4 && pl.node_leader[1] == -1, "leaders by mapped node");
    ah_placement_free(&pl);

    /* (2 + L) x T names: the vocabulary-parallel embedding and the (untied) head are split too. */
    char names[(2 + 4) * 2][AH_CKPT_NAME_MAX];
    CHECK_EQ_I64(ah_placement_model_names(&plan.model, 2, names), 12);
    CHECK(strcmp(names[1], "embed.tp2-1.safetensors") == 0 && strcmp(names[3], "block-000.tp2-1.safetensors") == 0 &&
              strcmp(names[11], "head.tp2-1.safetensors") == 0, "%s, %s, %s", names[1], names[3], names[11]);
    /* A tied head is the final norm only, which no TP rank splits: piece 0 of it. */
    plan.model.tied = true;
    CHECK_EQ_I64(ah_placement_model_names(&plan.model, 2, names), 11);
    CHECK(strcmp(names[10], "head.tp2-0.safetensors") == 0, "%s", names[10]);
}

/* Context parallelism: TP 2, 2 blocks. Pipeline 0 at CP 2, one stage on node 0's GPUs 0-3 (ranks
 * 0-3: CP rank 0 is TP ranks 0, 1; CP rank 1 is TP ranks 0, 1); pipeline 1 at CP 2 split over nodes
 * 0 (GPUs 4-5, CP rank 0) and 1 (GPUs 0-1, CP rank 1): ranks 4-7. Every CP rank holds the stage's
 * weights at its TP index; the lowest holder writes, so CP rank 0's ranks on node 0, and on node 1
 * pipeline 1's CP rank 1 (its node's only holder). */
static void test_placement_cp(void) {
    ah_stage_t p0[1] = {{.first = 0, .last = 2, .devices = {{0, 0}, {0, 1}, {0, 2}, {0, 3}}}};
    ah_stage_t p1[1] = {{.first = 0, .last = 2, .devices = {{0, 4}, {0, 5}, {1, 0}, {1, 1}}}};
    ah_pipeline_t pls[2] = {{.n_stages = 1, .cp = 2, .stages = p0}, {.n_stages = 1, .cp = 2, .stages = p1}};
    ah_plan_t plan = {.tp = 2, .n_pipelines = 2, .pipelines = pls};
    plan.model.n_layer = 2;
    plan.cluster.n_nodes = 2;
    ah_placement_t pl;
    ah_error_t err;
    CHECK(ah_placement_build(&plan, NULL, 0, &pl, &err) == AH_OK, "%s", err.msg);
    CHECK(pl.n_ranks == 8 && pl.node_leader[0] == 0 && pl.node_leader[1] == 6, "8 ranks; leaders %d, %d",
          pl.node_leader[0], pl.node_leader[1]);
    CHECK(pl.ranks[3].node == 0 && pl.ranks[3].index == 3 && pl.ranks[3].tp_index == 1 && pl.ranks[3].head,
          "rank 3 (CP rank 1, TP rank 1): node 0 GPU 3, TP index 1, the last stage");
    CHECK(pl.ranks[6].node == 1 && pl.ranks[6].index == 0 && pl.ranks[6].tp_index == 0, "rank 6: node 1 GPU 0");
    const ah_shard_group_t b1 = {AH_SHARD_BLOCK, 1};
    ah_shard_group_t g[4];
    CHECK_EQ_I64(ah_placement_groups(&pl, 2, false, g), 4); /* a CP rank holds the stage's groups too */
    CHECK(ah_placement_holds(&pl, 2, b1, 0) && ah_placement_holds(&pl, 3, b1, 1) && !ah_placement_holds(&pl, 3, b1, 0),
          "CP rank 1 holds block 1 at its TP index");
    CHECK_EQ_I64(ah_placement_lowest_holder(&pl, b1, 1, 0), 1); /* CP rank 0 writes on node 0 */
    CHECK_EQ_I64(ah_placement_lowest_holder(&pl, b1, 1, 1), 7); /* node 1's copy */
    const bool only1[2] = {false, true};
    CHECK(ah_placement_survives(&pl, b1, 0, only1), "block 1 survives on node 1 (pipeline 1's CP rank 1)");
    ah_placement_free(&pl);
}

static void test_notice_rule(void) {
    /* Fits: elapsed + 1.5 x save + 0.5 <= grace. */
    CHECK(ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.elapsed_s = 5, .grace_s = 20.5, .save_s = 10, .redo_s = -1}),
          "5 + 15.5 fits 20.5");
    CHECK(!ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.elapsed_s = 5, .grace_s = 20.4, .save_s = 10, .redo_s = -1}),
          "5 + 15.5 does not fit 20.4");
    /* No save yet: one second assumed. */
    CHECK(ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.elapsed_s = 28, .grace_s = 30, .save_s = -1, .redo_s = 0}),
          "28 + 2 fits 30");
    CHECK(!ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.elapsed_s = 28.5, .grace_s = 30, .save_s = -1, .redo_s = 0}),
          "28.5 + 2 does not");
    /* It pays only when it takes less than redoing the training, unless every node got the notice. */
    CHECK(!ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.grace_s = 30, .save_s = 2, .redo_s = 1}), "redo is cheaper");
    CHECK(ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.grace_s = 30, .save_s = 2, .redo_s = 3}), "the save is cheaper");
    CHECK(ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.grace_s = 30, .save_s = 2, .redo_s = 1, .every_node = true}),
          "a join always saves");
    CHECK(!ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.grace_s = 0, .save_s = 0, .redo_s = -1}), "grace 0 never saves");
    /* The memory tier: what commits the step is the snapshot + replication (memory_s), not the disks. */
    CHECK(ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.grace_s = 120, .save_s = 100, .redo_s = -1, .memory = true,
                                                     .memory_s = 30}),
          "1.5 x 30 + 0.5 fits 120 where the disks' 100 s does not");
    CHECK(!ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.grace_s = 120, .save_s = 100, .redo_s = -1, .memory_s = 30}),
          "without the memory tier the disks' 100 s rules");
    CHECK(!ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.grace_s = 120, .save_s = 100, .redo_s = -1, .memory = true,
                                                      .memory_s = -1}),
          "memory_s unknown: the disks' save_s");
    CHECK(!ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.grace_s = 120, .save_s = 5, .redo_s = 2, .memory = true,
                                                      .memory_s = 3}),
          "redo 2 s is cheaper than the 3 s to memory");
    CHECK(ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.grace_s = 120, .save_s = 5, .redo_s = 4, .memory = true,
                                                     .memory_s = 3}),
          "3 s to memory is cheaper than redo 4 s (the disks' 5 s would not be)");
    /* Memory first only when it commits sooner than the disks (or either is unknown). */
    CHECK(!ah_ckpt_notice_memory_first(&(ah_ckpt_notice_t){.save_s = 20, .memory = true, .memory_s = 60}),
          "memory 60 s, disks 20 s: the disks first");
    CHECK(!ah_ckpt_save_at_notice(&(ah_ckpt_notice_t){.grace_s = 40, .save_s = 30, .redo_s = -1, .memory = true,
                                                      .memory_s = 60}),
          "the disks' 30 s rules then, and does not fit 40");
    CHECK(ah_ckpt_notice_memory_first(&(ah_ckpt_notice_t){.save_s = 20, .memory = true, .memory_s = 5}) &&
              ah_ckpt_notice_memory_first(&(ah_ckpt_notice_t){.save_s = -1, .memory = true, .memory_s = 5}) &&
              ah_ckpt_notice_memory_first(&(ah_ckpt_notice_t){.save_s = 20, .memory = true, .memory_s = -1}) &&
              !ah_ckpt_notice_memory_first(&(ah_ckpt_notice_t){.save_s = 20, .memory_s = 5}),
          "memory first: sooner, or unknown; never without the tier");
    /* The handover: taken when it commits sooner than the disks plus the relaunch's fetch, but not
     * where it misses the grace period the disks' save fits (before session 18 it was, and the
     * notice then saved nothing: 5 + 1.5 x 100 > 120 while 5 + 1.5 x 40 fits). */
    const ah_ckpt_notice_t slow = {.elapsed_s = 5, .grace_s = 120, .save_s = 40, .redo_s = -1, .memory = true,
                                   .memory_s = 100, .handover = true, .fetch_s = 90};
    CHECK(!ah_ckpt_notice_handover(&slow) && ah_ckpt_save_at_notice(&slow), "the disks' 40 s, not the handover's 100 s");
    const ah_ckpt_notice_t neither = {.elapsed_s = 5, .grace_s = 120, .save_s = 90, .redo_s = -1, .memory = true,
                                      .memory_s = 100, .handover = true, .fetch_s = 90};
    CHECK(ah_ckpt_notice_handover(&neither) && !ah_ckpt_save_at_notice(&neither), "neither fits: no save");
    const ah_ckpt_notice_t quick = {.elapsed_s = 5, .grace_s = 120, .save_s = 40, .redo_s = -1, .memory = true,
                                    .memory_s = 60, .handover = true, .fetch_s = 30};
    CHECK(ah_ckpt_notice_handover(&quick) && ah_ckpt_save_at_notice(&quick), "the handover's 60 s fits and beats 40 + 30");
    CHECK(strcmp(ah_ckpt_tier_name(AH_TIER_LOCAL), "local") == 0 && strcmp(ah_ckpt_tier_name(AH_TIER_PEER), "peer") == 0 &&
              strcmp(ah_ckpt_tier_name(AH_TIER_CLOUD), "cloud") == 0 && strcmp(ah_ckpt_tier_name(AH_TIER_COUNT), "?") == 0,
          "tier names");
}

int main(void) {
    test_placement();
    test_placement_cp();
    test_notice_rule();
    return ah_test_finish();
}
