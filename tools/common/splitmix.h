/*
 * splitmix.h: splitmix64 (Steele, Lea, Flood 2014), the tools' seeded PRNG: sipp-synth draws weights
 * from it, sipp-train shuffles its windows with it. A header of static functions, so each tool
 * stays one link of its own sources.
 */
#ifndef SIPP_TOOLS_SPLITMIX_H
#define SIPP_TOOLS_SPLITMIX_H

#include <stdint.h>

#define SPLITMIX_GAMMA UINT64_C(0x9E3779B97F4A7C15)
#define SPLITMIX_MUL1 UINT64_C(0xBF58476D1CE4E5B9)
#define SPLITMIX_MUL2 UINT64_C(0x94D049BB133111EB)
#define SPLITMIX_SHIFT1 30
#define SPLITMIX_SHIFT2 27
#define SPLITMIX_SHIFT3 31

/* The output function: a well-mixed 64-bit value of z. */
static inline uint64_t splitmix_mix(uint64_t z) {
    z = (z ^ (z >> SPLITMIX_SHIFT1)) * SPLITMIX_MUL1;
    z = (z ^ (z >> SPLITMIX_SHIFT2)) * SPLITMIX_MUL2;
    return z ^ (z >> SPLITMIX_SHIFT3);
}

/* The next draw of the stream whose state is *state. */
static inline uint64_t splitmix_next(uint64_t *state) { return splitmix_mix(*state += SPLITMIX_GAMMA); }

#endif
