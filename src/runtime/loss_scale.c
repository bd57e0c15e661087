/* Dynamic loss scaling's decision logic (loss_scale.h). */
#include "runtime/loss_scale.h"

#include <math.h>
#include <stdio.h>

void ah_loss_scale_init(ah_loss_scale_t *ls, double initial, int64_t window) {
    *ls = (ah_loss_scale_t){.scale = initial, .window = window};
}

bool ah_loss_scale_check(double initial, int64_t window, char *why, size_t why_cap) {
    int e;
    const bool pow2 = isfinite(initial) && frexp(initial, &e) == 0.5;
    if (!pow2 || initial < AH_LOSS_SCALE_MIN || initial > AH_LOSS_SCALE_MAX) {
        snprintf(why, why_cap, "initial loss scale %g is not a power of two from %g to %g (2^0 .. 2^24)", initial,
                 AH_LOSS_SCALE_MIN, AH_LOSS_SCALE_MAX);
        return false;
    }
    if (window < 1) {
        snprintf(why, why_cap, "loss-scale window %lld: the clean steps before the scale doubles must be at least 1",
                 (long long)window);
        return false;
    }
    return true;
}

double ah_loss_scale_value(const ah_loss_scale_t *ls) { return ls->scale; }

bool ah_loss_scale_update(ah_loss_scale_t *ls, bool overflow) {
    const double before = ls->scale;
    if (overflow) {
        ls->overflows++;
        ls->clean = 0;
        ls->scale = fmax(ls->scale / 2, AH_LOSS_SCALE_MIN);
    } else if (++ls->clean >= ls->window) {
        ls->clean = 0;
        ls->scale = fmin(ls->scale * 2, AH_LOSS_SCALE_MAX);
    }
    return ls->scale != before;
}
