/* BLAKE3 in one pass with piece hashes: the whole object's BLAKE3 (as b3sum prints it) and, beside it, the chaining
 * value of each 1 MiB piece, the subtree of 1024 chunks the BLAKE3 tree already holds at that offset. Hashing the
 * pieces apart costs a second pass over every byte; here they are the tree's own inner nodes, so they come free.
 *
 * Written from the BLAKE3 specification (the BLAKE3 paper, sections 2.1-2.6): compression function, chunk chaining
 * with counters, the left-balanced binary tree of parent nodes, the ROOT flag on the last compression only.
 * Full chunks and the parents inside a piece are compressed sixteen at a time with AVX-512, or eight with AVX2,
 * where the CPU has it; the rest (partial chunks, the parents above pieces, the root) by the portable compression
 * function. The compression itself (constants, rounds, the SIMD transposes) is _b3core.h's, shared with _plainruns.c;
 * the piece state, the wide chunk and parent calls and the Python types are here. Checked against the `blake3` package
 * for every length class in tests/unit/test_b3tree.py, and against cloudvault/b3tree_py.py (numpy) for the pieces.
 *
 * Python interface (cloudvault/pieces.py wraps it):
 *   TreeHasher(): update(buffer); finish() -> (32-byte BLAKE3, bytes of 32-byte piece chaining values, or b"" for
 *                 an object of one piece or less); first_parts() -> the 32-byte values of the first piece's 16
 *                 parts of 64 KiB (the tree's nodes one level of 16 below it, kept on the way up), b"" before
 *   Subtree(index, chunks=1024): update(buffer); digest(length=32) -> the chaining value of subtree `index` of
 *                 `chunks` chunks (a piece, or with 64 a part) fed its bytes (never the root), cut to `length` bytes;
 *                 value_and_parts() -> (a whole piece's 32-byte value, its 16 parts' values, as first_parts gives)
 *   root_of(values): the BLAKE3 of an object of more than one piece from its pieces' 32-byte values (a file's
 *                 pieces hashed on many threads)
 *   SIMD: "avx512", "avx2" or "portable" (CLOUDVAULT_B3TREE_SIMD=avx2|portable asks for a narrower one)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_b3core.h"

#define PIECE_CHUNKS 1024
#define PIECE_LEN (CHUNK_LEN * PIECE_CHUNKS)
#define PART_CHUNKS 64 /* the first piece's parts (64 KiB): their values are the tree's nodes one level of 16 down */
#define PARTS (PIECE_CHUNKS / PART_CHUNKS)
#define RELEASE_GIL_AT (64 * 1024)
#define SIMD_MIN 4 /* chunks: fewer are cheaper one at a time than in a sixteen-lane call */

/* The widest compression this CPU runs: sixteen chunks at once (AVX-512), eight (AVX2), or one (portable). */
typedef void (*hash_wide_fn)(const uint8_t *base, size_t stride, size_t blocks, uint64_t counter, int per_input,
                             uint32_t flags, uint32_t flags_start, uint32_t flags_end, uint8_t *out, int lanes);
static hash_wide_fn hash_wide;
static int width = 1;
static const char *simd = "portable";

/* ---- sixteen (AVX-512) or eight (AVX2) chunks or parents at once, on _b3core.h's rounds ---- */

#ifdef HAVE_X86_SIMD_BUILD
/* Sixteen inputs of `blocks` blocks each, input i at base + i * stride: chunks (counter + i, CHUNK_START on the
 * first block, CHUNK_END on the last) or parent nodes (one block each, PARENT, counter 0). Their chaining values
 * go to out, 32 bytes each, in order; out may overlap the inputs (all are read before anything is written). */
AVX512 static void hash16(const uint8_t *base, size_t stride, size_t blocks, uint64_t counter, int per_input,
                          uint32_t flags, uint32_t flags_start, uint32_t flags_end, uint8_t *out, int lanes) {
    __m512i h[8], v[16], r[16], m[16];
    uint32_t lo[16], hi[16];
    for (int i = 0; i < 16; i++) {
        uint64_t c = counter + (per_input ? (uint64_t)i : 0);
        lo[i] = (uint32_t)c;
        hi[i] = (uint32_t)(c >> 32);
    }
    const __m512i counter_lo = _mm512_loadu_si512(lo), counter_hi = _mm512_loadu_si512(hi);
    for (int i = 0; i < 8; i++) h[i] = _mm512_set1_epi32((int)IV[i]);
    for (size_t blk = 0; blk < blocks; blk++) {
        for (int i = 0; i < 16; i++)  /* a lane past `lanes` reads nothing: its value is not kept */
            r[i] = i < lanes ? _mm512_loadu_si512(base + i * stride + blk * BLOCK_LEN) : _mm512_setzero_si512();
        /* sixteen streams 1 KiB apart are more than the hardware prefetcher follows: ask for each one's bytes four
         * blocks ahead (a prefetch never faults, past the end of the input included) */
        for (int i = 0; i < lanes; i++)
            _mm_prefetch((const char *)(base + i * stride + blk * BLOCK_LEN + 256), _MM_HINT_T0);
        transpose16(r, m);

        uint32_t f = flags | (blk == 0 ? flags_start : 0) | (blk == blocks - 1 ? flags_end : 0);
        for (int i = 0; i < 8; i++) v[i] = h[i];
        for (int i = 0; i < 4; i++) v[8 + i] = _mm512_set1_epi32((int)IV[i]);
        v[12] = counter_lo;
        v[13] = counter_hi;
        v[14] = _mm512_set1_epi32(BLOCK_LEN);
        v[15] = _mm512_set1_epi32((int)f);
        ROUNDS(GV);
        for (int i = 0; i < 8; i++) h[i] = _mm512_xor_si512(v[i], v[i + 8]);
    }
    if (lanes == 16) {
        store16(h, out);
    } else {
        uint8_t all[16 * CV_LEN];
        store16(h, all);
        memcpy(out, all, (size_t)lanes * CV_LEN);
    }
}

/* As hash16, eight inputs at a time. */
AVX2 static void hash8(const uint8_t *base, size_t stride, size_t blocks, uint64_t counter, int per_input,
                       uint32_t flags, uint32_t flags_start, uint32_t flags_end, uint8_t *out, int lanes) {
    const __m256i rot16 = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
                                           2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    const __m256i rot8 = _mm256_setr_epi8(1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12,
                                          1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12);
    __m256i h[8], v[16], r[8], m[16];
    uint32_t lo[8], hi[8];
    for (int i = 0; i < 8; i++) {
        uint64_t c = counter + (per_input ? (uint64_t)i : 0);
        lo[i] = (uint32_t)c;
        hi[i] = (uint32_t)(c >> 32);
    }
    const __m256i counter_lo = _mm256_loadu_si256((const __m256i *)lo);
    const __m256i counter_hi = _mm256_loadu_si256((const __m256i *)hi);
    for (int i = 0; i < 8; i++) h[i] = _mm256_set1_epi32((int)IV[i]);
    for (size_t blk = 0; blk < blocks; blk++) {
        for (int half = 0; half < 2; half++) { /* words 0-7, then 8-15 */
            for (int i = 0; i < 8; i++)
                r[i] = i < lanes ? _mm256_loadu_si256((const __m256i *)(base + i * stride + blk * BLOCK_LEN + 32 * half))
                                 : _mm256_setzero_si256();
            transpose8(r, m + 8 * half);
        }
        for (int i = 0; i < lanes; i++)
            _mm_prefetch((const char *)(base + i * stride + blk * BLOCK_LEN + 256), _MM_HINT_T0);
        uint32_t f = flags | (blk == 0 ? flags_start : 0) | (blk == blocks - 1 ? flags_end : 0);
        for (int i = 0; i < 8; i++) v[i] = h[i];
        for (int i = 0; i < 4; i++) v[8 + i] = _mm256_set1_epi32((int)IV[i]);
        v[12] = counter_lo;
        v[13] = counter_hi;
        v[14] = _mm256_set1_epi32(BLOCK_LEN);
        v[15] = _mm256_set1_epi32((int)f);
        ROUNDS(GV8);
        for (int i = 0; i < 8; i++) h[i] = _mm256_xor_si256(v[i], v[i + 8]);
    }
    __m256i cv[8];
    transpose8(h, cv); /* cv[j]: the eight words of input j */
    for (int j = 0; j < lanes; j++) _mm256_storeu_si256((__m256i *)(out + j * CV_LEN), cv[j]);
}
#endif

/* n full chunks at chunk counter `counter` -> n chaining values */
static void hash_chunks(const uint8_t *in, size_t n, uint64_t counter, uint8_t *out) {
    size_t i = 0;
    if (hash_wide)
        for (; i + SIMD_MIN <= n; i += (size_t)width)
            hash_wide(in + i * CHUNK_LEN, CHUNK_LEN, CHUNK_LEN / BLOCK_LEN, counter + i, 1, 0, CHUNK_START, CHUNK_END,
                      out + i * CV_LEN, n - i < (size_t)width ? (int)(n - i) : width);
    for (; i < n; i++) chunk_cv(in + i * CHUNK_LEN, CHUNK_LEN, counter + i, 0, out + i * CV_LEN);
}

/* The chaining value of a whole subtree from its n (a power of two) chunk values, level by level in place, `width`
 * parents at a time (a level of fewer in one call with lanes to spare: cheaper than one by one); where `parts` is
 * given, the level of PARTS values (each PART_CHUNKS chunks) is copied there on the way up. */
static void reduce_piece(uint8_t *cvs, size_t n, uint8_t out[CV_LEN], uint8_t *parts) {
    while (n > 1) {
        if (parts && n == PARTS) memcpy(parts, cvs, PARTS * CV_LEN);
        size_t parents = n / 2, i = 0;
        if (hash_wide)
            for (; i < parents; i += (size_t)width)
                hash_wide(cvs + i * 2 * CV_LEN, 2 * CV_LEN, 1, 0, 0, PARENT, 0, 0, cvs + i * CV_LEN,
                          parents - i < (size_t)width ? (int)(parents - i) : width);
        for (; i < parents; i++) parent_cv(cvs + 2 * i * CV_LEN, cvs + (2 * i + 1) * CV_LEN, 0, cvs + i * CV_LEN);
        n = parents;
    }
    memcpy(out, cvs, CV_LEN);
}

/* ---- one piece, fed in parts of any size ---- */

typedef struct {
    uint64_t first_chunk; /* chunk counter of the piece's first chunk */
    size_t size_chunks;   /* chunks in a whole piece: PIECE_CHUNKS, or fewer for a part (a power of two) */
    size_t chunks;        /* chunk values made so far (every whole chunk is hashed as soon as it is in) */
    size_t held;          /* bytes of a partial chunk held in `buf` */
    uint64_t fed;         /* bytes fed */
    uint8_t buf[CHUNK_LEN];
    uint8_t first[CHUNK_LEN]; /* the object's first chunk: if it is all there is, it is hashed again as the root */
    uint8_t cvs[PIECE_CHUNKS * CV_LEN];
} piece_state;

static void piece_reset(piece_state *p, uint64_t first_chunk, size_t size_chunks) {
    p->first_chunk = first_chunk;
    p->size_chunks = size_chunks;
    p->chunks = 0;
    p->held = 0;
    p->fed = 0;
}

/* Feeds bytes of this piece until it holds all its chunks; returns the bytes taken. */
static size_t piece_feed(piece_state *p, const uint8_t *in, size_t len) {
    size_t taken = 0;
    while (taken < len && p->chunks < p->size_chunks) {
        size_t left = len - taken;
        if (p->held == 0 && left >= CHUNK_LEN) { /* whole chunks straight from the input */
            size_t n = left / CHUNK_LEN, room = p->size_chunks - p->chunks;
            if (n > room) n = room;
            if (p->first_chunk + p->chunks == 0) memcpy(p->first, in + taken, CHUNK_LEN);
            hash_chunks(in + taken, n, p->first_chunk + p->chunks, p->cvs + p->chunks * CV_LEN);
            p->chunks += n;
            taken += n * CHUNK_LEN;
            continue;
        }
        size_t n = CHUNK_LEN - p->held < left ? CHUNK_LEN - p->held : left;
        memcpy(p->buf + p->held, in + taken, n);
        p->held += n;
        taken += n;
        if (p->held == CHUNK_LEN) {
            if (p->first_chunk + p->chunks == 0) memcpy(p->first, p->buf, CHUNK_LEN);
            chunk_cv(p->buf, CHUNK_LEN, p->first_chunk + p->chunks, 0, p->cvs + p->chunks * CV_LEN);
            p->chunks++;
            p->held = 0;
        }
    }
    p->fed += taken;
    return taken;
}

/* The piece's chaining value once its last byte is in (it has at least one); with ROOT in `root`, the hash of an
 * object that is this piece alone; where `parts` is given and the piece is whole, its PARTS parts' values too (kept on
 * the way up). Leaves the piece's chunk values as they were only where `root` is 0 and the piece is not whole (the
 * callers keep a copy where it matters). */
static void piece_finish(piece_state *p, uint32_t root, uint8_t out[CV_LEN], uint8_t *parts) {
    if (root && p->fed <= CHUNK_LEN) { /* one chunk or less, at counter 0 */
        chunk_cv(p->chunks ? p->first : p->buf, p->chunks ? CHUNK_LEN : p->held, 0, ROOT, out);
        return;
    }
    size_t n = p->chunks;
    if (p->held) {
        chunk_cv(p->buf, p->held, p->first_chunk + n, 0, p->cvs + n * CV_LEN);
        n++;
    }
    if (n == p->size_chunks && !root)
        reduce_piece(p->cvs, n, out, parts);
    else
        merge(p->cvs, n, root, out);
}

/* ---- TreeHasher ---- */

typedef struct {
    PyObject_HEAD
    piece_state *piece;
    uint8_t *pieces; /* chaining values of the pieces done */
    size_t count, room;
    int busy;
    uint8_t parts[PARTS * CV_LEN]; /* the first piece's parts' values, once it is a piece (count > 0) */
} TreeHasher;

static int tree_init(TreeHasher *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist)) return -1;
    PyMem_RawFree(self->piece);
    PyMem_RawFree(self->pieces);
    self->piece = PyMem_RawMalloc(sizeof(piece_state));
    self->pieces = NULL;
    self->count = self->room = 0;
    self->busy = 0;
    if (!self->piece) {
        PyErr_NoMemory();
        return -1;
    }
    piece_reset(self->piece, 0, PIECE_CHUNKS);
    return 0;
}

static void tree_dealloc(TreeHasher *self) {
    PyMem_RawFree(self->piece);
    PyMem_RawFree(self->pieces);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int tree_push(TreeHasher *self, const uint8_t cv[CV_LEN]) {
    if (self->count == self->room) {
        size_t room = self->room ? self->room * 2 : 64;
        uint8_t *grown = PyMem_RawRealloc(self->pieces, room * CV_LEN);
        if (!grown) return -1;
        self->pieces = grown;
        self->room = room;
    }
    memcpy(self->pieces + self->count * CV_LEN, cv, CV_LEN);
    self->count++;
    return 0;
}

/* Returns -1 out of memory (nothing else can fail). Runs without the GIL. */
static int tree_feed(TreeHasher *self, const uint8_t *in, size_t len) {
    piece_state *p = self->piece;
    while (len) {
        if (p->chunks == PIECE_CHUNKS) { /* whole, and a byte follows it: a piece, not the root */
            uint8_t cv[CV_LEN];
            reduce_piece(p->cvs, PIECE_CHUNKS, cv, p->first_chunk == 0 ? self->parts : NULL);
            if (tree_push(self, cv) < 0) return -1;
            piece_reset(p, p->first_chunk + PIECE_CHUNKS, PIECE_CHUNKS);
        }
        size_t taken = piece_feed(p, in, len);
        in += taken;
        len -= taken;
    }
    return 0;
}

static int claim(int *busy) {
    if (*busy) {
        PyErr_SetString(PyExc_RuntimeError, "a hasher is used by one thread at a time");
        return -1;
    }
    *busy = 1;
    return 0;
}

/* Feeds a buffer of at most `room` bytes to fn (-1: out of memory), the GIL let go for a large one, one thread at
 * a time (busy). */
typedef int (*feed_fn)(void *self, const uint8_t *in, size_t len);

static PyObject *feed_buffer(PyObject *arg, int *busy, size_t room, feed_fn fn, void *self) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int rc = -2;
    if ((size_t)view.len > room) {
        PyErr_Format(PyExc_ValueError, "a piece has room for %zu more bytes", room);
    } else if (claim(busy) == 0) {
        if (view.len >= RELEASE_GIL_AT) {
            Py_BEGIN_ALLOW_THREADS
            rc = fn(self, view.buf, (size_t)view.len);
            Py_END_ALLOW_THREADS
        } else {
            rc = fn(self, view.buf, (size_t)view.len);
        }
        *busy = 0;
    }
    PyBuffer_Release(&view);
    if (rc == -1) return PyErr_NoMemory();
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *tree_update(TreeHasher *self, PyObject *arg) {
    if (!self->piece) return PyErr_Format(PyExc_RuntimeError, "TreeHasher not initialised");
    return feed_buffer(arg, &self->busy, SIZE_MAX, (feed_fn)tree_feed, self);
}

static PyObject *tree_finish(TreeHasher *self, PyObject *unused) {
    uint8_t root[CV_LEN], last[CV_LEN];
    if (!self->piece) return PyErr_Format(PyExc_RuntimeError, "TreeHasher not initialised");
    if (claim(&self->busy) < 0) return NULL;
    piece_state saved = *self->piece; /* finish leaves the hasher as it was: it may be fed on */
    size_t count = self->count;
    PyObject *result = NULL;
    if (count == 0) {
        piece_finish(self->piece, ROOT, root, NULL);
        result = Py_BuildValue("(y#y#)", root, (Py_ssize_t)CV_LEN, "", (Py_ssize_t)0);
    } else {
        piece_finish(self->piece, 0, last, NULL);
        if (tree_push(self, last) < 0) {
            PyErr_NoMemory();
        } else {
            merge(self->pieces, self->count, ROOT, root);
            result = Py_BuildValue("(y#y#)", root, (Py_ssize_t)CV_LEN, self->pieces,
                                   (Py_ssize_t)(self->count * CV_LEN));
        }
    }
    *self->piece = saved;
    self->count = count;
    self->busy = 0;
    return result;
}

static PyObject *tree_first_parts(TreeHasher *self, PyObject *unused) {
    if (!self->piece) return PyErr_Format(PyExc_RuntimeError, "TreeHasher not initialised");
    if (self->count == 0) return PyBytes_FromStringAndSize("", 0); /* one piece or less so far: it has no parts */
    return PyBytes_FromStringAndSize((const char *)self->parts, PARTS * CV_LEN);
}

static PyMethodDef tree_methods[] = {
    {"update", (PyCFunction)tree_update, METH_O, "Feed bytes (any buffer)."},
    {"first_parts", (PyCFunction)tree_first_parts, METH_NOARGS,
     "The chaining values of the first piece's 16 parts of 64 KiB, 32 bytes each; b'' while it is no piece yet."},
    {"finish", (PyCFunction)tree_finish, METH_NOARGS,
     "(BLAKE3 of the bytes fed, 32 bytes; the pieces' chaining values, 32 bytes each, b'' for one piece or less)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TreeHasherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cloudvault._b3tree.TreeHasher",
    .tp_basicsize = sizeof(TreeHasher),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)tree_init,
    .tp_dealloc = (destructor)tree_dealloc,
    .tp_methods = tree_methods,
    .tp_doc = "BLAKE3 of a stream and the chaining values of its 1 MiB pieces, in one pass.",
};

/* ---- Subtree: one piece's chaining value, for checking a piece read back ---- */

typedef struct {
    PyObject_HEAD
    piece_state *piece;
    int busy;
} Subtree;

static int subtree_init(Subtree *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"index", "chunks", NULL};
    unsigned long long index;
    Py_ssize_t chunks = PIECE_CHUNKS;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "K|n", kwlist, &index, &chunks)) return -1;
    if (chunks < 1 || chunks > PIECE_CHUNKS || (chunks & (chunks - 1))) {
        PyErr_Format(PyExc_ValueError, "a subtree is a power of two chunks, at most %d", PIECE_CHUNKS);
        return -1;
    }
    if (index > (UINT64_MAX / (uint64_t)chunks)) {
        PyErr_SetString(PyExc_OverflowError, "piece index out of range");
        return -1;
    }
    PyMem_RawFree(self->piece);
    self->piece = PyMem_RawMalloc(sizeof(piece_state));
    if (!self->piece) {
        PyErr_NoMemory();
        return -1;
    }
    piece_reset(self->piece, (uint64_t)index * (uint64_t)chunks, (size_t)chunks);
    self->busy = 0;
    return 0;
}

static void subtree_dealloc(Subtree *self) {
    PyMem_RawFree(self->piece);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int subtree_feed(Subtree *self, const uint8_t *in, size_t len) {
    piece_feed(self->piece, in, len); /* never past its piece: feed_buffer's room */
    return 0;
}

static PyObject *subtree_update(Subtree *self, PyObject *arg) {
    if (!self->piece) return PyErr_Format(PyExc_RuntimeError, "Subtree not initialised");
    return feed_buffer(arg, &self->busy, self->piece->size_chunks * CHUNK_LEN - self->piece->fed,
                       (feed_fn)subtree_feed, self);
}

/* The subtree's chaining value from the bytes fed (and, given `parts`, a whole piece's parts' values), the subtree
 * left as it was: it may be fed on. -1 with an error set where it is in use or holds no byte. */
static int subtree_finish(Subtree *self, uint8_t cv[CV_LEN], uint8_t *parts) {
    if (!self->piece) {
        PyErr_SetString(PyExc_RuntimeError, "Subtree not initialised");
        return -1;
    }
    if (self->piece->fed == 0) {
        PyErr_SetString(PyExc_ValueError, "a piece holds at least one byte");
        return -1;
    }
    if (claim(&self->busy) < 0) return -1;
    piece_state saved = *self->piece;
    piece_finish(self->piece, 0, cv, parts);
    *self->piece = saved;
    self->busy = 0;
    return 0;
}

static PyObject *subtree_digest(Subtree *self, PyObject *args) {
    uint8_t cv[CV_LEN];
    Py_ssize_t length = CV_LEN;
    if (!PyArg_ParseTuple(args, "|n", &length)) return NULL;
    if (length < 1 || length > CV_LEN) return PyErr_Format(PyExc_ValueError, "length from 1 to %d", CV_LEN);
    if (subtree_finish(self, cv, NULL) < 0) return NULL;
    return PyBytes_FromStringAndSize((const char *)cv, length);
}

/* A whole piece's value and its parts' values from the one reduction (hashing.py's mapped file takes the first
 * piece's parts so, not by hashing its MiB again). */
static PyObject *subtree_value_and_parts(Subtree *self, PyObject *unused) {
    uint8_t cv[CV_LEN], parts[PARTS * CV_LEN];
    if (self->piece && (self->piece->size_chunks != PIECE_CHUNKS || self->piece->chunks != PIECE_CHUNKS))
        return PyErr_Format(PyExc_ValueError, "only a whole piece (%d bytes fed) has parts", PIECE_LEN);
    if (subtree_finish(self, cv, parts) < 0) return NULL;
    return Py_BuildValue("(y#y#)", cv, (Py_ssize_t)CV_LEN, parts, (Py_ssize_t)(PARTS * CV_LEN));
}

static PyMethodDef subtree_methods[] = {
    {"update", (PyCFunction)subtree_update, METH_O, "Feed bytes of the piece (any buffer)."},
    {"digest", (PyCFunction)subtree_digest, METH_VARARGS,
     "digest(length=32): the first `length` bytes of the piece's chaining value."},
    {"value_and_parts", (PyCFunction)subtree_value_and_parts, METH_NOARGS,
     "(the 32-byte chaining value of a whole piece, its 16 parts' of 64 KiB, 32 bytes each): one hashing for both."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SubtreeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cloudvault._b3tree.Subtree",
    .tp_basicsize = sizeof(Subtree),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)subtree_init,
    .tp_dealloc = (destructor)subtree_dealloc,
    .tp_methods = subtree_methods,
    .tp_doc = "Subtree(index, chunks=1024): the BLAKE3 chaining value of the subtree `index` of `chunks` chunks (a "
              "power of two) of an object larger than it: a piece, or a part of one.",
};

/* ---- the root from the pieces' values: what a file hashed a piece per thread needs ---- */

static PyObject *root_of(PyObject *module, PyObject *arg) {
    Py_buffer view;
    uint8_t root[CV_LEN];
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (view.len < 2 * CV_LEN || view.len % CV_LEN) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "the values of two pieces or more, %d bytes each", CV_LEN);
    }
    merge(view.buf, (size_t)view.len / CV_LEN, ROOT, root);
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)root, CV_LEN);
}

static PyMethodDef module_methods[] = {
    {"root_of", root_of, METH_O,
     "root_of(values): the BLAKE3 of an object of more than one piece from its pieces' 32-byte values, in order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_b3tree", "BLAKE3 with 1 MiB piece chaining values in one pass.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__b3tree(void) {
    simd = simd_path();
#ifdef HAVE_X86_SIMD_BUILD
    if (!strcmp(simd, "avx512")) {
        hash_wide = hash16, width = 16;
    } else if (!strcmp(simd, "avx2")) {
        hash_wide = hash8, width = 8;
    }
#endif
    if (PyType_Ready(&TreeHasherType) < 0 || PyType_Ready(&SubtreeType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&TreeHasherType);
    Py_INCREF(&SubtreeType);
    if (PyModule_AddObject(m, "TreeHasher", (PyObject *)&TreeHasherType) < 0 ||
        PyModule_AddObject(m, "Subtree", (PyObject *)&SubtreeType) < 0 ||
        PyModule_AddStringConstant(m, "SIMD", simd) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
