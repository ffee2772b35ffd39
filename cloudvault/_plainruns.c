/* Many small members' BLAKE3 in one call: what indexing an archive of many small files (a plain run's members,
 * archive/plainruns.py) needs, where one `blake3` call per member cost more than decoding it.
 *
 * Each member is cut into its chunks (one for a member of 1 KiB or less, whose chunk is its root); the chunks are
 * compressed one per SIMD lane, sixteen lanes (AVX-512) or eight (AVX2), a lane taking the next chunk as soon as its
 * own is done, so that chunks of unlike lengths keep every lane busy; a member of several chunks then has its
 * chunks' values merged into its root. The compression function, its rounds and transposes and the tree merge are
 * _b3core.h's, the core it shares with _b3tree.c (its Python types are not compiled in here); checked against the
 * `blake3` package for every length class in tests/unit/test_native_plainruns.py.
 *
 * Python interface (cloudvault/hashing.py member_hex_digests wraps it, with a pure-Python fallback):
 *   hex_digests(buffer, starts, sizes, shift, limit) -> list: member i is buffer[starts[i] + shift :][: sizes[i]];
 *       its BLAKE3 as 64 hex digits, or None where sizes[i] >= limit (left to the caller: a large member).
 *   SIMD: as _b3tree's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_b3core.h"

/* One chunk to compress: len bytes (0..CHUNK_LEN) at in, chunk counter `counter`, ROOT in root when it is its
 * member's only chunk; its value (or the member's hash) goes to out. */
typedef struct {
    const uint8_t *in;
    size_t len;
    uint64_t counter;
    uint32_t root;
    uint8_t *out;
} chunk_job;

/* A group of up to `lanes` chunks compressed together, one per lane, for as many blocks as its longest has (the
 * groups are cut from the chunks sorted by their blocks: a lane seldom waits). A lane's chaining value is kept in
 * registers from block to block; a lane whose chunk has ended keeps its value (masked) while the others go on; a
 * last block shorter than BLOCK_LEN is read from a copy padded with zeros. */
typedef struct {
    const uint8_t *in[16], *last[16];
    uint32_t lo[16], hi[16], last_len[16], last_flags[16], last_block[16];
    uint8_t pad[16][BLOCK_LEN];
    size_t blocks; /* of the longest */
} chunk_group;

static const uint8_t NO_BYTES[BLOCK_LEN];

static void group_lane(chunk_group *g, int l, const chunk_job *job) {
    size_t blocks = job->len ? (job->len + BLOCK_LEN - 1) / BLOCK_LEN : 1, at = (blocks - 1) * BLOCK_LEN;
    g->in[l] = job->in;
    g->lo[l] = (uint32_t)job->counter, g->hi[l] = (uint32_t)(job->counter >> 32);
    g->last_block[l] = (uint32_t)(blocks - 1);
    g->last_len[l] = (uint32_t)(job->len - at);
    g->last_flags[l] = CHUNK_END | job->root;
    if (job->len - at == BLOCK_LEN) {
        g->last[l] = job->in + at;
    } else {
        memset(g->pad[l], 0, BLOCK_LEN);
        if (job->len > at) memcpy(g->pad[l], job->in + at, job->len - at);
        g->last[l] = g->pad[l];
    }
    if (blocks > g->blocks) g->blocks = blocks;
}

static void empty_lane(chunk_group *g, int l) {
    g->in[l] = g->last[l] = NO_BYTES;
    g->lo[l] = g->hi[l] = g->last_len[l] = g->last_flags[l] = g->last_block[l] = 0;
}

/* Lane l's block blk: a whole block of its chunk, its (padded) last, or nothing once it has ended. */
static inline const uint8_t *lane_block(const chunk_group *g, int l, size_t blk) {
    return blk < g->last_block[l] ? g->in[l] + blk * BLOCK_LEN : blk == g->last_block[l] ? g->last[l] : NO_BYTES;
}

typedef void (*group_fn)(const chunk_group *g, uint8_t *out); /* out: 32 bytes a lane, in lane order */

#ifdef HAVE_X86_SIMD_BUILD
AVX512 static void group16(const chunk_group *g, uint8_t *out) {
    __m512i h[8], v[16], r[16], m[16];
    const __m512i lo = _mm512_loadu_si512(g->lo), hi = _mm512_loadu_si512(g->hi);
    const __m512i last_len = _mm512_loadu_si512(g->last_len), last_flags = _mm512_loadu_si512(g->last_flags);
    const __m512i last_block = _mm512_loadu_si512(g->last_block);
    for (int i = 0; i < 8; i++) h[i] = _mm512_set1_epi32((int)IV[i]);
    for (size_t blk = 0; blk < g->blocks; blk++) {
        for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(lane_block(g, i, blk));
        transpose16(r, m);
        const __m512i at = _mm512_set1_epi32((int)blk);
        const __mmask16 last = _mm512_cmpeq_epi32_mask(at, last_block), live = _mm512_cmple_epu32_mask(at, last_block);
        for (int i = 0; i < 8; i++) v[i] = h[i];
        for (int i = 0; i < 4; i++) v[8 + i] = _mm512_set1_epi32((int)IV[i]);
        v[12] = lo;
        v[13] = hi;
        v[14] = _mm512_mask_mov_epi32(_mm512_set1_epi32(BLOCK_LEN), last, last_len);
        v[15] = _mm512_or_si512(_mm512_set1_epi32(blk == 0 ? CHUNK_START : 0), _mm512_maskz_mov_epi32(last, last_flags));
        ROUNDS(GV);
        for (int i = 0; i < 8; i++) h[i] = _mm512_mask_xor_epi32(h[i], live, v[i], v[i + 8]);
    }
    store16(h, out);
}

AVX2 static void group8(const chunk_group *g, uint8_t *out) {
    const __m256i rot16 = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
                                           2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    const __m256i rot8 = _mm256_setr_epi8(1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12,
                                          1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12);
    __m256i h[8], v[16], r[8], m[16];
    const __m256i lo = _mm256_loadu_si256((const __m256i *)g->lo), hi = _mm256_loadu_si256((const __m256i *)g->hi);
    const __m256i last_len = _mm256_loadu_si256((const __m256i *)g->last_len);
    const __m256i last_flags = _mm256_loadu_si256((const __m256i *)g->last_flags);
    const __m256i last_block = _mm256_loadu_si256((const __m256i *)g->last_block);
    for (int i = 0; i < 8; i++) h[i] = _mm256_set1_epi32((int)IV[i]);
    for (size_t blk = 0; blk < g->blocks; blk++) {
        const uint8_t *at_lane[8];
        for (int i = 0; i < 8; i++) at_lane[i] = lane_block(g, i, blk);
        for (int half = 0; half < 2; half++) { /* words 0-7, then 8-15 */
            for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_si256((const __m256i *)(at_lane[i] + 32 * half));
            transpose8(r, m + 8 * half);
        }
        const __m256i at = _mm256_set1_epi32((int)blk), last = _mm256_cmpeq_epi32(at, last_block);
        const __m256i live = _mm256_cmpgt_epi32(_mm256_add_epi32(last_block, _mm256_set1_epi32(1)), at);
        for (int i = 0; i < 8; i++) v[i] = h[i];
        for (int i = 0; i < 4; i++) v[8 + i] = _mm256_set1_epi32((int)IV[i]);
        v[12] = lo;
        v[13] = hi;
        v[14] = _mm256_blendv_epi8(_mm256_set1_epi32(BLOCK_LEN), last_len, last);
        v[15] = _mm256_or_si256(_mm256_set1_epi32(blk == 0 ? CHUNK_START : 0), _mm256_and_si256(last, last_flags));
        ROUNDS(GV8);
        for (int i = 0; i < 8; i++) h[i] = _mm256_blendv_epi8(h[i], _mm256_xor_si256(v[i], v[i + 8]), live);
    }
    __m256i cv[8];
    transpose8(h, cv); /* cv[j]: the eight words of lane j */
    for (int j = 0; j < 8; j++) _mm256_storeu_si256((__m256i *)(out + j * CV_LEN), cv[j]);
}
#endif

static group_fn group_wide;
static int lanes = 1;

/* Every job's chunk value: the jobs sorted by their blocks (most first: a counting sort, 1 to 16 blocks), then
 * compressed `lanes` at a time. */
static int hash_jobs(const chunk_job *jobs, size_t n) {
    if (!group_wide) {
        for (size_t j = 0; j < n; j++) chunk_cv(jobs[j].in, jobs[j].len, jobs[j].counter, jobs[j].root, jobs[j].out);
        return 0;
    }
    size_t start[CHUNK_LEN / BLOCK_LEN + 2] = {0};
    const chunk_job **order = malloc(sizeof *order * (n + 1));
    chunk_group *g = malloc(sizeof *g);
    if (!order || !g) {
        free(order);
        free(g);
        return -1;
    }
    for (size_t j = 0; j < n; j++) start[CHUNK_LEN / BLOCK_LEN - (jobs[j].len ? (jobs[j].len - 1) / BLOCK_LEN : 0) + 1]++;
    for (size_t b = 1; b < sizeof start / sizeof *start; b++) start[b] += start[b - 1];
    for (size_t j = 0; j < n; j++) order[start[CHUNK_LEN / BLOCK_LEN - (jobs[j].len ? (jobs[j].len - 1) / BLOCK_LEN : 0)]++] = &jobs[j];
    uint8_t out[16 * CV_LEN];
    for (size_t at = 0; at < n; at += (size_t)lanes) {
        int count = n - at < (size_t)lanes ? (int)(n - at) : lanes;
        g->blocks = 0;
        for (int l = 0; l < 16; l++) l < count ? group_lane(g, l, order[at + l]) : empty_lane(g, l);
        group_wide(g, out);
        for (int l = 0; l < count; l++) memcpy(order[at + l]->out, out + l * CV_LEN, CV_LEN);
    }
    free(order);
    free(g);
    return 0;
}

/* The members' sizes and starts checked against the buffer; the chunks of those under limit as jobs, each member's
 * digest going to digests + 32 i (its chunks' values, for a member of several, to cvs first). Returns the jobs
 * made, or -1 with a Python error set. */
static Py_ssize_t member_jobs(PyObject *starts, const Py_ssize_t *sizes, Py_ssize_t n, Py_ssize_t shift,
                              Py_ssize_t limit, const Py_buffer *view, chunk_job *jobs, uint8_t *digests, uint8_t *cvs) {
    Py_ssize_t made = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t size = sizes[i], start = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(starts, i));
        if (start == -1 && PyErr_Occurred()) return -1;
        if (size >= limit) continue;
        if (size < 0 || start + shift < 0 || start + shift > view->len - size) {
            PyErr_Format(PyExc_ValueError, "member %zd (%zd bytes at %zd) is not inside the buffer", i, size, start);
            return -1;
        }
        const uint8_t *in = (const uint8_t *)view->buf + start + shift;
        if (size <= CHUNK_LEN) {
            jobs[made++] = (chunk_job){in, (size_t)size, 0, ROOT, digests + CV_LEN * i};
            continue;
        }
        for (Py_ssize_t at = 0; at < size; at += CHUNK_LEN)
            jobs[made] = (chunk_job){in + at, (size_t)(size - at < CHUNK_LEN ? size - at : CHUNK_LEN),
                                     (uint64_t)(at / CHUNK_LEN), 0, cvs + CV_LEN * made}, made++;
    }
    return made;
}

/* The digests of members of several chunks: their chunks' values (jobs in member order) merged into their roots. */
static void merge_members(Py_ssize_t made, const uint8_t *cvs, uint8_t *digests, const Py_ssize_t *sizes,
                          Py_ssize_t n, Py_ssize_t limit) {
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < n && j < made; i++) {
        Py_ssize_t size = sizes[i];
        if (size >= limit) continue;
        if (size <= CHUNK_LEN) {
            j++;
            continue;
        }
        size_t chunks = (size_t)(size + CHUNK_LEN - 1) / CHUNK_LEN;
        merge(cvs + CV_LEN * j, chunks, ROOT, digests + CV_LEN * i);
        j += (Py_ssize_t)chunks;
    }
}

static PyObject *hex_list(const uint8_t *digests, const Py_ssize_t *sizes, Py_ssize_t n, Py_ssize_t limit) {
    static const char HEX[] = "0123456789abcdef";
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item;
        if (sizes[i] >= limit) {
            item = Py_NewRef(Py_None);
        } else {
            item = PyUnicode_New(2 * CV_LEN, 127);
            if (!item) {
                Py_DECREF(out);
                return NULL;
            }
            Py_UCS1 *text = PyUnicode_1BYTE_DATA(item);
            for (int b = 0; b < CV_LEN; b++) {
                text[2 * b] = (Py_UCS1)HEX[digests[CV_LEN * i + b] >> 4];
                text[2 * b + 1] = (Py_UCS1)HEX[digests[CV_LEN * i + b] & 15];
            }
        }
        PyList_SET_ITEM(out, i, item);
    }
    return out;
}

static PyObject *hex_digests(PyObject *module, PyObject *args) {
    PyObject *buffer, *starts_arg, *sizes_arg, *starts = NULL, *sizes = NULL, *out = NULL;
    Py_ssize_t shift, limit;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "OOOnn", &buffer, &starts_arg, &sizes_arg, &shift, &limit)) return NULL;
    if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0) return NULL;
    chunk_job *jobs = NULL;
    uint8_t *digests = NULL, *cvs = NULL;
    Py_ssize_t *size_of = NULL; /* the sizes read once: the list may change while the GIL is let go */
    starts = PySequence_Fast(starts_arg, "starts: a sequence of ints");
    sizes = starts ? PySequence_Fast(sizes_arg, "sizes: a sequence of ints") : NULL;
    if (!sizes) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(starts), chunks = 0;
    if (PySequence_Fast_GET_SIZE(sizes) != n) {
        PyErr_SetString(PyExc_ValueError, "starts and sizes differ in length");
        goto done;
    }
    if (!(size_of = PyMem_Malloc(sizeof *size_of * (size_t)(n + 1)))) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* the jobs to make room for */
        Py_ssize_t size = size_of[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(sizes, i));
        if (size == -1 && PyErr_Occurred()) goto done;
        if (size >= 0 && size < limit) chunks += size ? (size + CHUNK_LEN - 1) / CHUNK_LEN : 1;
    }
    jobs = PyMem_Malloc(sizeof(chunk_job) * (size_t)(chunks + 1));
    digests = PyMem_Malloc((size_t)CV_LEN * (size_t)(n + 1));
    cvs = PyMem_Malloc((size_t)CV_LEN * (size_t)(chunks + 1));
    if (!jobs || !digests || !cvs) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t made = member_jobs(starts, size_of, n, shift, limit, &view, jobs, digests, cvs);
    if (made < 0) goto done;
    int failed;
    Py_BEGIN_ALLOW_THREADS /* the buffer is held: the decoding thread goes on meanwhile */
    failed = hash_jobs(jobs, (size_t)made);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    merge_members(made, cvs, digests, size_of, n, limit);
    out = hex_list(digests, size_of, n, limit);
done:
    PyMem_Free(size_of);
    PyMem_Free(jobs);
    PyMem_Free(digests);
    PyMem_Free(cvs);
    Py_XDECREF(starts);
    Py_XDECREF(sizes);
    PyBuffer_Release(&view);
    return out;
}

/* ---- a plain run's headers, read from its piece ---- */

/* The headers read here are those headerarrays.py reads (archive/plainruns.py says what a plain member is): a file
 * ('0', NUL, '7') or folder ('5'); the checksum as six octal digits, a NUL and a space, matching the unsigned byte
 * sum; mode, uid, gid, size and mtime as octal digits filling the field but its last byte, a NUL or a space (or,
 * bsdtar's, but a space and a NUL); no link name; no ustar prefix; a name, and a file's not ending in '/'; its data
 * whole in the piece. The first header that is not ends the run (the walk reads it as any). */
#define TAR_BLOCK 512

/* The octal number in f[0..digits); -1 where a byte is not an octal digit. */
static int64_t octal(const uint8_t *f, int digits) {
    int64_t n = 0;
    for (int i = 0; i < digits; i++) {
        if (f[i] < '0' || f[i] > '7') return -1;
        n = n * 8 + (f[i] - '0');
    }
    return n;
}

/* A numeric field of width bytes as headerarrays._number reads it; -1 where it is written otherwise. */
static int64_t number_field(const uint8_t *f, int width) {
    uint8_t end = f[width - 1];
    if (end == 0 || end == ' ') {
        int64_t n = octal(f, width - 1);
        if (n >= 0) return n;
    }
    return end == 0 && f[width - 2] == ' ' ? octal(f, width - 2) : -1;
}

typedef struct {
    int64_t mode, uid, gid, size, mtime;
    size_t name_len;
    int dir;
} plain_header;

/* Whether the block at h is a plain header (read into out) whose data lie whole before end (bytes of the piece
 * from h on). */
static int read_plain(const uint8_t *h, size_t room, plain_header *out) {
    uint8_t type = h[156];
    if (type != '0' && type != 0 && type != '7' && type != '5') return 0;
    out->dir = type == '5';
    int64_t stored = octal(h + 148, 6);
    if (stored < 0 || h[154] != 0 || h[155] != ' ') return 0;
    uint32_t sum = 8 * ' ';
    for (int i = 0; i < TAR_BLOCK; i++) sum += h[i]; /* a loop the compiler vectorizes; the checksum field out after */
    for (int i = 148; i < 156; i++) sum -= h[i];
    if (sum != (uint64_t)stored) return 0;
    if ((out->mode = number_field(h + 100, 8)) < 0 || (out->uid = number_field(h + 108, 8)) < 0 ||
        (out->gid = number_field(h + 116, 8)) < 0 || (out->size = number_field(h + 124, 12)) < 0 ||
        (out->mtime = number_field(h + 136, 12)) < 0)
        return 0;
    if (h[157] != 0) return 0;                                         /* a link name */
    if (!memcmp(h + 257, "ustar\0", 6) && h[345] != 0) return 0;       /* a prefix to join */
    const uint8_t *nul = memchr(h, 0, 100);
    out->name_len = nul ? (size_t)(nul - h) : 100;
    if (!out->name_len || (!out->dir && h[out->name_len - 1] == '/')) return 0;
    size_t data = out->dir ? 0 : (size_t)out->size;
    return data <= room - TAR_BLOCK && (data + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK <= room - TAR_BLOCK;
}

static PyObject *FILE_KIND, *DIR_KIND;

/* What members of a run share, made once and handed out again while it repeats: an owner's or group's text, a
 * mode's, mtime's, uid's or gid's int (most members of an archive share them: no object made per member). */
typedef struct {
    PyObject *text[2];
    const uint8_t *field[2];
    PyObject *num[4];
    int64_t value[4];
} repeats;

enum { MODE, MTIME, UID, GID };

/* An owner or group field's text (to its first NUL, UTF-8, bad bytes replaced), the last one's again if the same. */
static PyObject *owner_text(repeats *r, int which, const uint8_t *field) {
    if (r->text[which] && !memcmp(field, r->field[which], 32)) return Py_NewRef(r->text[which]);
    const uint8_t *nul = memchr(field, 0, 32);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)field, nul ? nul - field : 32, "replace");
    if (text) {
        Py_XSETREF(r->text[which], Py_NewRef(text));
        r->field[which] = field;
    }
    return text;
}

static PyObject *repeated_number(repeats *r, int which, int64_t value) {
    if (r->num[which] && r->value[which] == value) return Py_NewRef(r->num[which]);
    PyObject *n = PyLong_FromLongLong(value);
    if (n) {
        Py_XSETREF(r->num[which], Py_NewRef(n));
        r->value[which] = value;
    }
    return n;
}

static void repeats_clear(repeats *r) {
    for (int i = 0; i < 2; i++) Py_CLEAR(r->text[i]);
    for (int i = 0; i < 4; i++) Py_CLEAR(r->num[i]);
}

enum { NAMES, KINDS, SIZES, MODES, MTIMES, UIDS, GIDS, UNAMES, GNAMES, OFFSETS, COLUMNS };

/* One member's header into the columns; -1 with a Python error set. */
static int add_member(PyObject **cols, const uint8_t *h, const plain_header *p, Py_ssize_t offset, repeats *r) {
    PyObject *items[COLUMNS] = {
        PyBytes_FromStringAndSize((const char *)h, (Py_ssize_t)p->name_len), Py_NewRef(p->dir ? DIR_KIND : FILE_KIND),
        PyLong_FromLongLong(p->dir ? 0 : p->size), repeated_number(r, MODE, p->mode),
        repeated_number(r, MTIME, p->mtime), repeated_number(r, UID, p->uid), repeated_number(r, GID, p->gid),
        owner_text(r, 0, h + 265), owner_text(r, 1, h + 297), PyLong_FromSsize_t(offset),
    };
    int failed = 0;
    for (int c = 0; c < COLUMNS; c++) {
        failed = failed || !items[c] || PyList_Append(cols[c], items[c]) < 0;
        Py_XDECREF(items[c]);
    }
    return failed ? -1 : 0;
}

static PyObject *plain_headers(PyObject *module, PyObject *args) {
    PyObject *buffer, *cols[COLUMNS] = {NULL}, *out = NULL, *joined = NULL;
    repeats shared = {{NULL, NULL}, {NULL, NULL}, {NULL, NULL, NULL, NULL}, {0, 0, 0, 0}};
    Py_ssize_t at, base;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "Onn", &buffer, &at, &base)) return NULL;
    if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *piece = view.buf;
    for (int c = 0; c < COLUMNS; c++)
        if (!(cols[c] = PyList_New(0))) goto done;
    Py_ssize_t names_len = 0, pos = at < 0 ? view.len : at;
    plain_header p;
    while (pos + TAR_BLOCK <= view.len && read_plain(piece + pos, (size_t)(view.len - pos), &p)) {
        if (add_member(cols, piece + pos, &p, base + pos, &shared) < 0) goto done;
        names_len += (Py_ssize_t)p.name_len + 1;
        pos += TAR_BLOCK + (p.dir ? 0 : (p.size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK);
    }
    if (!PyList_GET_SIZE(cols[0])) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (!(joined = PyBytes_FromStringAndSize(NULL, names_len))) goto done;
    char *into = PyBytes_AS_STRING(joined);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cols[0]); i++) {
        PyObject *name = PyList_GET_ITEM(cols[0], i);
        memcpy(into, PyBytes_AS_STRING(name), (size_t)PyBytes_GET_SIZE(name));
        into += PyBytes_GET_SIZE(name);
        *into++ = 0;
    }
    out = Py_BuildValue("(NNNNNNNNNNNn)", cols[NAMES], joined, cols[KINDS], cols[SIZES], cols[MODES], cols[MTIMES],
                        cols[UIDS], cols[GIDS], cols[UNAMES], cols[GNAMES], cols[OFFSETS], pos);
    for (int c = 0; c < COLUMNS; c++) cols[c] = NULL; /* Py_BuildValue took them */
    joined = NULL;
done:
    for (int c = 0; c < COLUMNS; c++) Py_XDECREF(cols[c]);
    Py_XDECREF(joined);
    repeats_clear(&shared);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef many_methods[] = {
    {"hex_digests", hex_digests, METH_VARARGS,
     "hex_digests(buffer, starts, sizes, shift, limit): the BLAKE3 (hex) of each member buffer[starts[i] + shift :]"
     "[: sizes[i]], None for a member of limit bytes or more."},
    {"plain_headers", plain_headers, METH_VARARGS,
     "plain_headers(piece, at, base): the plain members from piece[at] on (their headers read as headerarrays.py "
     "reads them, their data whole in the piece), as (names, joined names, kinds, sizes, modes, mtimes, uids, gids, "
     "unames, gnames, header offsets + base, where the run ends in the piece); None when the first is not one."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef many_module = {
    PyModuleDef_HEAD_INIT, "_plainruns", "Many small members' BLAKE3 in one call, one SIMD lane per chunk.", -1,
    many_methods,
};

PyMODINIT_FUNC PyInit__plainruns(void) {
    const char *used = simd_path();
#ifdef HAVE_X86_SIMD_BUILD
    if (!strcmp(used, "avx512")) {
        group_wide = group16, lanes = 16;
    } else if (!strcmp(used, "avx2")) {
        group_wide = group8, lanes = 8;
    }
#endif
    FILE_KIND = PyUnicode_InternFromString("file");
    DIR_KIND = PyUnicode_InternFromString("dir");
    if (!FILE_KIND || !DIR_KIND) return NULL;
    PyObject *m = PyModule_Create(&many_module);
    if (m && PyModule_AddStringConstant(m, "SIMD", used) < 0) Py_CLEAR(m);
    return m;
}
