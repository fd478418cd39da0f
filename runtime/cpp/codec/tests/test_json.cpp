// The canonical JSON's scalars: floats as Python's repr() writes them, strings escaped as
// json.dumps(ensure_ascii=False) escapes them.
#include <seqbus/codec/json.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace {

std::string dbl(double v) {
  std::string out;
  seqbus::codec::json::append_double(out, v);
  return out;
}

TEST(Json, FloatsAreWrittenAsPythonReprWritesThem) {
  // each pair: the value and repr(float(value)) in Python 3
  const struct {
    double v;
    const char* repr;
  } cases[] = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {-1.5, "-1.5"},
      {0.1, "0.1"},
      {0.3, "0.3"},
      {100.0, "100.0"},
      {1e15, "1000000000000000.0"},
      {1e16, "1e+16"},
      {1.5e16, "1.5e+16"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {12345678901234567.0, "1.2345678901234568e+16"},
      {1234567890123456.7, "1234567890123456.8"},
      {9007199254740993.0, "9007199254740992.0"},
      {0.0001, "0.0001"},
      {0.00012345, "0.00012345"},
      {1e-05, "1e-05"},
      {-1.5e-05, "-1.5e-05"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {2.5e-10, "2.5e-10"},
      {1e22, "1e+22"},
      {123.456, "123.456"},
      {static_cast<double>(0.1f), "0.10000000149011612"},
      {static_cast<double>(1e10f), "10000000000.0"},
  };
  for (const auto& c : cases) EXPECT_EQ(dbl(c.v), c.repr) << c.repr;
  EXPECT_EQ(dbl(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(dbl(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(dbl(-std::numeric_limits<double>::infinity()), "null");
}

TEST(Json, StringsEscapeQuotesBackslashesAndControlsOnly) {
  std::string out;
  seqbus::codec::json::append_string(out, std::string_view("\xc3\xa9\"\\\n\t\x01 \xe2\x9c\x93\b\f\r\x7f\x1f", 16));
  EXPECT_EQ(out, "\"\xc3\xa9\\\"\\\\\\n\\t\\u0001 \xe2\x9c\x93\\b\\f\\r\x7f\\u001f\"");
}

TEST(Json, HexIsLowercase) {
  const std::uint8_t b[] = {0x00, 0x1a, 0xff};
  std::string out;
  seqbus::codec::json::append_hex(out, b, 3);
  EXPECT_EQ(out, "\"001aff\"");
}

}  // namespace
