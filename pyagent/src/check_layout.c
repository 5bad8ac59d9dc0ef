/* Checks py311_frames.h's offsets against a CPython 3.11 installation's own headers.
 * Compiled (not run) by pyagent/build.sh and the tests, once per header set:
 *   cc -fsyntax-only -I<python include dir> [-I<platform include dir>] check_layout.c */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <stddef.h>

#include "py311_frames.h"

#define CHECK(off, T, field) _Static_assert(offsetof(T, field) == (off), #T "." #field)
CHECK(GT_PY311_OB_REFCNT, PyObject, ob_refcnt);
CHECK(GT_PY311_OB_TYPE, PyObject, ob_type);
CHECK(GT_PY311_TSTATE_CFRAME, PyThreadState, cframe);
CHECK(GT_PY311_CFRAME_CURRENT_FRAME, _PyCFrame, current_frame);
CHECK(GT_PY311_IFRAME_CODE, _PyInterpreterFrame, f_code);
CHECK(GT_PY311_IFRAME_PREVIOUS, _PyInterpreterFrame, previous);
CHECK(GT_PY311_IFRAME_PREV_INSTR, _PyInterpreterFrame, prev_instr);
CHECK(GT_PY311_IFRAME_IS_ENTRY, _PyInterpreterFrame, is_entry);
CHECK(GT_PY311_IFRAME_OWNER, _PyInterpreterFrame, owner);
CHECK(GT_PY311_CODE_FIRSTLINENO, PyCodeObject, co_firstlineno);
CHECK(GT_PY311_CODE_FILENAME, PyCodeObject, co_filename);
CHECK(GT_PY311_CODE_NAME, PyCodeObject, co_name);
CHECK(GT_PY311_CODE_QUALNAME, PyCodeObject, co_qualname);
CHECK(GT_PY311_CODE_FIRSTTRACEABLE, PyCodeObject, _co_firsttraceable);
CHECK(GT_PY311_CODE_CODE_ADAPTIVE, PyCodeObject, co_code_adaptive);
CHECK(GT_PY311_UNICODE_LENGTH, PyASCIIObject, length);
CHECK(GT_PY311_UNICODE_STATE, PyASCIIObject, state);
CHECK(GT_PY311_COMPACT_UTF8_LENGTH, PyCompactUnicodeObject, utf8_length);
CHECK(GT_PY311_COMPACT_UTF8, PyCompactUnicodeObject, utf8);
_Static_assert(sizeof(PyASCIIObject) == GT_PY311_ASCII_DATA, "sizeof PyASCIIObject");
_Static_assert(sizeof(PyCompactUnicodeObject) == GT_PY311_COMPACT_DATA, "sizeof PyCompactUnicodeObject");
_Static_assert(sizeof(_Py_CODEUNIT) == 2, "code unit");
_Static_assert(FRAME_OWNED_BY_GENERATOR == GT_PY311_FRAME_OWNED_BY_GENERATOR, "owner");
_Static_assert(PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000, "CPython 3.11");

/* The state bitfield: build one and read it back with the macros. */
static int check_state_bits(void) {
    PyASCIIObject o;
    memset(&o, 0, sizeof o);
    o.state.kind = PyUnicode_2BYTE_KIND;
    o.state.compact = 1;
    o.state.ascii = 0;
    uint32_t s;
    memcpy(&s, (char *)&o + GT_PY311_UNICODE_STATE, 4);
    return GT_PY311_STATE_KIND(s) == 2 && GT_PY311_STATE_COMPACT(s) && !GT_PY311_STATE_ASCII(s);
}

int main(void) { return check_state_bits() ? 0 : 1; }
