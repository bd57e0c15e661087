/* Device emulation on a CPU rank: a compute phase that took dt seconds on this core is followed by
 * a sleep of (slowdown - 1) x dt, so the rank takes slowdown x dt in all without taking a core
 * from the other ranks. The trainer and the profiler both go through this one function, so a
 * profile sees exactly the emulation that training sees (docs/runtime.md, "Device emulation"). */
#ifndef AH_RUNTIME_EMULATE_H
#define AH_RUNTIME_EMULATE_H

void ah_emulate_stretch(double slowdown, double dt);

#endif
