/* Dynamic loss scaling's decisions (runtime/loss_scale.h) under scripted series of overflows: the
 * scale sequence, step by step, against the apex/Megatron policy (halve on overflow, double after
 * `window` clean steps, clamped to [1, 2^24]); and the checks of the settings. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "runtime/loss_scale.h"

/* Runs `script` ('o' overflow, '.' clean) from initial/window; the scale after each step must be
 * want[i], and the return value must say whether it changed. */
static void run(const char *what, double initial, int64_t window, const char *script, const double *want) {
    ah_loss_scale_t ls;
    ah_loss_scale_init(&ls, initial, window);
    double prev = ah_loss_scale_value(&ls);
    int64_t overflows = 0;
    for (size_t i = 0; script[i]; i++) {
        const bool o = script[i] == 'o';
        overflows += o;
        const bool changed = ah_loss_scale_update(&ls, o);
        CHECK(ah_loss_scale_value(&ls) == want[i], "%s: step %zu (%c): scale %g, want %g", what, i, script[i],
              ah_loss_scale_value(&ls), want[i]);
        CHECK(changed == (ah_loss_scale_value(&ls) != prev), "%s: step %zu: changed flag", what, i);
        prev = ah_loss_scale_value(&ls);
    }
    CHECK_EQ_I64(ls.overflows, overflows);
}

int main(void) {
    /* overflows halve at once; growth waits for `window` clean steps since the last change */
    run("halve, then grow after 3 clean", 65536, 3, "oo.....o...",
        (const double[]){32768, 16384, 16384, 16384, 32768, 32768, 32768, 16384, 16384, 16384, 32768});
    run("grow every 3 clean", 1024, 3, "......", (const double[]){1024, 1024, 2048, 2048, 2048, 4096});
    /* an overflow in the middle of a window restarts it */
    run("overflow restarts the window", 1024, 3, ".o...", (const double[]){1024, 512, 512, 512, 1024});
    run("window 2", 1024, 2, "..o..o", (const double[]){1024, 2048, 1024, 1024, 2048, 1024});
    /* floor 1: a run of overflows stops halving at 1, each still counted (skipped) */
    run("floor at 1", 4, 1000, "oooo", (const double[]){2, 1, 1, 1});
    /* ceiling 2^24 */
    run("ceiling 2^24", 8388608, 1, "...", (const double[]){16777216, 16777216, 16777216});
    /* the default window: 1000 clean steps double the scale, 999 do not */
    {
        ah_loss_scale_t ls;
        ah_loss_scale_init(&ls, AH_LOSS_SCALE_INITIAL, AH_LOSS_SCALE_WINDOW);
        for (int i = 0; i < 999; i++) ah_loss_scale_update(&ls, false);
        CHECK(ah_loss_scale_value(&ls) == 65536, "999 clean steps: %g", ah_loss_scale_value(&ls));
        CHECK(ah_loss_scale_update(&ls, false) && ah_loss_scale_value(&ls) == 131072, "the 1000th doubles");
    }
    char why[160];
    CHECK(ah_loss_scale_check(65536, 1000, why, sizeof why), "defaults are valid");
    CHECK(!ah_loss_scale_check(1000, 1000, why, sizeof why) && strstr(why, "1000") && strstr(why, "power of two"),
          "not a power of two: %s", why);
    CHECK(!ah_loss_scale_check(0.5, 10, why, sizeof why) && strstr(why, "0.5"), "below 1: %s", why);
    CHECK(!ah_loss_scale_check(1 << 25, 10, why, sizeof why), "above 2^24");
    CHECK(!ah_loss_scale_check(1024, 0, why, sizeof why) && strstr(why, "window 0"), "window 0: %s", why);
    return ah_test_finish();
}
