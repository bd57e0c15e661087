/* The cluster of the exposure tests (tests/test_sim_exposure.c, test_agent_logic.c test_exposure): three
 * A100 and three H800 spot nodes of one GPU each, on which llama2-7b's plan is one pipeline over all six
 * (every piece on one node) and its baselines' plans keep every piece on two nodes. */
#ifndef AH_TESTS_EXPOSURE_CLUSTER_H
#define AH_TESTS_EXPOSURE_CLUSTER_H

static const char *const CLUSTER =
    "{\"nodes\": ["
    "{\"name\": \"s0\", \"gpu\": \"A100-80G\", \"count\": 1, \"spot\": true, \"usd_per_gpu_hour\": 1},"
    "{\"name\": \"s1\", \"gpu\": \"A100-80G\", \"count\": 1, \"spot\": true, \"usd_per_gpu_hour\": 1},"
    "{\"name\": \"s2\", \"gpu\": \"A100-80G\", \"count\": 1, \"spot\": true, \"usd_per_gpu_hour\": 1},"
    "{\"name\": \"h0\", \"gpu\": \"H800\", \"count\": 1, \"spot\": true, \"usd_per_gpu_hour\": 2},"
    "{\"name\": \"h1\", \"gpu\": \"H800\", \"count\": 1, \"spot\": true, \"usd_per_gpu_hour\": 2},"
    "{\"name\": \"h2\", \"gpu\": \"H800\", \"count\": 1, \"spot\": true, \"usd_per_gpu_hour\": 2}],"
    " \"network\": {\"inter_node_gb_s\": 12, \"cloud_gb_s\": 0.5}}";

#endif
