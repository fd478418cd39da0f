// seqbus C++ codec runtime: the errors of decoding and encoding.
//
// Malformed input is reported by throwing seqbus::codec::decode_error, never by undefined
// behaviour or a read outside the buffer; a value that cannot be written (a char[N] text too
// long, a buffer too small, items of a message written out of order) by throwing
// seqbus::codec::encode_error. Exceptions, not error codes: a decoder's accessors return plain
// values (no per-call result to check, no cost on the path that succeeds) and an error found
// deep inside a group iteration leaves the caller's loop at once; the Python (DecodeError) and
// Java codecs report malformed input the same way.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace seqbus::codec {

/// A truncated or corrupt message: where (the message or group path, e.g. "NewOrder.legs"),
/// which field, at which byte offset from the start of the message, and why.
class decode_error : public std::runtime_error {
 public:
  decode_error(std::string where, std::string field, std::size_t offset, std::string detail)
      : std::runtime_error(render(where, field, offset, detail)),
        where_(std::move(where)),
        field_(std::move(field)),
        offset_(offset),
        detail_(std::move(detail)) {}

  /// The message, or the group path inside it, being read ("NewOrder", "NewOrder.legs").
  const std::string& where() const noexcept { return where_; }
  /// The field ("side", "header", "Price.exponent" inside a struct field).
  const std::string& field() const noexcept { return field_; }
  /// Byte offset from the start of the message (its header).
  std::size_t offset() const noexcept { return offset_; }
  /// What is wrong.
  const std::string& detail() const noexcept { return detail_; }

 private:
  static std::string render(const std::string& where, const std::string& field,
                            std::size_t offset, const std::string& detail) {
    std::string s = "cannot decode " + where;
    if (!field.empty()) {
      s += '.';
      s += field;
    }
    s += " at offset " + std::to_string(offset) + ": " + detail;
    return s;
  }

  std::string where_;
  std::string field_;
  std::size_t offset_;
  std::string detail_;
};

/// A value or a sequence of writes that cannot be encoded: which field and why.
class encode_error : public std::runtime_error {
 public:
  encode_error(std::string field, std::string detail)
      : std::runtime_error("cannot encode " + field + ": " + detail),
        field_(std::move(field)),
        detail_(std::move(detail)) {}

  /// The field ("NewOrder.symbol") or the message being written.
  const std::string& field() const noexcept { return field_; }
  /// What is wrong.
  const std::string& detail() const noexcept { return detail_; }

 private:
  std::string field_;
  std::string detail_;
};

}  // namespace seqbus::codec
