// Writes a Ping with the generated builder, reads it back with the generated view and prints
// its name, canonical JSON and length.
#include "pingpong.hpp"

#include <cstdint>
#include <iostream>

int main() {
  namespace m = consumer::messages;  // --cpp-namespace pingpong=consumer::messages
  std::uint8_t buf[64];
  m::PingBuilder b(buf, sizeof buf);
  b.id(7).sent_at_ns(1700000000000000000);
  const std::size_t n = b.finish();
  const m::PingView ping(buf, n);
  std::cout << ping.NAME << " " << to_json(ping) << " " << n << " bytes\n";
  return ping.id() == 7 ? 0 : 1;
}
