/* Dynamic loss scaling for fp16 mixed precision: the decision logic, plain C, no device code.
 *
 * fp16 keeps 5 exponent bits: gradients under 2^-24 flush to zero and values over 65504 become
 * inf. So the loss (in practice its gradient, the first tensor of the backward) is multiplied by a
 * scale S before the backward, which lifts small gradients into range, and the gradients are
 * divided by S again before the norm, clipping and AdamW (fp32 master weights). A scale too large
 * overflows: an inf or nan in any gradient on any rank. That step is skipped (no update), and the
 * scale halved; after `window` consecutive clean steps it doubles again. This is the policy of
 * Micikevicius et al., "Mixed Precision Training" (ICLR 2018), as NVIDIA apex
 * (DynamicLossScaler: init 2^16, window 1000, factor 2, max 2^24) and Megatron-LM
 * (DynamicGradScaler: window 1000, min scale 1) implement it; bf16, with fp32's exponent range,
 * needs none.
 *
 * Where it acts (runtime/trainer.c, train_loop.c): the train loop owns one ah_loss_scale_t per
 * job, identical on every rank (every rank sees the same overflow verdict, so the sequences never
 * diverge); before a step it gives the trainer ah_loss_scale_value(), after it reports whether the
 * step overflowed with ah_loss_scale_update. An overflow is NOT the non-finite stop of
 * --skip-nonfinite (train_loop.h): that one is a non-finite loss (the forward is not scaled), or
 * a non-finite gradient in a run without loss scaling.
 *
 * The scale is not in checkpoints: a resumed run starts again from `initial` (it finds its level
 * again within a few overflows, each one skipped step).
 */
#ifndef AH_RUNTIME_LOSS_SCALE_H
#define AH_RUNTIME_LOSS_SCALE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AH_LOSS_SCALE_INITIAL 65536.0    /* 2^16, apex's default */
#define AH_LOSS_SCALE_WINDOW 1000        /* clean steps before the scale doubles (apex, Megatron) */
#define AH_LOSS_SCALE_MIN 1.0            /* never below 1 (Megatron's min_loss_scale) */
#define AH_LOSS_SCALE_MAX 16777216.0     /* 2^24, apex's max: larger buys no fp16 range */

typedef struct ah_loss_scale {
    double scale;    /* a power of two, so scaling and unscaling are exact in binary floating point */
    int64_t window;  /* clean steps before doubling, >= 1 */
    int64_t clean;   /* consecutive clean steps since the last change */
    int64_t overflows; /* steps skipped so far */
} ah_loss_scale_t;

/* initial: a power of two in [AH_LOSS_SCALE_MIN, AH_LOSS_SCALE_MAX]; window >= 1 (the caller
 * checked both: ah_loss_scale_check). */
void ah_loss_scale_init(ah_loss_scale_t *ls, double initial, int64_t window);
/* Whether initial is a power of two in [MIN, MAX] and window >= 1; on false, why in buf. */
bool ah_loss_scale_check(double initial, int64_t window, char *why, size_t why_cap);
double ah_loss_scale_value(const ah_loss_scale_t *ls);
/* After a step: overflow halves the scale (not below MIN) and restarts the window; a clean step
 * counts towards the window, and the window-th doubles the scale (not above MAX). Returns whether
 * the scale changed. */
bool ah_loss_scale_update(ah_loss_scale_t *ls, bool overflow);

#endif
