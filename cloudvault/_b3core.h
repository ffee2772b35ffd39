/* The BLAKE3 compression core both native extensions share (_b3tree.c: one object's tree with its piece values;
 * _plainruns.c: many small members at once), written once here and included by each: the constants, the portable
 * compression function and chunk / parent / tree-merge steps above it, and the AVX-512 and AVX2 rounds with the
 * transposes that load sixteen or eight inputs into lanes and store their chaining values out. All static: each
 * extension compiles its own copy of what it uses and exports nothing of it.
 *
 * Written from the BLAKE3 specification (the BLAKE3 paper, sections 2.1-2.6); checked against the `blake3` package
 * through both extensions (tests/unit/test_b3tree.py, tests/unit/test_native_plainruns.py), every SIMD path.
 * Include it after <Python.h> (Python.h comes first in a C extension).
 */
#ifndef CLOUDVAULT_B3CORE_H
#define CLOUDVAULT_B3CORE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86_SIMD_BUILD 1
#endif

#define BLOCK_LEN 64
#define CHUNK_LEN 1024
#define CV_LEN 32

enum { CHUNK_START = 1, CHUNK_END = 2, PARENT = 4, ROOT = 8 };

static const uint32_t IV[8] = {0x6A09E667u, 0xBB67AE85u, 0x3C6EF372u, 0xA54FF53Au,
                               0x510E527Fu, 0x9B05688Cu, 0x1F83D9ABu, 0x5BE0CD19u};
/* Round r reads message word SCHEDULE[r][i]: the permutation (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
 * applied r times (tests/unit/test_b3tree.py derives it again). Constant, so the unrolled rounds index registers. */
static const uint8_t SCHEDULE[7][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8},
    {3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1},
    {10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6},
    {12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4},
    {9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7},
    {11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13},
};

static inline uint32_t load32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline void store32(uint8_t *p, uint32_t w) {
    p[0] = (uint8_t)w; p[1] = (uint8_t)(w >> 8); p[2] = (uint8_t)(w >> 16); p[3] = (uint8_t)(w >> 24);
}

static inline uint32_t rotr(uint32_t w, int c) { return (w >> c) | (w << (32 - c)); }

/* ---- the portable compression function ---- */

/* One round: the columns, then the diagonals, each G mixing two message words; seven rounds, written out so every
 * SCHEDULE index is a constant. */
#define ROUND(g, r)                                                 \
    do {                                                            \
        const uint8_t *s_ = SCHEDULE[r];                            \
        g(0, 4, 8, 12, m[s_[0]], m[s_[1]]);                         \
        g(1, 5, 9, 13, m[s_[2]], m[s_[3]]);                         \
        g(2, 6, 10, 14, m[s_[4]], m[s_[5]]);                        \
        g(3, 7, 11, 15, m[s_[6]], m[s_[7]]);                        \
        g(0, 5, 10, 15, m[s_[8]], m[s_[9]]);                        \
        g(1, 6, 11, 12, m[s_[10]], m[s_[11]]);                      \
        g(2, 7, 8, 13, m[s_[12]], m[s_[13]]);                       \
        g(3, 4, 9, 14, m[s_[14]], m[s_[15]]);                       \
    } while (0)
#define ROUNDS(g) \
    do { ROUND(g, 0); ROUND(g, 1); ROUND(g, 2); ROUND(g, 3); ROUND(g, 4); ROUND(g, 5); ROUND(g, 6); } while (0)

/* BLAKE3's G, mixing two message words into four state words, written once for every width: add, xor and rotate
 * are the scalar operators here and the vector instructions for the SIMD lanes (GV, GV8). */
#define G_WITH(add_, xor_, ror_, a, b, c, d, x, y)                             \
    do {                                                                       \
        v[a] = add_(add_(v[a], v[b]), (x)); v[d] = ror_(xor_(v[d], v[a]), 16); \
        v[c] = add_(v[c], v[d]);           v[b] = ror_(xor_(v[b], v[c]), 12);  \
        v[a] = add_(add_(v[a], v[b]), (y)); v[d] = ror_(xor_(v[d], v[a]), 8);  \
        v[c] = add_(v[c], v[d]);           v[b] = ror_(xor_(v[b], v[c]), 7);   \
    } while (0)
#define ADD32(p, q) ((p) + (q))
#define XOR32(p, q) ((p) ^ (q))
#define G(a, b, c, d, x, y) G_WITH(ADD32, XOR32, rotr, a, b, c, d, x, y)

/* The first 8 words of the compression's output: the next chaining value (or, with ROOT, the hash's words). */
static void compress(const uint32_t cv[8], const uint8_t block[BLOCK_LEN], uint32_t block_len, uint64_t counter,
                     uint32_t flags, uint32_t out[8]) {
    uint32_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = load32(block + 4 * i);
    for (int i = 0; i < 8; i++) v[i] = cv[i];
    v[8] = IV[0]; v[9] = IV[1]; v[10] = IV[2]; v[11] = IV[3];
    v[12] = (uint32_t)counter; v[13] = (uint32_t)(counter >> 32); v[14] = block_len; v[15] = flags;
    ROUNDS(G);
    for (int i = 0; i < 8; i++) out[i] = v[i] ^ v[i + 8];
}

static void words_out(const uint32_t w[8], uint8_t out[CV_LEN]) {
    for (int i = 0; i < 8; i++) store32(out + 4 * i, w[i]);
}

/* The chaining value of one chunk of len bytes (0..CHUNK_LEN) at chunk counter `counter`; with ROOT in `root`, the
 * hash of an input that is this one chunk. */
static void chunk_cv(const uint8_t *in, size_t len, uint64_t counter, uint32_t root, uint8_t out[CV_LEN]) {
    uint32_t cv[8], next[8];
    uint8_t block[BLOCK_LEN];
    memcpy(cv, IV, sizeof cv);
    size_t blocks = len == 0 ? 1 : (len + BLOCK_LEN - 1) / BLOCK_LEN;
    for (size_t b = 0; b < blocks; b++) {
        size_t at = b * BLOCK_LEN, n = len - at < BLOCK_LEN ? len - at : BLOCK_LEN;
        memset(block, 0, BLOCK_LEN);
        if (n) memcpy(block, in + at, n);
        uint32_t flags = (b == 0 ? CHUNK_START : 0) | (b == blocks - 1 ? CHUNK_END | root : 0);
        compress(cv, block, (uint32_t)n, root && b == blocks - 1 ? 0 : counter, flags, next);
        memcpy(cv, next, sizeof cv);
    }
    words_out(cv, out);
}

static void parent_cv(const uint8_t left[CV_LEN], const uint8_t right[CV_LEN], uint32_t root, uint8_t out[CV_LEN]) {
    uint8_t block[BLOCK_LEN];
    uint32_t next[8];
    memcpy(block, left, CV_LEN);
    memcpy(block + CV_LEN, right, CV_LEN);
    compress(IV, block, BLOCK_LEN, 0, PARENT | root, next);
    words_out(next, out);
}

/* The left-balanced tree over n >= 1 chaining values (each a complete subtree of equal power-of-two size but the
 * last): the left part holds the largest power of two below n. ROOT only on the top node. */
static void merge(const uint8_t *cvs, size_t n, uint32_t root, uint8_t out[CV_LEN]) {
    if (n == 1) {
        memcpy(out, cvs, CV_LEN);
        return;
    }
    size_t left = 1;
    while (left * 2 < n) left *= 2;
    uint8_t l[CV_LEN], r[CV_LEN];
    merge(cvs, left, 0, l);
    merge(cvs + left * CV_LEN, n - left, 0, r);
    parent_cv(l, r, root, out);
}

/* ---- sixteen lanes at once: AVX-512 (the rounds, and the transposes in and out) ---- */

#ifdef HAVE_X86_SIMD_BUILD
#define AVX512 __attribute__((target("avx512f")))

#define GV(a, b, c, d, x, y) G_WITH(_mm512_add_epi32, _mm512_xor_si512, _mm512_ror_epi32, a, b, c, d, x, y)

/* Sixteen rows of sixteen words in, sixteen columns out: m[w] holds word w of every row. */
AVX512 static inline void transpose16(__m512i r[16], __m512i m[16]) {
    __m512i a[16], b[16];
    for (int i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 4; g++) { /* rows 4g..4g+3: b[4g + j] holds word 4k + j of those rows in 128-bit lane k */
        __m512i *x = a + 4 * g;
        b[4 * g + 0] = _mm512_unpacklo_epi64(x[0], x[2]);
        b[4 * g + 1] = _mm512_unpackhi_epi64(x[0], x[2]);
        b[4 * g + 2] = _mm512_unpacklo_epi64(x[1], x[3]);
        b[4 * g + 3] = _mm512_unpackhi_epi64(x[1], x[3]);
    }
    for (int j = 0; j < 4; j++) { /* a 4x4 transpose of 128-bit lanes across the four row groups */
        __m512i c0 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0x88), c1 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0xdd);
        __m512i c2 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0x88);
        __m512i c3 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0xdd);
        m[j] = _mm512_shuffle_i32x4(c0, c2, 0x88);
        m[8 + j] = _mm512_shuffle_i32x4(c0, c2, 0xdd);
        m[4 + j] = _mm512_shuffle_i32x4(c1, c3, 0x88);
        m[12 + j] = _mm512_shuffle_i32x4(c1, c3, 0xdd);
    }
}

/* The sixteen chaining values out, 32 bytes each in input order: h[i] holds word i of every input. Words 0-3 and
 * 4-7 of inputs 4k..4k+3 are gathered into 128-bit lane k of b[0..3] and b[4..7], then stored a lane at a time. */
#define STORE_LANE(k)                                                                                     \
    for (int r = 0; r < 4; r++)                                                                           \
        for (int half = 0; half < 2; half++)                                                              \
            _mm_storeu_si128((__m128i *)(out + (4 * (k) + r) * CV_LEN + 16 * half),                       \
                             _mm512_extracti32x4_epi32(b[4 * half + r], (k)))

AVX512 static inline void store16(const __m512i h[8], uint8_t *out) {
    __m512i a[8], b[8];
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm512_unpacklo_epi32(h[2 * i], h[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(h[2 * i], h[2 * i + 1]);
    }
    for (int half = 0; half < 2; half++) {
        const __m512i *x = a + 4 * half;
        b[4 * half + 0] = _mm512_unpacklo_epi64(x[0], x[2]);
        b[4 * half + 1] = _mm512_unpackhi_epi64(x[0], x[2]);
        b[4 * half + 2] = _mm512_unpacklo_epi64(x[1], x[3]);
        b[4 * half + 3] = _mm512_unpackhi_epi64(x[1], x[3]);
    }
    STORE_LANE(0);
    STORE_LANE(1);
    STORE_LANE(2);
    STORE_LANE(3);
}

/* ---- eight lanes at once: AVX2 (the same rounds on 256-bit vectors; no rotate instruction: bytes shuffled for 16 and 8,
 * shifts for 12 and 7) ---- */

#define AVX2 __attribute__((target("avx2")))

#define ROR8V(x, c)                                                                                     \
    ((c) == 16 ? _mm256_shuffle_epi8((x), rot16)                                                        \
     : (c) == 8 ? _mm256_shuffle_epi8((x), rot8)                                                        \
                : _mm256_or_si256(_mm256_srli_epi32((x), (c)), _mm256_slli_epi32((x), 32 - (c))))

#define GV8(a, b, c, d, x, y) G_WITH(_mm256_add_epi32, _mm256_xor_si256, ROR8V, a, b, c, d, x, y)

/* Eight rows of eight words in, eight columns out (m[w] holds word w of every row): 32-bit, then 64-bit unpacks
 * within 128-bit lanes, then the lanes of rows 0-3 and 4-7 paired. */
AVX2 static inline void transpose8(const __m256i r[8], __m256i m[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 2; g++) { /* rows 4g..4g+3: u[4g + j] holds word 4k + j of those rows in lane k */
        const __m256i *x = t + 4 * g;
        u[4 * g + 0] = _mm256_unpacklo_epi64(x[0], x[2]);
        u[4 * g + 1] = _mm256_unpackhi_epi64(x[0], x[2]);
        u[4 * g + 2] = _mm256_unpacklo_epi64(x[1], x[3]);
        u[4 * g + 3] = _mm256_unpackhi_epi64(x[1], x[3]);
    }
    for (int j = 0; j < 4; j++) {
        m[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        m[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}
#endif /* HAVE_X86_SIMD_BUILD */

/* The widest path this CPU runs, unless CLOUDVAULT_B3TREE_SIMD ("avx2" or "portable") asks a narrower one (tests
 * compare the paths): "avx512", "avx2" or "portable". Both extensions pick their lanes by it. */
static const char *simd_path(void) {
    const char *asked = getenv("CLOUDVAULT_B3TREE_SIMD");
#ifdef HAVE_X86_SIMD_BUILD
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && !asked) return "avx512";
    if (__builtin_cpu_supports("avx2") && !(asked && strcmp(asked, "avx2"))) return "avx2";
#endif
    (void)asked;
    return "portable";
}

#endif /* CLOUDVAULT_B3CORE_H */
