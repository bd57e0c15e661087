/* __half as src/cuda_emu serves it: cuda_emu/half.h. */
#include "cuda_emu/half.h"
