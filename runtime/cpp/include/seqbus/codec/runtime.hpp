// seqbus C++ codec runtime: what every header `seqc generate --lang cpp` writes shares.
//
// Reading: a generated view (NewOrderView) wraps the bytes of one whole message (header
// included) without copying them. Wrapping checks the header and walks the message's structure
// once (every group header, entry and variable-length length, unknown ones of a newer writer
// included, against the length of the buffer), so a view that exists has a sound structure;
// each field is read from the buffer only when asked, and values are checked when read (a bool
// or presence byte other than 0 or 1, an enum value the schema does not list, a non-ASCII
// char[N], invalid UTF-8 in a string). Any problem throws decode_error; nothing is read outside
// the buffer and nothing is allocated.
//
// Writing: a generated builder (NewOrderBuilder) writes a message straight into a caller's
// buffer: the fixed fields of a block in any order, its groups and variable-length fields in
// declaration order (the ones skipped are written empty, as are the ones never written when
// finish() is called). Anything that does not fit, or a value the wire cannot carry, throws
// encode_error.
//
// docs/wire-format.md is the format; docs/languages.md shows the generated API.
#pragma once

#include <seqbus/codec/error.hpp>
#include <seqbus/codec/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the seqbus C++ codecs need a little-endian host"
#endif

// The paths that succeed are inlined into the generated accessors; the ones that throw are
// cold and out of line.
#if defined(__GNUC__)
#define SEQBUS_CODEC_COLD __attribute__((cold, noinline))
#define SEQBUS_CODEC_ALWAYS_INLINE __attribute__((always_inline))
#define SEQBUS_CODEC_NOINLINE __attribute__((noinline))
#define SEQBUS_CODEC_INLINE inline __attribute__((always_inline))
#define SEQBUS_CODEC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define SEQBUS_CODEC_COLD
#define SEQBUS_CODEC_ALWAYS_INLINE
#define SEQBUS_CODEC_NOINLINE
#define SEQBUS_CODEC_INLINE inline
#define SEQBUS_CODEC_UNLIKELY(x) (x)
#endif

namespace seqbus::codec {

/// The version of this runtime's interface to generated code: each generated header checks
/// that it was generated for this one (static_assert), so a header and a runtime of different
/// seqc versions do not compile together.
inline constexpr int ABI = 1;
/// Bytes of the message header (block length, template id, schema id, version).
inline constexpr std::size_t HEADER = 8;
/// Deepest nesting of groups a reader follows (seqc allows 16).
inline constexpr std::size_t MAX_DEPTH = 16;
/// Zero-length entries a group may claim: they take no bytes, so no length bounds them.
inline constexpr std::uint32_t MAX_EMPTY_ENTRIES = 65536;

/// A read-only run of bytes that this object does not own (a `bytes` or `byte[N]` field, a
/// buffer to decode). Converts from std::string_view and from contiguous containers of 1-byte
/// elements (std::vector<std::uint8_t>, std::string, std::array<std::uint8_t, N>).
class byte_view {
 public:
  constexpr byte_view() noexcept = default;
  constexpr byte_view(const std::uint8_t* data, std::size_t size) noexcept
      : data_(data), size_(size) {}
  byte_view(std::string_view s) noexcept  // NOLINT: implicit on purpose
      : data_(reinterpret_cast<const std::uint8_t*>(s.data())), size_(s.size()) {}
  template <class C,
            class = std::enable_if_t<
                std::is_class_v<C> &&
                sizeof(*std::data(std::declval<const C&>())) == 1 &&
                std::is_integral_v<std::remove_cv_t<std::remove_reference_t<decltype(
                    *std::data(std::declval<const C&>()))>>>>>
  byte_view(const C& c) noexcept  // NOLINT: implicit on purpose
      : data_(reinterpret_cast<const std::uint8_t*>(std::data(c))), size_(std::size(c)) {}

  constexpr const std::uint8_t* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr const std::uint8_t* begin() const noexcept { return data_; }
  constexpr const std::uint8_t* end() const noexcept { return data_ + size_; }
  constexpr std::uint8_t operator[](std::size_t i) const noexcept { return data_[i]; }
  /// The bytes as characters (a view of the same memory).
  std::string_view chars() const noexcept {
    return {reinterpret_cast<const char*>(data_), size_};
  }

  friend bool operator==(byte_view a, byte_view b) noexcept {
    return a.size_ == b.size_ && (a.size_ == 0 || std::memcmp(a.data_, b.data_, a.size_) == 0);
  }
  friend bool operator!=(byte_view a, byte_view b) noexcept { return !(a == b); }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

namespace detail {

/// What a fixed field the writer did not have reads from (zeros: 0, false, "", absent).
inline constexpr std::uint8_t ZEROS[65536] = {};

template <class T>
inline T load(const std::uint8_t* p) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
inline void store(std::uint8_t* p, T v) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  std::memcpy(p, &v, sizeof v);
}

// -- errors -------------------------------------------------------------------------------

[[noreturn]] SEQBUS_CODEC_COLD inline void fail(const char* where, const char* field,
                                                std::size_t offset, std::string detail) {
  throw decode_error(where, field, offset, std::move(detail));
}

[[noreturn]] SEQBUS_CODEC_COLD inline void truncated(const char* where, const char* field,
                                                     std::size_t offset, std::string what) {
  fail(where, field, offset, what + " runs past the end of the buffer");
}

[[noreturn]] SEQBUS_CODEC_COLD inline void fail_encode(const char* field, std::string detail) {
  throw encode_error(field, std::move(detail));
}

[[noreturn]] SEQBUS_CODEC_COLD inline void bad_byte(const char* where, const char* field,
                                                    std::size_t offset, const char* what,
                                                    std::uint8_t b) {
  fail(where, field, offset,
       std::string(what) + " byte is " + std::to_string(b) + ", not 0 or 1");
}

// -- reading ------------------------------------------------------------------------------

/// Throws unless `n` bytes at `pos` lie inside a buffer of `len` bytes.
SEQBUS_CODEC_INLINE void need(std::size_t len, std::size_t pos, std::size_t n,
                              const char* where, const char* field, const char* what) {
  if (SEQBUS_CODEC_UNLIKELY(pos > len || len - pos < n)) truncated(where, field, pos, what);
}

[[noreturn]] SEQBUS_CODEC_COLD inline void bad_header(const std::uint8_t* p, std::size_t len,
                                                      std::uint16_t schema, std::uint16_t tmpl,
                                                      std::size_t min_block,
                                                      const char* where) {
  if (len < HEADER) truncated(where, "header", 0, "message header");
  const std::size_t bl = load<std::uint16_t>(p);
  const std::uint16_t tid = load<std::uint16_t>(p + 2);
  const std::uint16_t sid = load<std::uint16_t>(p + 4);
  if (sid != schema) {
    fail(where, "header", 4,
         "schema id " + std::to_string(sid) + ", expected " + std::to_string(schema));
  }
  if (tid != tmpl) {
    fail(where, "header", 2,
         "template id " + std::to_string(tid) + ", expected " + std::to_string(tmpl));
  }
  if (bl < min_block) {
    fail(where, "header", 0,
         "block length " + std::to_string(bl) + " is shorter than " + std::to_string(min_block));
  }
  truncated(where, "header", 0, "block of " + std::to_string(bl) + " bytes");
}

/// Checks the header of a message of template `tmpl` in schema `schema` and that the buffer
/// holds its block and section header; returns the writer's block length.
SEQBUS_CODEC_INLINE std::size_t check_header(const std::uint8_t* p, std::size_t len,
                                             std::uint16_t schema, std::uint16_t tmpl,
                                             std::size_t min_block, const char* where) {
  if (SEQBUS_CODEC_UNLIKELY(len < HEADER)) bad_header(p, len, schema, tmpl, min_block, where);
  const std::size_t bl = load<std::uint16_t>(p);
  if (SEQBUS_CODEC_UNLIKELY(load<std::uint16_t>(p + 2) != tmpl ||
                            load<std::uint16_t>(p + 4) != schema || bl < min_block ||
                            len - HEADER < bl + 2)) {
    bad_header(p, len, schema, tmpl, min_block, where);
  }
  return bl;
}

/// The template id of the message in `p` after checking that its header is whole and names
/// schema `schema` (a package's decode() dispatches on it).
inline std::uint16_t peek_template(const std::uint8_t* p, std::size_t len, std::uint16_t schema,
                                   const char* where) {
  if (len < HEADER) truncated(where, "header", 0, "message header");
  const std::uint16_t sid = load<std::uint16_t>(p + 4);
  if (sid != schema) {
    fail(where, "header", 4,
         "schema id " + std::to_string(sid) + ", expected " + std::to_string(schema));
  }
  return load<std::uint16_t>(p + 2);
}

[[noreturn]] SEQBUS_CODEC_COLD inline void unknown_template(std::uint16_t tid,
                                                            const char* where) {
  fail(where, "header", 2, "unknown template id " + std::to_string(tid));
}

/// A group's dimension header, laid out as on the wire.
struct group_header {
  std::uint16_t block_length = 0;
  std::uint8_t num_groups = 0;
  std::uint8_t num_vars = 0;
  std::uint32_t count = 0;
};
static_assert(sizeof(group_header) == 8, "group_header is the 8 bytes of the wire");

[[noreturn]] SEQBUS_CODEC_COLD inline void bad_group(const group_header& h, std::size_t pos,
                                                     std::size_t depth, const char* where,
                                                     const char* field) {
  if (depth > MAX_DEPTH) fail(where, field, pos, "groups nested too deep");
  fail(where, field, pos, std::to_string(h.count) + " zero-length entries");
}

/// Reads the group header at `pos` (a group at nesting `depth`, the message's own groups
/// being 1).
SEQBUS_CODEC_INLINE group_header read_group_header(const std::uint8_t* p, std::size_t len,
                                                   std::size_t pos, std::size_t depth,
                                                   const char* where, const char* field) {
  need(len, pos, 8, where, field, "group header");
  const group_header h = load<group_header>(p + pos);
  if (SEQBUS_CODEC_UNLIKELY(depth > MAX_DEPTH ||
                            (h.count > MAX_EMPTY_ENTRIES && h.block_length == 0 &&
                             h.num_groups == 0 && h.num_vars == 0))) {
    bad_group(h, pos, depth, where, field);
  }
  return h;
}

/// The offset just past the variable-length field at `pos`; its length is checked.
SEQBUS_CODEC_INLINE std::size_t skip_var(const std::uint8_t* p, std::size_t len,
                                         std::size_t pos, const char* where,
                                         const char* field) {
  need(len, pos, 4, where, field, "length of variable-length field");
  const std::uint32_t n = load<std::uint32_t>(p + pos);
  if (SEQBUS_CODEC_UNLIKELY(len - pos - 4 < n)) {
    truncated(where, field, pos, "variable-length field of " + std::to_string(n) + " bytes");
  }
  return pos + 4 + n;
}

template <class = void>
SEQBUS_CODEC_NOINLINE std::size_t skip_entries(const std::uint8_t* p, std::size_t len,
                                               std::size_t pos, const group_header& h,
                                               std::size_t depth, const char* where,
                                               const char* field);

/// The offset just past the entries at `pos` of a group whose entries have no groups or
/// variable-length fields (all of their size).
SEQBUS_CODEC_INLINE std::size_t skip_fixed_entries(std::size_t len, std::size_t pos,
                                                   const group_header& h, const char* where,
                                                   const char* field) {
  const std::uint64_t total = std::uint64_t{h.block_length} * h.count;
  if (SEQBUS_CODEC_UNLIKELY(total > len - pos)) {
    truncated(where, field, pos, "group of " + std::to_string(h.count) + " entries");
  }
  return pos + static_cast<std::size_t>(total);
}

/// The offset just past the group at `pos` (at nesting `depth`), every entry walked.
SEQBUS_CODEC_INLINE std::size_t skip_group(const std::uint8_t* p, std::size_t len,
                                           std::size_t pos, std::size_t depth,
                                           const char* where, const char* field) {
  const group_header h = read_group_header(p, len, pos, depth, where, field);
  pos += 8;
  if (h.num_groups == 0 && h.num_vars == 0) return skip_fixed_entries(len, pos, h, where, field);
  return skip_entries(p, len, pos, h, depth, where, field);
}

/// The entries of a group whose entries hold groups or variable-length fields, walked.
template <class>
SEQBUS_CODEC_NOINLINE std::size_t skip_entries(const std::uint8_t* p, std::size_t len,
                                               std::size_t pos, const group_header& h,
                                               std::size_t depth, const char* where,
                                               const char* field) {
  for (std::uint32_t i = 0; i < h.count; ++i) {
    need(len, pos, h.block_length, where, field, "group entry");
    pos += h.block_length;
    for (unsigned k = 0; k < h.num_groups; ++k) {
      pos = skip_group(p, len, pos, depth + 1, where, field);
    }
    for (unsigned k = 0; k < h.num_vars; ++k) pos = skip_var(p, len, pos, where, field);
  }
  return pos;
}

/// Walks the tail of a block (its `ng` groups, then its `nv` variable-length fields) starting
/// at `pos`, for a writer whose groups and fields are not the reader's (another version):
/// records where each of the reader's `known_ng` groups and `known_nv` fields starts in `items`
/// (groups first; 0 for one the writer does not have) and returns the offset just past the
/// tail, unknown trailing items included. `depth` is the block's nesting (a message: 0). (For a
/// writer of the reader's own layout the generated views walk the tail themselves.)
/// The headers of the groups whose positions scan_tail_any found (zeros for those at 0).
inline void read_group_headers(const std::uint8_t* p, std::size_t len, const std::size_t* items,
                               group_header* headers, unsigned known_ng, std::size_t depth,
                               const char* where) {
  for (unsigned k = 0; k < known_ng; ++k) {
    headers[k] = items[k] == 0 ? group_header{}
                               : read_group_header(p, len, items[k], depth, where, "");
    // what a group_view of fixed-size entries relies on, checked on the header it will use
    if (headers[k].num_groups == 0 && headers[k].num_vars == 0) {
      skip_fixed_entries(len, items[k] + 8, headers[k], where, "");
    }
  }
}

template <class = void>
SEQBUS_CODEC_NOINLINE std::size_t scan_tail_any(
    const std::uint8_t* p, std::size_t len, std::size_t pos, unsigned ng, unsigned nv,
    std::size_t depth, std::size_t* items, unsigned known_ng, unsigned known_nv,
    const char* where) {
  for (unsigned k = 0; k < known_ng + known_nv; ++k) items[k] = 0;
  for (unsigned k = 0; k < ng; ++k) {
    if (k < known_ng) items[k] = pos;
    pos = skip_group(p, len, pos, depth + 1, where, "");
  }
  for (unsigned k = 0; k < nv; ++k) {
    if (k < known_nv) items[known_ng + k] = pos;
    pos = skip_var(p, len, pos, where, "");
  }
  return pos;
}

SEQBUS_CODEC_INLINE bool load_bool(const std::uint8_t* q, const char* where,
                                   const char* field, std::size_t off) {
  if (SEQBUS_CODEC_UNLIKELY(q[0] > 1)) bad_byte(where, field, off, "bool", q[0]);
  return q[0] != 0;
}

/// The presence byte of an optional field: true if present.
SEQBUS_CODEC_INLINE bool load_presence(const std::uint8_t* q, const char* where,
                                       const char* field, std::size_t off) {
  if (SEQBUS_CODEC_UNLIKELY(q[0] > 1)) bad_byte(where, field, off, "presence", q[0]);
  return q[0] != 0;
}

[[noreturn]] SEQBUS_CODEC_COLD inline void not_ascii(const std::uint8_t* q, std::size_t n,
                                                     const char* where, const char* field,
                                                     std::size_t off) {
  std::size_t i = 0;
  while (i < n && q[i] < 0x80) ++i;
  fail(where, field, off + i, "char field holds a non-ASCII byte");
}

/// A char[n] field: its ASCII text without the NUL or space padding.
SEQBUS_CODEC_INLINE std::string_view load_char(const std::uint8_t* q, std::size_t n,
                                               const char* where, const char* field,
                                               std::size_t off) {
  const auto* text = reinterpret_cast<const char*>(q);
#if defined(__GNUC__)
  if (n <= 8) {
    // all n bytes in one word (the rest zero, read as padding): a high bit is a non-ASCII
    // byte; the last byte that is neither 0 nor 0x20 ends the text
    std::uint64_t w = 0;
    std::memcpy(&w, q, n < 8 ? n : 8);  // n (the min tells compilers it fits)
    constexpr std::uint64_t high = 0x8080808080808080ULL;
    constexpr std::uint64_t low = 0x7f7f7f7f7f7f7f7fULL;
    if (SEQBUS_CODEC_UNLIKELY(w & high)) not_ascii(q, n, where, field, off);
    const std::uint64_t spaces = w ^ 0x2020202020202020ULL;
    const std::uint64_t kept = (w + low) & (spaces + low) & high;
    if (kept == 0) return {text, 0};
    return {text, static_cast<std::size_t>((63 - __builtin_clzll(kept)) / 8 + 1)};
  }
#endif
  while (n > 0 && (q[n - 1] == 0 || q[n - 1] == ' ')) --n;
  for (std::size_t i = 0; i < n; ++i) {
    if (SEQBUS_CODEC_UNLIKELY(q[i] >= 0x80)) not_ascii(q, n, where, field, off);
  }
  return {text, n};
}

/// The length of the longest prefix of `p[0..n)` that is valid UTF-8 (n when all of it is):
/// shortest forms only, no surrogates, nothing above U+10FFFF.
inline std::size_t utf8_valid_prefix(const std::uint8_t* p, std::size_t n) noexcept {
  std::size_t i = 0;
  while (i < n) {
    if (n - i >= 8) {
      if ((load<std::uint64_t>(p + i) & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    const std::uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t more;
    std::uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      more = 1;
    } else if (c == 0xE0) {
      more = 2, lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      more = 2;
    } else if (c == 0xED) {
      more = 2, hi = 0x9F;
    } else if (c == 0xF0) {
      more = 3, lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
      more = 3;
    } else if (c == 0xF4) {
      more = 3, hi = 0x8F;
    } else {
      return i;
    }
    if (n - i <= more) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (std::size_t k = 2; k <= more; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    }
    i += more + 1;
  }
  return n;
}

[[noreturn]] SEQBUS_CODEC_COLD inline void bad_utf8(std::size_t off, const char* where,
                                                    const char* field) {
  fail(where, field, off, "string is not valid UTF-8");
}

/// The `string` field of `n` bytes after its length at `pos` (0: the writer has none), as the
/// walk of the view that holds it found it inside the buffer.
SEQBUS_CODEC_INLINE std::string_view load_string(const std::uint8_t* p, std::size_t pos,
                                                 std::size_t n, const char* where,
                                                 const char* field) {
  if (pos == 0) return {};
  const std::size_t ok = utf8_valid_prefix(p + pos + 4, n);
  if (SEQBUS_CODEC_UNLIKELY(ok != n)) bad_utf8(pos + 4 + ok, where, field);
  return {reinterpret_cast<const char*>(p + pos + 4), n};
}

/// The `bytes` field of `n` bytes after its length at `pos` (0: the writer has none).
SEQBUS_CODEC_INLINE byte_view load_bytes(const std::uint8_t* p, std::size_t pos,
                                         std::size_t n) noexcept {
  if (pos == 0) return {};
  return {p + pos + 4, n};
}

/// The lengths of the variable-length fields whose positions scan_tail_any found (0 for
/// those at 0), each checked again against the buffer.
inline void read_var_lengths(const std::uint8_t* p, std::size_t len, const std::size_t* items,
                             std::size_t* lengths, unsigned known_nv, const char* where) {
  for (unsigned k = 0; k < known_nv; ++k) {
    lengths[k] = items[k] == 0 ? 0 : skip_var(p, len, items[k], where, "") - items[k] - 4;
  }
}

[[noreturn]] SEQBUS_CODEC_COLD inline void bad_enum(const std::string& v, const char* where,
                                                    const char* field, std::size_t off,
                                                    const char* enum_name) {
  fail(where, field, off, v + " is not a value of " + enum_name);
}

/// Checks that an enum read from the wire is one the schema lists (is_valid is generated
/// beside each enum and found by argument-dependent lookup).
template <class E>
SEQBUS_CODEC_INLINE E check_enum(E v, const char* where, const char* field, std::size_t off,
                                 const char* enum_name) {
  if (SEQBUS_CODEC_UNLIKELY(!is_valid(v))) {
    bad_enum(std::to_string(+static_cast<std::underlying_type_t<E>>(v)), where, field, off,
             enum_name);
  }
  return v;
}

/// What a message view and a group entry view share: where the level's block is and how long
/// the writer made it, and where the level ends. A default-constructed view reads as all
/// zeros and empty groups (it looks at ZEROS).
struct level_view {
  const std::uint8_t* buf_ = ZEROS;  // the message's first byte
  std::size_t len_ = 0;              // bytes of the buffer from buf_
  std::size_t at_ = 0;               // offset of the block
  std::size_t bl_ = 0;               // the writer's block length
  std::size_t end_ = 0;              // offset just past the level, its tail included
};

}  // namespace detail

/// The entries of a group, read in order (a range: `for (const auto& leg : order.legs())`).
/// Iterating allocates nothing; each entry is a view of type E.
template <class E>
class group_view {
 public:
  group_view() noexcept = default;
  /// The group at `pos` (0: the writer has none, the group is empty) whose header `h` the view
  /// holding it read and checked when it walked the message.
  SEQBUS_CODEC_ALWAYS_INLINE group_view(const std::uint8_t* buf, std::size_t len, std::size_t pos,
                                        const detail::group_header& h, const char* where,
                                        const char* field)
      : buf_(buf), len_(len), first_(pos + 8), h_(h) {
    if (pos == 0) {
      h_ = {};
      return;
    }
    if (SEQBUS_CODEC_UNLIKELY(h_.count > 0 && h_.block_length < E::MIN_BLOCK_LENGTH)) {
      short_entries(pos, where, field);
    }
    // entries of a fixed size (no groups or fields in them): the walk that read the header
    // checked that all of them lie inside the buffer
    fixed_ = h_.num_groups == 0 && h_.num_vars == 0;
  }

  /// Number of entries.
  std::uint32_t size() const noexcept { return h_.count; }
  bool empty() const noexcept { return h_.count == 0; }

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = E;
    using difference_type = std::ptrdiff_t;
    using pointer = const E*;
    using reference = const E&;

    iterator() noexcept = default;
    reference operator*() const noexcept { return cur_; }
    pointer operator->() const noexcept { return &cur_; }
    SEQBUS_CODEC_ALWAYS_INLINE iterator& operator++() {
      if (--left_ != 0) {
        if (fixed_) {  // the next entry is the next block (checked by the group_view)
          cur_.at_ = cur_.end_;
          cur_.end_ += h_.block_length;
        } else {
          cur_ = E(cur_.buf_, cur_.len_, cur_.end_, h_);
        }
      }
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++*this;
      return old;
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept {
      return a.left_ == b.left_;
    }
    friend bool operator!=(const iterator& a, const iterator& b) noexcept {
      return a.left_ != b.left_;
    }

   private:
    friend class group_view;
    E cur_;
    detail::group_header h_;
    std::uint32_t left_ = 0;
    bool fixed_ = false;
  };

  SEQBUS_CODEC_ALWAYS_INLINE iterator begin() const {
    iterator it;
    if (h_.count == 0) return it;
    it.h_ = h_;
    it.fixed_ = fixed_;
    it.left_ = h_.count;
    it.cur_ = E(buf_, len_, first_, h_);
    return it;
  }
  iterator end() const noexcept { return iterator(); }

 private:
  const std::uint8_t* buf_ = detail::ZEROS;
  std::size_t len_ = 0;
  std::size_t first_ = 0;
  detail::group_header h_;
  bool fixed_ = false;

  [[noreturn]] SEQBUS_CODEC_COLD void short_entries(std::size_t pos, const char* where,
                                                    const char* field) const {
    detail::fail(where, field, pos,
                 "entry block length " + std::to_string(h_.block_length) +
                     " is shorter than " + std::to_string(E::MIN_BLOCK_LENGTH));
  }
};

namespace detail {

// -- writing ------------------------------------------------------------------------------

/// A group or variable-length field of a block, as the builders fill it in when the caller
/// skips it: an empty group (its header with count 0) or an empty field (length 0).
struct item_desc {
  std::uint16_t block_length;
  std::uint8_t num_groups;
  std::uint8_t num_vars;
  bool group;
};

/// The state of one message being written: the caller's buffer, how much is written, and
/// for each level open (the message, the last entry of its group being written, ...) which
/// of its groups and variable-length fields comes next. Levels deeper than `depth` are not
/// read (and not initialized).
struct encoder {
  struct level {
    const item_desc* items;
    std::uint8_t n;     // items of the level
    std::uint8_t next;  // the next item to write
    std::uint8_t* blk;  // the level's block (names the entry)
  };
  std::uint8_t* buf = nullptr;
  std::size_t cap = 0;
  std::size_t pos = 0;
  int depth = 0;  // deepest open level; -1 once finished
  level levels[MAX_DEPTH + 1];

  encoder() noexcept {}  // levels[] is written before it is read
};

[[noreturn]] SEQBUS_CODEC_COLD inline void too_small(const encoder& e, std::size_t n,
                                                     const char* field) {
  fail_encode(field, "a buffer of " + std::to_string(e.cap) + " bytes is too small (" +
                         std::to_string(e.pos) + " written, " + std::to_string(n) +
                         " more needed)");
}

/// `n` bytes at the end of what is written, now counted as written.
SEQBUS_CODEC_INLINE std::uint8_t* reserve(encoder& e, std::size_t n, const char* field) {
  if (SEQBUS_CODEC_UNLIKELY(e.cap - e.pos < n)) too_small(e, n, field);
  std::uint8_t* q = e.buf + e.pos;
  e.pos += n;
  return q;
}

SEQBUS_CODEC_INLINE void put_group_header(std::uint8_t* q, std::uint16_t bl, std::uint8_t ng,
                                          std::uint8_t nv) noexcept {
  store<std::uint16_t>(q, bl);
  q[2] = ng;
  q[3] = nv;
  store<std::uint32_t>(q + 4, 0);
}

/// Writes level `l`'s items from its next one up to (not including) `upto` empty.
inline void fill(encoder& e, int l, unsigned upto, const char* field) {
  encoder::level& lv = e.levels[l];
  for (unsigned k = lv.next; k < upto; ++k) {
    const item_desc& it = lv.items[k];
    if (it.group) {
      put_group_header(reserve(e, 8, field), it.block_length, it.num_groups, it.num_vars);
    } else {
      store<std::uint32_t>(reserve(e, 4, field), 0);
    }
  }
  if (upto > lv.next) lv.next = static_cast<std::uint8_t>(upto);
}

/// Completes every level deeper than `l` (their remaining items written empty).
inline void close_to(encoder& e, int l, const char* field) {
  while (e.depth > l) {
    fill(e, e.depth, e.levels[e.depth].n, field);
    --e.depth;
  }
}

/// Closes the levels deeper than `l` that are complete (nothing to write for them).
SEQBUS_CODEC_INLINE void pop_complete(encoder& e, int l) noexcept {
  while (e.depth > l && e.levels[e.depth].next == e.levels[e.depth].n) --e.depth;
}

SEQBUS_CODEC_COLD inline void begin_item_slow(encoder& e, int l, const std::uint8_t* blk,
                                              unsigned k, const char* field) {
  if (e.depth < 0) fail_encode(field, "written after finish()");
  if (e.depth < l || e.levels[l].blk != blk) {
    fail_encode(field, "written after its entry was finished (a later entry or a later item "
                       "of an enclosing level was begun)");
  }
  close_to(e, l, field);
  if (k < e.levels[l].next) {
    fail_encode(field, "written out of order: the groups and then the variable-length fields "
                       "of a block are written in declaration order, each once");
  }
  fill(e, l, k, field);
  e.levels[l].next = static_cast<std::uint8_t>(k + 1);
}

/// Before writing item `k` (a group or a variable-length field) of the level whose block is
/// `blk` at nesting `l`: completes deeper levels and writes skipped items empty; throws if the
/// item comes too late.
SEQBUS_CODEC_INLINE void begin_item(encoder& e, int l, const std::uint8_t* blk, unsigned k,
                                    const char* field) {
  pop_complete(e, l);
  encoder::level& lv = e.levels[l];
  if (SEQBUS_CODEC_UNLIKELY(e.depth != l || lv.blk != blk || lv.next != k)) {
    begin_item_slow(e, l, blk, k, field);
    return;
  }
  lv.next = static_cast<std::uint8_t>(k + 1);
}

/// Writes a variable-length field (its u32 length, then its bytes).
SEQBUS_CODEC_INLINE void put_var(encoder& e, int l, const std::uint8_t* blk, unsigned k,
                                 const void* data, std::size_t n, const char* field) {
  begin_item(e, l, blk, k, field);
  if (SEQBUS_CODEC_UNLIKELY(n > 0xFFFFFFFFu)) fail_encode(field, "longer than 4 GiB - 1 bytes");
  std::uint8_t* q = reserve(e, 4 + n, field);
  store<std::uint32_t>(q, static_cast<std::uint32_t>(n));
  if (n != 0) std::memcpy(q + 4, data, n);
}

[[noreturn]] SEQBUS_CODEC_COLD inline void bad_string(const char* field) {
  fail_encode(field, "the string is not valid UTF-8");
}

SEQBUS_CODEC_INLINE void put_string(encoder& e, int l, const std::uint8_t* blk, unsigned k,
                                    std::string_view v, const char* field) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(v.data());
  if (SEQBUS_CODEC_UNLIKELY(utf8_valid_prefix(p, v.size()) != v.size())) bad_string(field);
  put_var(e, l, blk, k, p, v.size(), field);
}

/// Writes the header of group item `k` (entries counted as they are added).
SEQBUS_CODEC_INLINE std::uint8_t* put_group(encoder& e, int l, const std::uint8_t* blk,
                                            unsigned k, const item_desc& it,
                                            const char* field) {
  begin_item(e, l, blk, k, field);
  std::uint8_t* q = reserve(e, 8, field);
  put_group_header(q, it.block_length, it.num_groups, it.num_vars);
  return q;
}

/// Starts a message: header, zeroed block, section header; level 0 open.
SEQBUS_CODEC_INLINE std::uint8_t* start_message(encoder& e, std::uint8_t* buf, std::size_t cap,
                                                std::uint16_t block_length, std::uint16_t tmpl,
                                                std::uint16_t schema, std::uint16_t version,
                                                const item_desc* items, std::uint8_t ng,
                                                std::uint8_t nv, const char* where) {
  e.buf = buf;
  e.cap = buf == nullptr ? 0 : cap;
  e.pos = 0;
  e.depth = 0;
  std::uint8_t* q = reserve(e, HEADER + block_length + 2u, where);
  store<std::uint16_t>(q, block_length);
  store<std::uint16_t>(q + 2, tmpl);
  store<std::uint16_t>(q + 4, schema);
  store<std::uint16_t>(q + 6, version);
  std::memset(q + HEADER, 0, block_length);
  q[HEADER + block_length] = ng;
  q[HEADER + block_length + 1] = nv;
  e.levels[0] = {items, static_cast<std::uint8_t>(ng + nv), 0, q + HEADER};
  return q + HEADER;
}

/// Completes the message; returns its length.
inline std::size_t finish(encoder& e, const char* where) {
  if (e.depth >= 0) {
    close_to(e, 0, where);
    fill(e, 0, e.levels[0].n, where);
    e.depth = -1;
  }
  return e.pos;
}

SEQBUS_CODEC_INLINE void store_bool(std::uint8_t* q, bool v) noexcept { q[0] = v ? 1 : 0; }

[[noreturn]] SEQBUS_CODEC_COLD inline void bad_char(std::string_view v, std::size_t n,
                                                    const char* field) {
  std::string text;
  json::append_string(text, v);
  for (char c : v) {
    if (static_cast<unsigned char>(c) >= 0x80) fail_encode(field, text + " is not ASCII");
  }
  if (v.size() > n) {
    fail_encode(field, text + " is longer than " + std::to_string(n) + " characters");
  }
  fail_encode(field, text + " ends in padding (a space or a NUL), which readers strip");
}

/// A char[n] field: ASCII, at most n characters, not ending in a space or NUL; NUL padded.
SEQBUS_CODEC_INLINE void store_char(std::uint8_t* q, std::size_t n, std::string_view v,
                                    const char* field) {
  const std::size_t size = v.size();
  if (SEQBUS_CODEC_UNLIKELY(size > n)) bad_char(v, n, field);
  if (size != 0) {
    if (SEQBUS_CODEC_UNLIKELY(v[size - 1] == ' ' || v[size - 1] == '\0')) bad_char(v, n, field);
    std::memcpy(q, v.data(), size);
  }
  std::memset(q + size, 0, n - size);
#if defined(__GNUC__)
  if (n <= 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, q, n < 8 ? n : 8);  // n (the min tells compilers it fits)
    if (SEQBUS_CODEC_UNLIKELY(w & 0x8080808080808080ULL)) bad_char(v, n, field);
    return;
  }
#endif
  for (std::size_t i = 0; i < size; ++i) {
    if (SEQBUS_CODEC_UNLIKELY(q[i] >= 0x80)) bad_char(v, n, field);
  }
}

/// A byte[n] field: at most n bytes, zero padded.
SEQBUS_CODEC_INLINE void store_byte(std::uint8_t* q, std::size_t n, byte_view v,
                                    const char* field) {
  if (SEQBUS_CODEC_UNLIKELY(v.size() > n)) {
    fail_encode(field, std::to_string(v.size()) + " bytes do not fit byte[" +
                           std::to_string(n) + "]");
  }
  if (!v.empty()) std::memcpy(q, v.data(), v.size());
  std::memset(q + v.size(), 0, n - v.size());
}

[[noreturn]] SEQBUS_CODEC_COLD inline void bad_enum_value(const std::string& v,
                                                          const char* field,
                                                          const char* enum_name) {
  fail_encode(field, v + " is not a value of " + enum_name);
}

template <class E>
SEQBUS_CODEC_INLINE void store_enum(std::uint8_t* q, E v, const char* field,
                                    const char* enum_name) {
  if (SEQBUS_CODEC_UNLIKELY(!is_valid(v))) {
    bad_enum_value(std::to_string(+static_cast<std::underlying_type_t<E>>(v)), field,
                   enum_name);
  }
  store(q, static_cast<std::underlying_type_t<E>>(v));
}

/// group_builder::next() when the entry before is not complete or the group is not the last
/// item begun: completes what is open, or throws.
SEQBUS_CODEC_COLD inline void next_entry_slow(encoder& e, int level, const std::uint8_t* owner,
                                              unsigned index, const char* field) {
  if (e.depth < level || e.levels[level].blk != owner || e.levels[level].next != index + 1) {
    fail_encode(field, "entry added after a later item of the same block (or after finish()) "
                       "was written");
  }
  close_to(e, level, field);
}

[[noreturn]] SEQBUS_CODEC_COLD inline void too_many_entries(const char* field) {
  fail_encode(field, "more than 4294967295 entries");
}

}  // namespace detail

/// Adds the entries of a group being written, each a builder of type B (`next()`); the count
/// in the group header follows.
template <class B>
class group_builder {
 public:
  group_builder(detail::encoder* e, int level, const std::uint8_t* owner, unsigned index,
                std::uint8_t* header, const char* field) noexcept
      : e_(e),
        owner_(owner),
        header_(header),
        field_(field),
        level_(level),
        index_(index),
        last_end_(e->pos) {}

  /// Starts the next entry (its block zeroed) and completes the one before.
  SEQBUS_CODEC_ALWAYS_INLINE B next() {
    detail::encoder& e = *e_;
    const int child = level_ + 1;
    if constexpr (B::NUM_ITEMS == 0) {
      // entries with no groups or fields of their own open no level (nothing in them is
      // written in order). Nothing written since this builder's last entry (or the header)
      // and the message not finished: the group is still the last item begun in its block.
      if (SEQBUS_CODEC_UNLIKELY(e.pos != last_end_ || e.depth != level_)) {
        if (e.depth != level_ || e.levels[level_].blk != owner_ ||
            e.levels[level_].next != index_ + 1) {
          detail::next_entry_slow(e, level_, owner_, index_, field_);
        }
        count_ = detail::load<std::uint32_t>(header_ + 4);  // another copy of this builder
      }
    } else {
      detail::pop_complete(e, child);
      // the group is still the last item begun in its block, and the entry before (if any)
      // is complete
      if (SEQBUS_CODEC_UNLIKELY(
              (e.depth != level_ && (e.depth != child || e.levels[child].next != B::NUM_ITEMS)) ||
              e.levels[level_].blk != owner_ || e.levels[level_].next != index_ + 1)) {
        detail::next_entry_slow(e, level_, owner_, index_, field_);
      }
      count_ = detail::load<std::uint32_t>(header_ + 4);
    }
    if (SEQBUS_CODEC_UNLIKELY(count_ == 0xFFFFFFFFu)) detail::too_many_entries(field_);
    std::uint8_t* blk = detail::reserve(e, B::BLOCK_LENGTH, field_);
    detail::store<std::uint32_t>(header_ + 4, ++count_);
    if (B::BLOCK_LENGTH != 0) std::memset(blk, 0, B::BLOCK_LENGTH);
    if constexpr (B::NUM_ITEMS != 0) {
      e.depth = child;
      e.levels[child] = {B::ITEMS, static_cast<std::uint8_t>(B::NUM_ITEMS), 0, blk};
    }
    last_end_ = e.pos;
    return B(e_, blk, child);
  }

  /// Entries added so far.
  std::uint32_t size() const noexcept { return detail::load<std::uint32_t>(header_ + 4); }

 private:
  detail::encoder* e_;
  const std::uint8_t* owner_;
  std::uint8_t* header_;
  const char* field_;
  int level_;
  unsigned index_;
  std::size_t last_end_;    // the encoder's position after this builder last wrote
  std::uint32_t count_ = 0;  // entries, as in the header when last_end_ is current
};

}  // namespace seqbus::codec
