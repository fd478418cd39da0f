// seqbus-cpp-codec PACKAGE: the C++ codecs' side of the cross-language contract test.
//
// Reads lines from stdin, each the lowercase hex of one whole message (header and body) of IDL
// package PACKAGE (alltypes, bus, exchange or pingpong); for each writes one line and flushes:
//   {"name":"<Message>","json":<canonical JSON>,"hex":"<the message written again>"}
// or, when the bytes do not decode, {"error":"<the decode error>"}. Exits 0 at end of input,
// 2 on a wrong command line.
#include "../packages.hpp"

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace {

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// The bytes of a hex line, or an error text.
bool unhex(const std::string& line, std::vector<std::uint8_t>& out, std::string& error) {
  if (line.size() % 2 != 0) {
    error = "the line has an odd number (" + std::to_string(line.size()) + ") of hex digits";
    return false;
  }
  out.resize(line.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(line[2 * i]);
    const int lo = nibble(line[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      error = "the line holds a character that is not a hex digit at column " +
              std::to_string(2 * i + (hi < 0 ? 0 : 1) + 1);
      return false;
    }
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  namespace t = seqbus::codec::testing;
  if (argc != 2 || !t::known_package(argv[1])) {
    std::cerr << "usage: seqbus-cpp-codec PACKAGE (alltypes, bus, exchange or pingpong); "
                 "reads hex messages from stdin, one per line\n";
    return 2;
  }
  const std::string package = argv[1];
  std::string line;
  std::vector<std::uint8_t> bytes;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string out;
    std::string error;
    if (!unhex(line, bytes, error)) {
      out = "{\"error\":";
      seqbus::codec::json::append_string(out, error);
      out += '}';
    } else {
      try {
        // an exact-size copy: a read past its end is one past the allocation
        const std::vector<std::uint8_t> exact(bytes);
        const t::decoded d = t::decode_package(package, exact);
        out = "{\"name\":";
        seqbus::codec::json::append_string(out, d.name);
        out += ",\"json\":" + d.json + ",\"hex\":";
        seqbus::codec::json::append_hex(out, d.bytes.data(), d.bytes.size());
        out += '}';
      } catch (const seqbus::codec::decode_error& e) {
        out = "{\"error\":";
        seqbus::codec::json::append_string(out, e.what());
        out += '}';
      } catch (const seqbus::codec::encode_error& e) {
        // a message that decodes always writes again: this is a bug of the codecs, said so
        out = "{\"error\":";
        seqbus::codec::json::append_string(out, std::string("decoded, but cannot be written "
                                                            "again: ") + e.what());
        out += '}';
      }
    }
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
  }
  return 0;
}
