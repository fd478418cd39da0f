# The codec support every seqc-generated Cython module cimports (seqbus._codec_support).
# Loads and stores are inline here, so they compile into each module; the rest is called
# across modules. ABI (in the .pyx) changes whenever anything here changes meaning or shape;
# seqc writes the ABI it targets into each generated module, which checks it at import.
# cython: language_level=3
cimport cython
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int8_t, int16_t, int32_t, int64_t
from libc.string cimport memcpy, memset
from cpython.object cimport PyObject, PyTypeObject, Py_TYPE
from cpython.list cimport PyList_GET_SIZE, PyList_SET_ITEM, PyList_Append
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_GET_SIZE, PyBytes_AS_STRING

cdef extern from "Python.h":
    Py_ssize_t PyVectorcall_NARGS(size_t nargsf)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    bint PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    void* PyUnicode_DATA(object o)

cdef extern from *:
    """
    #define seqbus_tuple_items(t) (((PyTupleObject *)(t))->ob_item)
    """
    # the item array of a tuple (borrowed: valid while the tuple is held)
    PyObject** tuple_items "seqbus_tuple_items" (object t)

cdef enum:
    HEADER = 8
    MAX_DEPTH = 16
    MAX_EMPTY_ENTRIES = 65536  # zero-length entries a group may claim
    U32_MAX = 4294967295

# -- loads and stores (little-endian host; memcpy compiles to one unaligned move) -----------

cdef inline uint8_t ld_u8(const uint8_t* q) noexcept nogil:
    return q[0]

cdef inline uint16_t ld_u16(const uint8_t* q) noexcept nogil:
    cdef uint16_t v
    memcpy(&v, q, 2)
    return v

cdef inline uint32_t ld_u32(const uint8_t* q) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, q, 4)
    return v

cdef inline uint64_t ld_u64(const uint8_t* q) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, q, 8)
    return v

cdef extern from "Python.h":
    object PyLong_FromLong(long v)
    object PyLong_FromUnsignedLong(unsigned long v)

cdef inline object py_u64(uint64_t v):
    """A u64 as an int: through ``PyLong_FromLong`` below 2**62 (its one-digit case is
    inline; ``PyLong_FromUnsignedLong``, what Cython calls, counts digits into a general
    allocation)."""
    if v < (<uint64_t>1 << 62):
        return PyLong_FromLong(<long>v)
    return PyLong_FromUnsignedLong(v)

cdef inline int8_t ld_i8(const uint8_t* q) noexcept nogil:
    return <int8_t>q[0]

cdef inline int16_t ld_i16(const uint8_t* q) noexcept nogil:
    cdef int16_t v
    memcpy(&v, q, 2)
    return v

cdef inline int32_t ld_i32(const uint8_t* q) noexcept nogil:
    cdef int32_t v
    memcpy(&v, q, 4)
    return v

cdef inline int64_t ld_i64(const uint8_t* q) noexcept nogil:
    cdef int64_t v
    memcpy(&v, q, 8)
    return v

cdef inline float ld_f32(const uint8_t* q) noexcept nogil:
    cdef float v
    memcpy(&v, q, 4)
    return v

cdef inline double ld_f64(const uint8_t* q) noexcept nogil:
    cdef double v
    memcpy(&v, q, 8)
    return v

cdef inline void st_u8(uint8_t* q, uint8_t v) noexcept nogil:
    q[0] = v

cdef inline void st_u16(uint8_t* q, uint16_t v) noexcept nogil:
    memcpy(q, &v, 2)

cdef inline void st_u32(uint8_t* q, uint32_t v) noexcept nogil:
    memcpy(q, &v, 4)

cdef inline void st_u64(uint8_t* q, uint64_t v) noexcept nogil:
    memcpy(q, &v, 8)

cdef inline void st_i8(uint8_t* q, int8_t v) noexcept nogil:
    q[0] = <uint8_t>v

cdef inline void st_i16(uint8_t* q, int16_t v) noexcept nogil:
    memcpy(q, &v, 2)

cdef inline void st_i32(uint8_t* q, int32_t v) noexcept nogil:
    memcpy(q, &v, 4)

cdef inline void st_i64(uint8_t* q, int64_t v) noexcept nogil:
    memcpy(q, &v, 8)

cdef inline void st_f32(uint8_t* q, float v) noexcept nogil:
    memcpy(q, &v, 4)

cdef inline void st_f64(uint8_t* q, double v) noexcept nogil:
    memcpy(q, &v, 8)

cdef int bad_byte(str msg, str field, Py_ssize_t off, str what, uint8_t b) except -1

cdef inline uint8_t ld_bool(const uint8_t* q, str msg, str field, Py_ssize_t off) except? 2:
    if q[0] > 1:
        bad_byte(msg, field, off, "bool", q[0])
    return q[0]

cdef inline int present(const uint8_t* q, str msg, str field, Py_ssize_t off) except -1:
    if q[0] > 1:
        bad_byte(msg, field, off, "presence", q[0])
    return q[0]

# -- fixed and variable-length text and bytes -------------------------------------------------

cdef str ld_char_checked(const uint8_t* q, Py_ssize_t n, str msg, str field, Py_ssize_t off)

cdef inline str ld_char(const uint8_t* q, Py_ssize_t n, str msg, str field, Py_ssize_t off):
    """A ``char[n]`` field: its ASCII text without the NUL or space padding (inline; a byte
    past ASCII goes to ``ld_char_checked``, which raises the DecodeError naming it)."""
    cdef Py_ssize_t i
    cdef object s
    while n > 0 and (q[n - 1] == 0 or q[n - 1] == 32):
        n -= 1
    for i in range(n):
        if q[i] >= 128:
            return ld_char_checked(q, n, msg, field, off)
    s = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(s), q, n)
    return <str>s
cdef int st_char_checked(uint8_t* q, Py_ssize_t n, object v, str where) except -1

cdef inline bint char_ok(object v, Py_ssize_t n):
    """``v`` is a ``char[n]`` text: an ASCII str of at most ``n`` characters that does not
    end in a space or a NUL (readers strip those, docs/wire-format.md)."""
    cdef Py_ssize_t k
    cdef uint8_t last
    if type(v) is not str or not PyUnicode_IS_ASCII(v):
        return False
    k = PyUnicode_GET_LENGTH(v)
    if k == 0:
        return True
    last = (<const uint8_t*>PyUnicode_DATA(v))[k - 1]
    return k <= n and last != 32 and last != 0

cdef inline int st_char(uint8_t* q, Py_ssize_t n, object v, str where) except -1:
    """Write a ``char[n]`` field (:func:`char_ok`), NUL padded (the common case inline;
    anything else to ``st_char_checked``, which refuses it by name)."""
    if not char_ok(v, n):
        return st_char_checked(q, n, v, where)
    memset(q, 0, n)
    memcpy(q, PyUnicode_DATA(v), PyUnicode_GET_LENGTH(v))
    return 0
cdef int st_byte(uint8_t* q, Py_ssize_t n, object v, str where) except -1
cdef str ld_string(const uint8_t* q, Py_ssize_t n, str msg, str field, Py_ssize_t off)

# -- encoding in one pass, into a buffer that grows ------------------------------------------
# Encoders write forward from ``start``, asking ``room()`` before each store: the first bytes
# go to a buffer on the encoder's stack, and a message that outgrows it moves into a bytes
# object (``obj``, owned) that doubles; ``out_bytes`` hands the result over. A pointer into
# the buffer is valid only until the next ``room()``: keep offsets from ``start`` across it.

cdef enum:
    OUT_STACK = 1024  # bytes of the stack buffer encoders start in

cdef struct Out:
    uint8_t* start
    uint8_t* cap
    PyObject* obj

cdef uint8_t* grow(Out* o, uint8_t* q, Py_ssize_t n) except NULL

cdef inline uint8_t* room(Out* o, uint8_t* q, Py_ssize_t n) except NULL:
    """``q``, or where it moved to, with at least ``n`` bytes writable from it."""
    if o.cap - q >= n:
        return q
    return grow(o, q, n)

cdef inline void out_init(Out* o, uint8_t* stack, Py_ssize_t n) noexcept:
    o.start = stack
    o.cap = stack + n
    o.obj = NULL

cdef bytes out_moved(Out* o, uint8_t* q)

cdef inline bytes out_bytes(Out* o, uint8_t* q):
    """The ``q - start`` bytes written, as bytes (the buffer's own object when it moved)."""
    if o.obj == NULL:
        return PyBytes_FromStringAndSize(<const char*>o.start, q - o.start)
    return out_moved(o, q)

cdef inline void out_free(Out* o) noexcept:
    if o.obj != NULL:
        Py_XDECREF(o.obj)
        o.obj = NULL
cdef uint8_t* put_string_checked(Out* o, uint8_t* q, object v, str where) except NULL
cdef uint8_t* put_bytes_checked(Out* o, uint8_t* q, object v, str where) except NULL

cdef inline uint8_t* put_string(Out* o, uint8_t* q, object v, str where) except NULL:
    """A ``string`` field: u32 length and UTF-8 (an ASCII str inline, the rest checked)."""
    cdef Py_ssize_t n
    if type(v) is not str or not PyUnicode_IS_ASCII(v) or PyUnicode_GET_LENGTH(v) > U32_MAX:
        return put_string_checked(o, q, v, where)
    n = PyUnicode_GET_LENGTH(v)
    q = room(o, q, 4 + n)
    st_u32(q, <uint32_t>n)
    memcpy(q + 4, PyUnicode_DATA(v), n)
    return q + 4 + n

cdef inline uint8_t* put_bytes(Out* o, uint8_t* q, object v, str where) except NULL:
    """A ``bytes`` field: u32 length and the bytes (a bytes object inline, the rest checked)."""
    cdef Py_ssize_t n
    if type(v) is not bytes or PyBytes_GET_SIZE(v) > U32_MAX:
        return put_bytes_checked(o, q, v, where)
    n = PyBytes_GET_SIZE(v)
    q = room(o, q, 4 + n)
    st_u32(q, <uint32_t>n)
    memcpy(q + 4, PyBytes_AS_STRING(v), n)
    return q + 4 + n
cdef uint8_t* put_empty_group(Out* o, uint8_t* q, uint16_t bl, uint8_t ng, uint8_t nv) except NULL
cdef uint8_t* put_empty_var(Out* o, uint8_t* q) except NULL
cdef int too_many(str where) except -1

cdef inline int put_count(Out* o, Py_ssize_t head, Py_ssize_t count, str where) except -1:
    """Write the entry count of the group whose header is ``head`` bytes past the start (the
    entries written: a list that changed length while it was encoded stays consistent)."""
    if count > U32_MAX:
        return too_many(where)
    st_u32(o.start + head + 4, <uint32_t>count)
    return 0

# -- walking the tail (groups, then variable-length data) ------------------------------------

cdef int truncated(str msg, str field, Py_ssize_t off, str what) except -1
cdef Py_ssize_t skip_var(const uint8_t* p, Py_ssize_t n, Py_ssize_t pos, str msg, str field,
                         Py_ssize_t base) except -1
cdef Py_ssize_t skip_group(const uint8_t* p, Py_ssize_t n, Py_ssize_t pos, int depth, str msg,
                           str field, Py_ssize_t base) except -1
cdef Py_ssize_t group_header(const uint8_t* p, Py_ssize_t n, Py_ssize_t pos,
                             Py_ssize_t min_block, str msg, str field, Py_ssize_t base,
                             Py_ssize_t* bl, int* ng, int* nv, Py_ssize_t* count) except -1
cdef Py_ssize_t scan_tail(const uint8_t* p, Py_ssize_t n, Py_ssize_t pos, int ng, int nv,
                          Py_ssize_t* gat, int known_ng, Py_ssize_t* vat, int known_nv,
                          int depth, str msg, str field, Py_ssize_t base) except -1

# -- buffers --------------------------------------------------------------------------------

# The common cases inline (a bytes batch, a window inside it, a header as expected); the rest,
# and every error, out of line.
cdef int get_buffer(object obj, Py_buffer* pybuf, bint writable, const uint8_t** ptr,
                    Py_ssize_t* size) except -1
cdef Py_ssize_t window_checked(Py_ssize_t size, Py_ssize_t offset, Py_ssize_t length,
                               str msg) except -1
cdef Py_ssize_t header_checked(const uint8_t* p, Py_ssize_t n, Py_ssize_t base, uint16_t schema,
                               uint16_t template, Py_ssize_t min_block, str msg) except -1


cdef inline int open_buffer(object obj, Py_buffer* pybuf, bint writable, const uint8_t** ptr,
                            Py_ssize_t* size) except -1:
    """Point at the bytes of ``obj``; returns 1 if ``pybuf`` must be released."""
    if type(obj) is bytes and not writable:
        ptr[0] = <const uint8_t*>PyBytes_AS_STRING(obj)
        size[0] = PyBytes_GET_SIZE(obj)
        return 0
    return get_buffer(obj, pybuf, writable, ptr, size)


cdef inline Py_ssize_t window(Py_ssize_t size, Py_ssize_t offset, Py_ssize_t length,
                              str msg) except -1:
    """The number of bytes a view at ``offset`` may read (``length`` < 0: to the end)."""
    if 0 <= length and 0 <= offset <= size - length:
        return length
    return window_checked(size, offset, length, msg)


cdef inline Py_ssize_t check_header(const uint8_t* p, Py_ssize_t n, Py_ssize_t base,
                                    uint16_t schema, uint16_t template, Py_ssize_t min_block,
                                    str msg) except -1:
    """The block length of the message header at ``p``; DecodeError for a wrong one."""
    cdef uint16_t bl
    if n >= HEADER:
        bl = ld_u16(p)
        if (ld_u16(p + 2) == template and ld_u16(p + 4) == schema and bl >= min_block
                and n - HEADER - 2 >= bl):
            return bl
    return header_checked(p, n, base, schema, template, min_block, msg)
cdef object span(object owner, const uint8_t* p, Py_ssize_t n)


# Where builders write: a writable buffer and the position of the end of what is written.
cdef class Cursor:
    cdef object obj
    cdef Py_buffer pybuf
    cdef bint held
    cdef uint8_t* p
    cdef Py_ssize_t cap
    cdef Py_ssize_t pos
    cdef Py_ssize_t start

    cdef uint8_t* reserve(self, Py_ssize_t n, str where) except NULL


cdef Cursor cursor(object buf, Py_ssize_t offset)
cdef uint8_t* empty_group(Cursor c, uint16_t bl, uint8_t ng, uint8_t nv, str where) except NULL
cdef int empty_var(Cursor c, str where) except -1
cdef int var_into(Cursor c, object v, bint string, str where) except -1


# What every builder has: the shared cursor, where its block starts, which group or
# variable-length field comes next, and the group builder still open.
cdef class Writer:
    cdef Cursor _c
    cdef Py_ssize_t _at
    cdef int _stage
    cdef Writer _child
    cdef Py_ssize_t _count
    cdef Py_ssize_t _i
    cdef str _path
    cdef bint _closed

    cdef int _check_open(self) except -1
    cdef int _close(self) except -1
    cdef int _done(self) except -1


# -- value classes: construction from keyword arguments (a vectorcall per class) ------------

cdef int set_vectorcall(type cls, void* fn) except -1
cdef int set_getattro(type cls, void* fn) except -1
cdef int parse_kwargs(PyObject** args, size_t nargsf, PyObject* kwnames, tuple names,
                      PyObject** out, str cls) except -1

cdef inline PyObject** keywords(PyObject** args, size_t nargsf, PyObject* kwnames, tuple names,
                                PyObject** out, str cls) except NULL:
    """The arguments of a vectorcall by field (NULL where not given): ``args`` itself when
    every field comes as a keyword in declaration order (the names interned: one pointer
    compare each), else ``out``, filled by ``parse_kwargs``."""
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(names)
    if (PyVectorcall_NARGS(nargsf) == 0 and kwnames != NULL
            and PyTuple_GET_SIZE(<object>kwnames) == n):
        for i in range(n):
            if PyTuple_GET_ITEM(<object>kwnames, i) != PyTuple_GET_ITEM(names, i):
                break
        else:
            return args
    parse_kwargs(args, nargsf, kwnames, names, out, cls)
    return out
cdef int fields_of(object entry, tuple names, PyObject** out, str where) except -1
cdef int missing(str cls, str field) except -1
cdef object enum_of_checked(object v, object cls, dict members, str where)
cdef object flags_of_checked(object v, object cls, dict cache, uint64_t limit, str where)
cdef object construct(object cls, dict fields)
cdef object class_function(void* vectorcall, str name, str doc, str params)
cdef object signature(str params)
ctypedef object (*method_fn)(object)
cdef object bound_method(object self, method_fn fn, const char* name)
cdef object view_args(PyObject** args, size_t nargsf, PyObject* kwnames, Py_ssize_t* offset,
                      Py_ssize_t* length, str name)
cdef object value_of_checked(object v, type cls, str where)
cdef list entries_of_checked(object v, type cls, str where)
cdef object str_of_checked(object v, str where)
cdef object char_of_checked(object v, Py_ssize_t n, str where)
cdef int char_padded(str v, str where) except -1
cdef int name_overflow(str cls, type t, tuple names, PyObject** a) except -1

# What constructors store, the common case inline (a member, a value, a str, a list of
# entries, as they are); anything else to the ``_checked`` function, which converts or refuses.

cdef inline object enum_of(object v, object cls, dict members, str where):
    if type(v) is cls:
        return v
    return enum_of_checked(v, cls, members, where)

cdef inline object flags_of(object v, object cls, dict cache, uint64_t limit, str where):
    if type(v) is cls:
        return v
    return flags_of_checked(v, cls, cache, limit, where)

cdef inline object value_of(object v, type cls, str where):
    if type(v) is cls:
        return v
    return value_of_checked(v, cls, where)

cdef inline list entries_of(object v, type cls, str where):
    if type(v) is list:
        for e in <list>v:
            if type(e) is not cls:
                return entries_of_checked(v, cls, where)
        return <list>v
    return entries_of_checked(v, cls, where)

cdef inline object str_of(object v, str where):
    if type(v) is str:
        return v
    return str_of_checked(v, where)

cdef inline object char_of(object v, Py_ssize_t n, str where):
    """A ``char[n]`` field's value (:func:`char_ok`)."""
    if char_ok(v, n):
        return v
    return char_of_checked(v, n, where)
cdef list entry_list(Py_ssize_t count, Py_ssize_t room, Py_ssize_t entry_min)

cdef inline int list_put(list out, Py_ssize_t i, object e) except -1:
    """Entry ``i`` of a list from ``entry_list``: into its slot, or appended past them."""
    if i < PyList_GET_SIZE(out):
        Py_INCREF(e)
        PyList_SET_ITEM(out, i, e)
        return 0
    return PyList_Append(out, e)

# -- group sequences of views: the generated ...Group classes subclass Group ----------------

@cython.no_gc
cdef class Group:
    cdef object _obj
    cdef object _keep
    cdef const uint8_t* _p
    cdef Py_ssize_t _n
    cdef Py_ssize_t _base
    cdef Py_ssize_t _start
    cdef Py_ssize_t _count
    cdef Py_ssize_t _bl
    cdef int _ng
    cdef int _nv

    cdef object _entry(self, Py_ssize_t pos, Py_ssize_t* end)
    cdef object _moved(self, object entry, Py_ssize_t pos, Py_ssize_t* end)
    cdef list _dicts(self)


cdef class GroupIter:
    cdef Group _g
    cdef Py_ssize_t _i
    cdef Py_ssize_t _next
    cdef object _reused
    cdef bint _reuse


# -- handlers: how the dispatch calls a node's on_<message> -----------------------------------

cdef class Handler:
    cdef readonly object func
    cdef readonly str name
    cdef Py_ssize_t _overridden  # instances holding a handler of their own under the name
    cdef dict _own               # id(node) -> (weak reference to the node or the node, handler)

    cdef _forget(self, key)


# Where the dispatch found a node's handler for one message type (call_handler): the class
# (compared by address and version tag, not held), its tag, the Handler it resolves the name
# to (held), or NULL.
cdef struct handler_cache:
    PyTypeObject* type
    unsigned int tag
    PyObject* handler


cdef int call_handler(handler_cache* c, object node, str name, object view,
                      bint mine) except -1
