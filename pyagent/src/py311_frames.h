/* Allocation-free reader of a CPython 3.11 thread's Python stack, for use inside malloc hooks.
 *
 * Header-only C (usable from C++), needs no Python headers: the few struct offsets it reads
 * are listed below and checked against the real 3.11 headers (Py_BUILD_CORE,
 * internal/pycore_frame.h) by pyagent/src/check_layout.c, for both pyenv's 3.11.7 and
 * Debian's 3.11.2 (identical layouts; 3.11.x keeps them stable).
 *
 * Safety contract (see docs/cpython.md, "Reading Python stacks"):
 *  - reads only the CALLING thread's frames: only that thread pushes/pops them, so the chain
 *    is stable during the call even when the thread does not hold the GIL;
 *  - never allocates, takes no lock, calls only PyGILState_GetThisThreadState (a
 *    pthread_getspecific) and PyCode_Addr2Line (reads co_linetable);
 *  - a frame whose code object has refcount 0 is being torn down (the malloc/free call comes
 *    from code_dealloc inside _PyFrame_Clear): the walk stops there, as it does at anything
 *    that does not look like a live code object.
 * Symbols are resolved with dlsym(RTLD_DEFAULT): exported by libpython3.11.so (shared build)
 * and by the executable itself in Debian's static build (built with -Xlinker -export-dynamic).
 */
#ifndef GROWTRACE_PY311_FRAMES_H
#define GROWTRACE_PY311_FRAMES_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- CPython 3.11 x86_64 layout (offsets in bytes) ---- */
#define GT_PY311_OB_REFCNT                 0   /* PyObject.ob_refcnt (Py_ssize_t) */
#define GT_PY311_OB_TYPE                   8   /* PyObject.ob_type */
#define GT_PY311_TSTATE_CFRAME            56   /* PyThreadState.cframe (_PyCFrame *) */
#define GT_PY311_CFRAME_CURRENT_FRAME      8   /* _PyCFrame.current_frame */
#define GT_PY311_IFRAME_CODE              32   /* _PyInterpreterFrame.f_code */
#define GT_PY311_IFRAME_PREVIOUS          48   /* _PyInterpreterFrame.previous */
#define GT_PY311_IFRAME_PREV_INSTR        56   /* _PyInterpreterFrame.prev_instr (_Py_CODEUNIT *) */
#define GT_PY311_IFRAME_IS_ENTRY          68   /* _PyInterpreterFrame.is_entry (bool) */
#define GT_PY311_IFRAME_OWNER             69   /* _PyInterpreterFrame.owner (char) */
#define GT_PY311_CODE_FIRSTLINENO         72   /* PyCodeObject.co_firstlineno (int) */
#define GT_PY311_CODE_FILENAME           112   /* PyCodeObject.co_filename */
#define GT_PY311_CODE_NAME               120   /* PyCodeObject.co_name */
#define GT_PY311_CODE_QUALNAME           128   /* PyCodeObject.co_qualname */
#define GT_PY311_CODE_FIRSTTRACEABLE     168   /* PyCodeObject._co_firsttraceable (int) */
#define GT_PY311_CODE_CODE_ADAPTIVE      184   /* PyCodeObject.co_code_adaptive (bytecode) */
#define GT_PY311_FRAME_OWNED_BY_GENERATOR  1
#define GT_PY311_UNICODE_LENGTH           16   /* PyASCIIObject.length */
#define GT_PY311_UNICODE_STATE            32   /* PyASCIIObject.state (bitfield, uint32) */
#define GT_PY311_ASCII_DATA               48   /* sizeof(PyASCIIObject): compact ASCII data */
#define GT_PY311_COMPACT_UTF8_LENGTH      48   /* PyCompactUnicodeObject.utf8_length */
#define GT_PY311_COMPACT_UTF8             56   /* PyCompactUnicodeObject.utf8 */
#define GT_PY311_COMPACT_DATA             72   /* sizeof(PyCompactUnicodeObject) */
/* state bits: interned:2, kind:3, compact:1, ascii:1, ready:1 */
#define GT_PY311_STATE_KIND(s)    (((s) >> 2) & 7u)
#define GT_PY311_STATE_COMPACT(s) (((s) >> 5) & 1u)
#define GT_PY311_STATE_ASCII(s)   (((s) >> 6) & 1u)

typedef struct gt_py311_frame {
    const void *code;      /* PyCodeObject * (alive for the duration of the call) */
    const void *filename;  /* str */
    const void *qualname;  /* str */
    int line;
    int is_entry;          /* last Python frame of one _PyEval_EvalFrameDefault activation */
} gt_py311_frame;

typedef struct gt_py311_syms {
    void *(*get_this_thread_state)(void);       /* PyGILState_GetThisThreadState */
    int (*addr2line)(const void *code, int addr); /* PyCode_Addr2Line */
    const void *code_type;                      /* &PyCode_Type */
    const void *unicode_type;                   /* &PyUnicode_Type */
    const void *eval_frame;                     /* _PyEval_EvalFrameDefault */
} gt_py311_syms;

static gt_py311_syms gt_py311;

/* Returns 0 when every symbol was found. Call once (outside any malloc hook: dlsym may
   allocate), e.g. in the library constructor and again after each dlopen. */
static inline int gt_py311_init(void) {
    gt_py311.get_this_thread_state =
        (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    gt_py311.addr2line = (int (*)(const void *, int))dlsym(RTLD_DEFAULT, "PyCode_Addr2Line");
    gt_py311.code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    gt_py311.unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    gt_py311.eval_frame = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
    return gt_py311.get_this_thread_state && gt_py311.addr2line && gt_py311.code_type &&
                   gt_py311.unicode_type && gt_py311.eval_frame
               ? 0 : -1;
}

#define GT_PY311_AT(base, off, T) (*(T const *)((const char *)(base) + (off)))

/* The calling thread's PyThreadState, or NULL (not a Python thread, or finalising). */
static inline const void *gt_py311_this_thread_state(void) {
    return gt_py311.get_this_thread_state ? gt_py311.get_this_thread_state() : NULL;
}

static inline int gt_py311_is_live(const void *obj, const void *type) {
    if (!obj) return 0;
    intptr_t refcnt = GT_PY311_AT(obj, GT_PY311_OB_REFCNT, intptr_t);
    /* freed memory: glibc and pymalloc write free-list pointers over the first words */
    return GT_PY311_AT(obj, GT_PY311_OB_TYPE, const void *) == type && refcnt > 0 &&
           refcnt < ((intptr_t)1 << 40);
}

/* Innermost first. Returns the number of frames written (<= max). */
static inline size_t gt_py311_read_stack(const void *tstate, gt_py311_frame *out, size_t max) {
    if (!tstate) return 0;
    const void *cframe = GT_PY311_AT(tstate, GT_PY311_TSTATE_CFRAME, const void *);
    if (!cframe) return 0;
    const char *frame = GT_PY311_AT(cframe, GT_PY311_CFRAME_CURRENT_FRAME, const char *);
    size_t n = 0;
    for (size_t guard = 0; frame && n < max && guard < 100000; guard++) {
        const char *code = GT_PY311_AT(frame, GT_PY311_IFRAME_CODE, const char *);
        if (!gt_py311_is_live(code, gt_py311.code_type)) break;
        const char *first = code + GT_PY311_CODE_CODE_ADAPTIVE;
        const char *prev_instr = GT_PY311_AT(frame, GT_PY311_IFRAME_PREV_INSTR, const char *);
        char owner = GT_PY311_AT(frame, GT_PY311_IFRAME_OWNER, char);
        int firsttraceable = GT_PY311_AT(code, GT_PY311_CODE_FIRSTTRACEABLE, int);
        int is_entry = GT_PY311_AT(frame, GT_PY311_IFRAME_IS_ENTRY, uint8_t) != 0;
        /* _PyFrame_IsIncomplete: still running its prologue (COPY_FREE_VARS, MAKE_CELL...) */
        int incomplete = owner != GT_PY311_FRAME_OWNED_BY_GENERATOR &&
                         prev_instr < first + 2 * (ptrdiff_t)firsttraceable;
        if (!incomplete) {
            out[n].code = code;
            out[n].filename = GT_PY311_AT(code, GT_PY311_CODE_FILENAME, const void *);
            out[n].qualname = GT_PY311_AT(code, GT_PY311_CODE_QUALNAME, const void *);
            out[n].line = gt_py311.addr2line(code, (int)(prev_instr - first)); /* bytes */
            out[n].is_entry = is_entry;
            n++;
        } else if (is_entry && n > 0) {
            out[n - 1].is_entry = 1; /* keep the activation boundary */
        }
        frame = GT_PY311_AT(frame, GT_PY311_IFRAME_PREVIOUS, const char *);
    }
    return n;
}

/* Copies a str as UTF-8 (NUL-terminated, truncated to cap-1). Returns the length written.
   Never allocates: compact ASCII is read in place, other strings use their cached UTF-8 or
   are encoded here from their 1/2/4-byte representation. */
static inline size_t gt_py311_str(const void *s, char *out, size_t cap) {
    if (cap == 0) return 0;
    out[0] = '\0';
    if (!gt_py311_is_live(s, gt_py311.unicode_type)) return 0;
    uint32_t state = GT_PY311_AT(s, GT_PY311_UNICODE_STATE, uint32_t);
    intptr_t length = GT_PY311_AT(s, GT_PY311_UNICODE_LENGTH, intptr_t);
    if (!GT_PY311_STATE_COMPACT(state) || length < 0) return 0;
    size_t n = 0;
    if (GT_PY311_STATE_ASCII(state)) {
        n = (size_t)length < cap - 1 ? (size_t)length : cap - 1;
        memcpy(out, (const char *)s + GT_PY311_ASCII_DATA, n);
        out[n] = '\0';
        return n;
    }
    const char *utf8 = GT_PY311_AT(s, GT_PY311_COMPACT_UTF8, const char *);
    if (utf8) {
        intptr_t ulen = GT_PY311_AT(s, GT_PY311_COMPACT_UTF8_LENGTH, intptr_t);
        n = (size_t)ulen < cap - 1 ? (size_t)ulen : cap - 1;
        memcpy(out, utf8, n);
        out[n] = '\0';
        return n;
    }
    unsigned kind = GT_PY311_STATE_KIND(state);
    const unsigned char *data = (const unsigned char *)s + GT_PY311_COMPACT_DATA;
    for (intptr_t i = 0; i < length; i++) {
        uint32_t c = kind == 1 ? data[i] : kind == 2 ? ((const uint16_t *)data)[i]
                                                      : ((const uint32_t *)data)[i];
        char enc[4];
        size_t k;
        if (c < 0x80) { enc[0] = (char)c; k = 1; }
        else if (c < 0x800) { enc[0] = (char)(0xC0 | (c >> 6)); enc[1] = (char)(0x80 | (c & 0x3F)); k = 2; }
        else if (c < 0x10000) { enc[0] = (char)(0xE0 | (c >> 12)); enc[1] = (char)(0x80 | ((c >> 6) & 0x3F)); enc[2] = (char)(0x80 | (c & 0x3F)); k = 3; }
        else { enc[0] = (char)(0xF0 | (c >> 18)); enc[1] = (char)(0x80 | ((c >> 12) & 0x3F)); enc[2] = (char)(0x80 | ((c >> 6) & 0x3F)); enc[3] = (char)(0x80 | (c & 0x3F)); k = 4; }
        if (n + k > cap - 1) break;
        memcpy(out + n, enc, k);
        n += k;
    }
    out[n] = '\0';
    return n;
}

#endif /* GROWTRACE_PY311_FRAMES_H */
