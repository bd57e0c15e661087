# Plan equivalence (see test_train_equivalence.sh) under the interleaved 1F1B schedule (issue 35):
# tiny-gpt2 with 2 stages per device (il2: 4 stages on 2 devices), a job whose pipeline 0 is
# interleaved and pipeline 1 plain 1F1B (il-mixed), the same job with pipeline 1 zero-bubble
# (il-mixed+zero-bubble/1), il-mixed with the optimizer sharded unevenly over each data-parallel
# group (il-mixed:uneven: an interleaved device is in several blocks groups), P = 3 devices with 2
# stages each, one of them recomputing, beside a one-device 1F1B pipeline (il-p3, a 6-block
# tiny-gpt2), 3 stages per device on a 6-block tiny-gpt2
# (il3, against its one-process run single6), and LLaMA (GQA) at TP 2 with recomputation and the
# vocabulary-parallel head, 2 stages per TP group (llama-il-tp2, against llama-single).
# Every p2p message is sent by rendezvous (Open MPI's shared-memory eager limit at 256 bytes), so a
# send completes only once its receive is posted, as a large message's does.
# Under AH_CLUSTER_SHORT=1 (CI's sanitizer stage): il-mixed:uneven and il3 only.
export OMPI_MCA_btl_vader_eager_limit=256
T=$(dirname "$0")
if [ "${AH_CLUSTER_SHORT:-0}" = 1 ]; then
    bash "$T/test_train_equivalence.sh" "$1" "$2" il-mixed:uneven || exit 1
    REF=single6 exec bash "$T/test_train_equivalence.sh" "$1" "$2" il3
fi
bash "$T/test_train_equivalence.sh" "$1" "$2" il2 il-mixed il-mixed+zero-bubble/1 il-mixed:uneven || exit 1
REF=single6 bash "$T/test_train_equivalence.sh" "$1" "$2" il3 il-p3 || exit 1
REF=llama-single bash "$T/test_train_equivalence.sh" "$1" "$2" llama-il-tp2
