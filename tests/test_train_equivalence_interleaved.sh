# Plan equivalence (see test_train_equivalence.sh) under the interleaved 1F1B schedule (issue 35):
# tiny-gpt2 with 2 stages per device (il2: 4 stages on 2 devices), a job whose pipeline 0 is
# interleaved and pipeline 1 plain 1F1B (il-mixed), the same job with pipeline 1 zero-bubble
# (il-mixed+zero-bubble/1), 3 stages per device on a 6-block tiny-gpt2
# (il3, against its one-process run single6), and LLaMA (GQA) at TP 2 with recomputation and the
# vocabulary-parallel head, 2 stages per TP group (llama-il-tp2, against llama-single).
T=$(dirname "$0")
bash "$T/test_train_equivalence.sh" "$1" "$2" il2 il-mixed il-mixed+zero-bubble/1 || exit 1
REF=single6 bash "$T/test_train_equivalence.sh" "$1" "$2" il3 || exit 1
REF=llama-single bash "$T/test_train_equivalence.sh" "$1" "$2" llama-il-tp2
