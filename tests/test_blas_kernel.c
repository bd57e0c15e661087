/* The slow-OpenBLAS-kernel warning (kernels/cpu/blas_kernel.h), fed core names and CPU flags, so
 * it does not depend on the machine it runs on and never forces a kernel. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "kernels/cpu/blas_kernel.h"

/* The flags of the VM that met the Prescott kernel (an AVX-512 Xeon, "Intel(R) Xeon(R)
 * Processor"), of a Zen 3 (AVX2, no AVX-512), of an Ivy Bridge (AVX only) and of a Skylake-SP. */
static const char XEON_VM[] =
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss "
    "syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni "
    "pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c "
    "rdrand hypervisor lahf_lm abm 3dnowprefetch fsgsbase bmi1 hle avx2 smep bmi2 erms invpcid rtm avx512f "
    "avx512dq rdseed adx smap clflushopt clwb avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves "
    "arat avx512_bf16 avx512_vnni md_clear arch_capabilities";
static const char ZEN3[] = "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 sha_ni vaes";
static const char IVY[] = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c";
static const char SKX[] = "sse sse2 fma avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl";
static const char OLD[] = "fpu sse sse2 pni ssse3 sse4_1 sse4_2";

static void test_core_for_flags(void) {
    int tier = 99;
    CHECK(strcmp(ah_blas_core_for_flags(XEON_VM, &tier), "Cooperlake") == 0 && tier == AH_BLAS_AVX512,
          "AVX-512 with bf16: Cooperlake");
    CHECK(strcmp(ah_blas_core_for_flags(SKX, &tier), "SkylakeX") == 0 && tier == AH_BLAS_AVX512, "SkylakeX");
    CHECK(strcmp(ah_blas_core_for_flags(ZEN3, &tier), "Haswell") == 0 && tier == AH_BLAS_AVX2, "AVX2: Haswell");
    CHECK(strcmp(ah_blas_core_for_flags(IVY, &tier), "Sandybridge") == 0 && tier == AH_BLAS_AVX, "AVX");
    CHECK(ah_blas_core_for_flags(OLD, &tier) == NULL && tier == -1, "SSE only: nothing better to name");
    CHECK(ah_blas_core_for_flags(NULL, &tier) == NULL && tier == -1, "no flags line");
    /* whole words only: "avx512f" alone is not AVX-512 for OpenBLAS, "avx2x" is not avx2 */
    CHECK(strcmp(ah_blas_core_for_flags("avx avx2 fma avx512f", NULL), "Haswell") == 0, "avx512f alone");
    CHECK(strcmp(ah_blas_core_for_flags("avx avx2x fmax", NULL), "Sandybridge") == 0, "word boundaries");
    CHECK(ah_blas_core_tier("prescott") == AH_BLAS_SSE && ah_blas_core_tier("Zen") == AH_BLAS_AVX2 &&
              ah_blas_core_tier("COOPERLAKE") == AH_BLAS_AVX512 && ah_blas_core_tier("neoversen1") == -1,
          "core tiers");
}

static void test_advice(void) {
    char msg[512] = "";
    /* the case: Prescott chosen by OpenBLAS on the AVX-512 VM */
    CHECK(ah_blas_kernel_advice("Prescott", XEON_VM, NULL, msg, sizeof msg), "Prescott on AVX-512 warns");
    CHECK(strstr(msg, "Prescott") && strstr(msg, "OPENBLAS_CORETYPE=Cooperlake") && strstr(msg, "AVX-512"), "%s",
          msg);
    /* forced below the CPU: names the forcing value, and says to unset it */
    msg[0] = 0;
    CHECK(ah_blas_kernel_advice("Haswell", SKX, "Haswell", msg, sizeof msg), "forced Haswell on SkylakeX warns");
    CHECK(strstr(msg, "OPENBLAS_CORETYPE=Haswell") && strstr(msg, "unset OPENBLAS_CORETYPE") &&
              strstr(msg, "OPENBLAS_CORETYPE=SkylakeX"),
          "%s", msg);
    CHECK(ah_blas_kernel_advice("Sandybridge", ZEN3, "", msg, sizeof msg) && strstr(msg, "=Haswell"), "%s", msg);
    /* as good as the flags allow: silent */
    CHECK(!ah_blas_kernel_advice("Cooperlake", XEON_VM, NULL, msg, sizeof msg), "Cooperlake on its CPU");
    CHECK(!ah_blas_kernel_advice("SkylakeX", XEON_VM, NULL, msg, sizeof msg), "SkylakeX: the same tier");
    CHECK(!ah_blas_kernel_advice("Zen", ZEN3, NULL, msg, sizeof msg), "Zen on Zen 3");
    CHECK(!ah_blas_kernel_advice("Nehalem", OLD, NULL, msg, sizeof msg), "nothing better");
    CHECK(!ah_blas_kernel_advice("armv8", XEON_VM, NULL, msg, sizeof msg), "a core name it does not know");
    CHECK(!ah_blas_kernel_advice("Prescott", NULL, NULL, msg, sizeof msg), "no flags");
    /* this machine: whatever it says, it does not fail (and prints what it would warn) */
    if (ah_cpu_blas_advice(msg, sizeof msg)) printf("this machine: %s\n", msg);
}

int main(void) {
    test_core_for_flags();
    test_advice();
    return ah_test_finish();
}
