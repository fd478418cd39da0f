// Schema evolution across three versions (tests/compiler/evolution/v1..v3.idl, generated at
// build time by seqbus_generate), in both directions: a reader of any version reads a writer of
// any version (fields the writer lacks as absent or zero, what the reader does not know
// skipped), as the Python codecs do: the bytes and JSON below were written by them.
#include "evo_v1.hpp"
#include "evo_v2.hpp"
#include "evo_v3.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using seqbus::codec::decode_error;

std::vector<std::uint8_t> unhex(const std::string& h) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// the richest Order each version writes (tests/compiler/test_evolution.py's sample())
const char* const WRITTEN[3] = {
    "0c0001003c0001000100000000000000020000000101020000000200000003000400010000006e",
    "160001003c00020001000000000000000200000001fbffffffffffffff010202030000000200000003000104"
    "0002040000000100000007000000010000006e0100000078",
    "1a0001003c00030001000000000000000200000001fbffffffffffffff01584e415302030b00010002000000"
    "030001000000000000e03f0400000102000000090000000200000066310800000000000000040002000000"
    "000000f83f04000001000000000400000101000000070000000100000074010000006e0100000078010000"
    "0063",
};

// READ[w][r]: what a reader of version r+1 sees of writer w+1's message
const char* const READ[3][3] = {
    {R"({"id":1,"qty":2,"legs":[{"ratio":3},{"ratio":4}],"note":"n"})",
     R"({"id":1,"qty":2,"price":null,"kind":"Plain","legs":[{"ratio":3,"side":0},)"
     R"({"ratio":4,"side":0}],"tags":[],"note":"n","extra":""})",
     R"({"id":1,"qty":2,"price":null,"kind":"Plain","venue":"","legs":[{"ratio":3,"side":0,)"
     R"("weight":0.0,"fills":[]},{"ratio":4,"side":0,"weight":0.0,"fills":[]}],"tags":[],)"
     R"("note":"n","extra":"","comment":""})"},
    {R"({"id":1,"qty":2,"legs":[{"ratio":3},{"ratio":4}],"note":"n"})",
     R"({"id":1,"qty":2,"price":-5,"kind":"Fancy","legs":[{"ratio":3,"side":1},)"
     R"({"ratio":4,"side":2}],"tags":[{"tag":7}],"note":"n","extra":"78"})",
     R"({"id":1,"qty":2,"price":-5,"kind":"Fancy","venue":"","legs":[{"ratio":3,"side":1,)"
     R"("weight":0.0,"fills":[]},{"ratio":4,"side":2,"weight":0.0,"fills":[]}],)"
     R"("tags":[{"tag":7,"label":""}],"note":"n","extra":"78","comment":""})"},
    {R"({"id":1,"qty":2,"legs":[{"ratio":3},{"ratio":4}],"note":"n"})",
     R"({"id":1,"qty":2,"price":-5,"kind":"Fancy","legs":[{"ratio":3,"side":1},)"
     R"({"ratio":4,"side":2}],"tags":[{"tag":7}],"note":"n","extra":"78"})",
     R"({"id":1,"qty":2,"price":-5,"kind":"Fancy","venue":"XNAS","legs":[{"ratio":3,"side":1,)"
     R"("weight":0.5,"fills":[{"qty":9,"note":"f1"},{"qty":8,"note":""}]},{"ratio":4,)"
     R"("side":2,"weight":1.5,"fills":[]}],"tags":[{"tag":7,"label":"t"}],"note":"n",)"
     R"("extra":"78","comment":"c"})"},
};

std::vector<std::uint8_t> write_v1() {
  std::vector<std::uint8_t> buf(256);
  evo_v1::OrderBuilder b(buf.data(), buf.size());
  b.id(1).qty(2);
  auto legs = b.legs();
  legs.next().ratio(3);
  legs.next().ratio(4);
  b.note("n");
  buf.resize(b.finish());
  return buf;
}

std::vector<std::uint8_t> write_v2() {
  std::vector<std::uint8_t> buf(256);
  evo_v2::OrderBuilder b(buf.data(), buf.size());
  b.id(1).qty(2).price(-5).kind(evo_v2::Kind::Fancy);
  auto legs = b.legs();
  legs.next().ratio(3).side(1);
  legs.next().ratio(4).side(2);
  b.tags().next().tag(7);
  b.note("n").extra(std::string_view("x"));
  buf.resize(b.finish());
  return buf;
}

std::vector<std::uint8_t> write_v3() {
  std::vector<std::uint8_t> buf(256);
  evo_v3::OrderBuilder b(buf.data(), buf.size());
  b.id(1).qty(2).price(-5).kind(evo_v3::Kind::Fancy).venue("XNAS");
  auto legs = b.legs();
  auto first = legs.next();
  first.ratio(3).side(1).weight(0.5);
  auto fills = first.fills();
  fills.next().qty(9).note("f1");
  fills.next().qty(8);
  legs.next().ratio(4).side(2).weight(1.5);
  b.tags().next().tag(7).label("t");
  b.note("n").extra(std::string_view("x")).comment("c");
  buf.resize(b.finish());
  return buf;
}

std::string read(int reader, const std::vector<std::uint8_t>& bytes) {
  switch (reader) {
    case 1: return to_json(evo_v1::OrderView(bytes.data(), bytes.size()));
    case 2: return to_json(evo_v2::OrderView(bytes.data(), bytes.size()));
    default: return to_json(evo_v3::OrderView(bytes.data(), bytes.size()));
  }
}

TEST(Evolution, EachVersionWritesWhatPythonWrites) {
  EXPECT_EQ(write_v1(), unhex(WRITTEN[0]));
  EXPECT_EQ(write_v2(), unhex(WRITTEN[1]));
  EXPECT_EQ(write_v3(), unhex(WRITTEN[2]));
}

TEST(Evolution, AReaderOfAnyVersionReadsAWriterOfAnyVersion) {
  for (int w = 0; w < 3; ++w) {
    const auto bytes = unhex(WRITTEN[w]);
    for (int r = 0; r < 3; ++r) {
      SCOPED_TRACE("writer " + std::to_string(w + 1) + ", reader " + std::to_string(r + 1));
      EXPECT_EQ(read(r + 1, bytes), READ[w][r]);
    }
  }
  const auto v3 = unhex(WRITTEN[2]);
  const evo_v1::OrderView old(v3.data(), v3.size());
  EXPECT_EQ(old.wire_version(), 3);
  EXPECT_EQ(old.wire_size(), v3.size());
  EXPECT_EQ(old.note(), "n");
  // written again, only what v1 knows is left
  EXPECT_EQ(evo_v1::encode(old), write_v1());
  // an old message written again by a new reader gains the new fields, empty
  const auto v1 = unhex(WRITTEN[0]);
  const evo_v3::OrderView newer(v1.data(), v1.size());
  EXPECT_EQ(to_json(evo_v3::OrderView(evo_v3::encode(newer))), READ[0][2]);
}

TEST(Evolution, ABlockShorterThanVersionOnesIsRefused) {
  auto bytes = unhex(WRITTEN[0]);
  bytes[0] = 4;
  try {
    evo_v3::OrderView v(bytes.data(), bytes.size());
    ADD_FAILURE() << "no error";
  } catch (const decode_error& e) {
    EXPECT_EQ(e.detail(), "block length 4 is shorter than 12");
  }
}

std::vector<std::uint8_t> group(std::uint16_t bl, std::uint8_t ng, std::uint8_t nv,
                                std::uint32_t count) {
  std::vector<std::uint8_t> g(8);
  seqbus::codec::detail::store(g.data(), bl);
  g[2] = ng;
  g[3] = nv;
  seqbus::codec::detail::store(g.data() + 4, count);
  return g;
}

void append(std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

/// An Order header (version 9) and v1 block whose tail holds `ng` groups: the known `legs`
/// (empty), then `tail` (groups v1 does not know), then the `note` string.
std::vector<std::uint8_t> v1_with_unknown_tail(const std::vector<std::uint8_t>& tail,
                                               std::uint8_t ng) {
  std::vector<std::uint8_t> m = {12, 0, 1, 0, 60, 0, 9, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0};
  m.push_back(ng);
  m.push_back(1);
  append(m, group(2, 0, 0, 0));
  append(m, tail);
  append(m, {1, 0, 0, 0, 'n'});
  return m;
}

TEST(Evolution, UnknownGroupsOfANewerWriterAreSkipped) {
  std::vector<std::uint8_t> unknown = group(3, 1, 1, 2);
  append(unknown, {'a', 'b', 'c'});
  append(unknown, group(1, 0, 0, 1));
  append(unknown, {'z', 2, 0, 0, 0, 'h', 'i', 'd', 'e', 'f'});
  append(unknown, group(1, 0, 0, 0));
  append(unknown, {0, 0, 0, 0});
  const auto m = v1_with_unknown_tail(unknown, 2);
  const evo_v1::OrderView v(m.data(), m.size());
  EXPECT_EQ(v.note(), "n");
  EXPECT_EQ(v.wire_version(), 9);
  EXPECT_EQ(v.wire_size(), m.size());
  EXPECT_EQ(to_json(v), R"({"id":1,"qty":2,"legs":[],"note":"n"})");
}

TEST(Evolution, UnknownGroupsNestedTooDeepAreRefused) {
  std::vector<std::uint8_t> deep;
  for (int i = 0; i < 40; ++i) append(deep, group(0, 1, 0, 1));
  append(deep, group(0, 0, 0, 0));
  const auto m = v1_with_unknown_tail(deep, 2);
  try {
    evo_v1::OrderView v(m.data(), m.size());
    ADD_FAILURE() << "no error";
  } catch (const decode_error& e) {
    EXPECT_EQ(e.detail(), "groups nested too deep");
  }
}

TEST(Evolution, ZeroLengthEntriesCannotBeClaimedWithoutBound) {
  auto bytes = unhex(WRITTEN[0]);
  const auto legs = group(0, 0, 0, 0xffffffffu);
  std::copy(legs.begin(), legs.end(), bytes.begin() + 8 + 12 + 2);
  EXPECT_THROW(evo_v1::OrderView(bytes.data(), bytes.size()), decode_error);
  const auto claimed = v1_with_unknown_tail(group(0, 0, 0, 100000), 2);
  try {
    evo_v1::OrderView v(claimed.data(), claimed.size());
    ADD_FAILURE() << "no error";
  } catch (const decode_error& e) {
    EXPECT_EQ(e.detail(), "100000 zero-length entries");
  }
  const auto fair = v1_with_unknown_tail(group(0, 0, 0, 16), 2);
  EXPECT_EQ(evo_v1::OrderView(fair.data(), fair.size()).note(), "n");
}

}  // namespace
