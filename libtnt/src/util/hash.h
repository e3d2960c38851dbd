/*
 * 64-bit FNV-1a, for hashing that must give the same answer in every
 * process of a job: the job id in the shared-memory segment name, hostnames
 * in the node table, and the fusion plan digest that ranks compare. Not for
 * anything an adversary chooses.
 */
#ifndef TNT_UTIL_HASH_H
#define TNT_UTIL_HASH_H

#include <stdint.h>

#define TNT_FNV1A_INIT  UINT64_C(0xcbf29ce484222325)
#define TNT_FNV1A_PRIME UINT64_C(0x100000001b3)

static inline uint64_t tnt_fnv1a_byte(uint64_t hash, unsigned char byte)
{
    return (hash ^ byte) * TNT_FNV1A_PRIME;
}

/* Hash of a NUL-terminated string. */
static inline uint64_t tnt_fnv1a_string(const char *s)
{
    uint64_t hash = TNT_FNV1A_INIT;
    for (; *s != '\0'; s++) {
        hash = tnt_fnv1a_byte(hash, (unsigned char)*s);
    }
    return hash;
}

/* Folds value into hash, least significant byte first, so that the result
 * does not depend on the machine's byte order. */
static inline uint64_t tnt_fnv1a_u64(uint64_t hash, uint64_t value)
{
    for (int i = 0; i < 8; i++) {
        hash = tnt_fnv1a_byte(hash, (unsigned char)(value >> (8 * i)));
    }
    return hash;
}

#endif
