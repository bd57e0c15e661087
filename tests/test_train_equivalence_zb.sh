# Zero-bubble (ZB-H1, issue 35) trains the same model as one process: test_train_equivalence.sh's
# checks (20 losses within 1e-4 relative, every weight within 1e-5 after step 1) on GPT-2's 4-stage
# pipeline, asymmetric pipelines where one runs zero-bubble beside two 1F1B ones, TP 2 with a
# recomputing stage, and LLaMA (GQA) with TP 2 x PP 2, with recomputation, and with two of its
# asymmetric pipelines zero-bubble and the optimizer sharded unevenly.
# Under AH_CLUSTER_SHORT=1 (CI's sanitizer stage): two plans that between them still have TP 2,
# recomputation, GQA, the sharded optimizer and zero-bubble beside 1F1B in one job.
set -e
here=$(dirname "$0")
gpt2=(pp4+zero-bubble asym+zero-bubble/2 tp2-asym+zero-bubble)
llama=(llama-tp2-pp2+zero-bubble llama-pp2-recompute+zero-bubble llama-asym+zero-bubble/1,2:uneven)
if [ "${AH_CLUSTER_SHORT:-0}" = 1 ]; then
    gpt2=(tp2-asym+zero-bubble/1)
    llama=(llama-asym+zero-bubble/1,2:uneven)
fi
bash "$here/test_train_equivalence.sh" "$1" "$2" "${gpt2[@]}"
REF=llama-single exec bash "$here/test_train_equivalence.sh" "$1" "$2" "${llama[@]}"
