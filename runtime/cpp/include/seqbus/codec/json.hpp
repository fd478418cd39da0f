// seqbus C++ codec runtime: the canonical JSON of decoded values (docs/wire-format.md; the form
// of the shared test vectors in schemas/vectors): compact, keys in declaration order, enums by
// name, flags as integers, bytes and byte[N] as lowercase hex, absent optionals and non-finite
// floats as null, strings with non-ASCII characters kept. Floats are written as Python's
// repr() writes them (the shortest text that reads back to the same double), so every language
// renders a message to the same text.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace seqbus::codec::json {

/// Appends `s` as a JSON string: `"` and `\` escaped, control characters as \n, \r, \t, \b,
/// \f or \u00XX, everything else (UTF-8 included) as is.
inline void append_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

/// Appends `n` bytes at `p` as a JSON string of lowercase hex.
inline void append_hex(std::string& out, const std::uint8_t* p, std::size_t n) {
  static constexpr char hex[] = "0123456789abcdef";
  out.reserve(out.size() + 2 * n + 2);
  out += '"';
  for (std::size_t i = 0; i < n; ++i) {
    out += hex[p[i] >> 4];
    out += hex[p[i] & 15];
  }
  out += '"';
}

/// Appends an integer in decimal.
template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
inline void append_int(std::string& out, T v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

inline void append_bool(std::string& out, bool v) { out += v ? "true" : "false"; }

/// Appends a double as Python's repr() writes it: the shortest digits that read back to `v`;
/// positional notation when the decimal exponent is from -4 to 15 ("0.0001", "1e+16" is the
/// first exponent form), with ".0" when there is no fraction; otherwise "d.ddde+XX" with at
/// least two exponent digits. NaN and the infinities are null.
inline void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  // buf: [-]d[.ddd]e(+|-)XX
  const char* p = buf;
  const char* end = r.ptr;
  if (*p == '-') {
    out += '-';
    ++p;
  }
  char digits[24];
  std::size_t nd = 0;
  while (p < end && *p != 'e') {
    if (*p != '.') digits[nd++] = *p;
    ++p;
  }
  int exp10 = 0;
  if (p < end) {
    ++p;  // 'e'
    const bool neg = *p == '-';
    if (*p == '+' || *p == '-') ++p;
    for (; p < end; ++p) exp10 = exp10 * 10 + (*p - '0');
    if (neg) exp10 = -exp10;
  }
  // the value is 0.d1d2... * 10^decpt
  const int decpt = exp10 + 1;
  const auto nd_i = static_cast<int>(nd);
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (nd > 1) {
      out += '.';
      out.append(digits + 1, nd - 1);
    }
    out += 'e';
    int e = decpt - 1;
    out += e < 0 ? '-' : '+';
    if (e < 0) e = -e;
    if (e < 10) out += '0';
    append_int(out, e);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-decpt), '0');
    out.append(digits, nd);
  } else if (decpt >= nd_i) {
    out.append(digits, nd);
    out.append(static_cast<std::size_t>(decpt - nd_i), '0');
    out += ".0";
  } else {
    out.append(digits, static_cast<std::size_t>(decpt));
    out += '.';
    out.append(digits + decpt, nd - static_cast<std::size_t>(decpt));
  }
}

}  // namespace seqbus::codec::json
