// The four schemas this repository generates C++ for (generated/cpp), behind one interface,
// for the tests, the codec tool and the fuzz driver: decode whichever message a buffer holds
// in a package named at run time, render it and write it again. Not part of the installed
// package.
#pragma once

#include "alltypes.hpp"
#include "bus.hpp"
#include "exchange.hpp"
#include "pingpong.hpp"

#include <seqbus/codec/runtime.hpp>

#include <array>
#include <stdexcept>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace seqbus::codec::testing {

/// What decoding a message gives, every field read.
struct decoded {
  std::string name;
  std::string json;
  std::vector<std::uint8_t> bytes;  // written again from the view
  std::size_t wire_size = 0;
  std::size_t encoded_size = 0;
  std::uint16_t wire_version = 0;
};

template <class Any>
decoded decode_any(const Any& m) {
  return std::visit(
      [](const auto& v) {
        decoded d;
        d.name = v.NAME;
        d.json = to_json(v);
        d.bytes = encode(v);
        d.wire_size = v.wire_size();
        d.encoded_size = encoded_size(v);
        d.wire_version = v.wire_version();
        return d;
      },
      m);
}

inline constexpr std::array<std::string_view, 4> PACKAGES = {"alltypes", "bus", "exchange",
                                                             "pingpong"};

inline bool known_package(std::string_view p) {
  for (auto k : PACKAGES) {
    if (k == p) return true;
  }
  return false;
}

/// Decodes `b` as a message of IDL package `package` (one of PACKAGES), reading every field;
/// throws decode_error for malformed input.
inline decoded decode_package(std::string_view package, byte_view b) {
  if (package == "alltypes") return decode_any(alltypes::decode(b));
  if (package == "bus") return decode_any(bus::decode(b));
  if (package == "exchange") return decode_any(exchange::decode(b));
  if (package == "pingpong") return decode_any(pingpong::decode(b));
  throw std::invalid_argument("unknown package " + std::string(package));
}

}  // namespace seqbus::codec::testing
