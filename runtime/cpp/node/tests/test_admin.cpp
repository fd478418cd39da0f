// Admin commands without a bus: the C++ twin (admin_twin.hpp) answers every AdminCommand of
// tests/languages/admin_vectors.txt (written by the Python twin: help, conversions, bad and
// unknown commands, Failed, Denied, Python's repr of odd text) with exactly the AdminReply bytes
// the Python node posts; corrupt commands and other accounts' get no reply; registration
// mistakes are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "admin_twin.hpp"

namespace {

std::vector<std::uint8_t> unhex(const std::string& h) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoul(h.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string hex(const std::vector<std::uint8_t>& b) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::uint8_t c : b) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::vector<std::uint8_t> command(const std::string& target, std::uint64_t request_id, const std::string& name,
                                  const std::vector<std::string>& args = {}) {
  std::vector<std::uint8_t> out(4096);
  bus::AdminCommandBuilder b(out.data(), out.size());
  b.target(target).request_id(request_id);
  {
    auto g = b.args();
    for (const auto& a : args) {
      auto e = g.next();
      e.value(a);
    }
  }
  b.name(name);
  out.resize(b.finish());
  return out;
}

std::optional<std::vector<std::uint8_t>> answer(AdminTwin& t, const std::vector<std::uint8_t>& c, std::uint64_t seq,
                                                const std::string& sender = "ADMIN") {
  return t.admin_reply(c.data(), c.size(), seq, sender);
}

}  // namespace

TEST(Admin, RepliesAreThePythonNodesByteForByte) {
  std::ifstream in(SEQBUS_ADMIN_VECTORS);
  ASSERT_TRUE(in) << SEQBUS_ADMIN_VECTORS;
  AdminTwin open;
  AdminTwin guarded(std::vector<std::string>{"OPS"});
  open.name("TWIN");
  guarded.name("TWIN");
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string field;
    while (std::getline(ss, field, '\t')) f.push_back(field);
    ASSERT_EQ(f.size(), 5u) << line;
    AdminTwin& node = f[1] == "-" ? open : guarded;
    auto reply = answer(node, unhex(f[3]), std::stoull(f[2]), f[0]);
    EXPECT_EQ(reply ? hex(*reply) : "no reply", f[4]) << line.substr(0, 200);
    ++checked;
  }
  EXPECT_GE(checked, 30);
  EXPECT_EQ(open.stats().admin_commands, static_cast<std::uint64_t>(checked - 3));  // 3 are the guarded twin's
  EXPECT_EQ(open.stats().admin_errors, 0u);
}

TEST(Admin, ALongReplyIsCutAsPythonCutsIt) {
  AdminTwin t;
  t.name("TWIN");
  auto r = answer(t, command("TWIN", 7, "long", {"60001"}), 5);
  ASSERT_TRUE(r);
  bus::AdminReplyView v(r->data(), r->size());
  std::string want;
  for (int i = 0; i < 60000; ++i) want += "\xc3\xa9";
  EXPECT_EQ(v.status(), bus::AdminStatus::Ok);
  EXPECT_EQ(std::string(v.text()), want + "... (1 characters cut)");
  auto whole = answer(t, command("TWIN", 8, "long", {"60000"}), 6);
  EXPECT_EQ(std::string(bus::AdminReplyView(whole->data(), whole->size()).text()), want);
  EXPECT_EQ(seqbus::detail::admin::cut("\xf0\x9f\x98\x80\xf0\x9f\x98\x80", 1), "\xf0\x9f\x98\x80");
}

TEST(Admin, AThrowingHandlerIsFailedCountedAndTheNodeGoesOn) {
  AdminTwin t;
  t.register_admin("boom", "", [](const seqbus::AdminArgs&) -> std::string { throw std::runtime_error("kaboom"); });
  t.register_admin("bad-utf8", "", [](const seqbus::AdminArgs&) { return std::string("\xff"); });
  t.name("TWIN");
  auto r = answer(t, command("TWIN", 9, "boom"), 11);
  ASSERT_TRUE(r);
  bus::AdminReplyView v(r->data(), r->size());
  EXPECT_EQ(v.status(), bus::AdminStatus::Failed);
  EXPECT_EQ(v.text(), "exception: kaboom");
  EXPECT_EQ(v.command_sequence(), 11u);
  EXPECT_EQ(v.request_id(), 9u);
  EXPECT_EQ(v.requester(), "ADMIN");
  auto bad = answer(t, command("TWIN", 10, "bad-utf8"), 12);
  EXPECT_EQ(bus::AdminReplyView(bad->data(), bad->size()).status(), bus::AdminStatus::Failed);
  EXPECT_EQ(t.stats().admin_errors, 2u);
  EXPECT_EQ(t.stats().admin_commands, 2u);
  auto ok = answer(t, command("TWIN", 11, "bump", {"3"}), 13);
  EXPECT_EQ(bus::AdminReplyView(ok->data(), ok->size()).text(), "total 3");
}

TEST(Admin, OtherAccountsAndCorruptCommandsGetNoReply) {
  AdminTwin t;
  t.name("TWIN");
  EXPECT_FALSE(answer(t, command("OTHER", 1, "help"), 3));
  EXPECT_EQ(t.stats().admin_commands, 0u);
  auto good = command("TWIN", 1, "help");
  auto cut = good;
  cut.resize(cut.size() - 2);
  EXPECT_FALSE(answer(t, cut, 4));
  auto bad_utf8 = good;
  bad_utf8.back() = 0xFF;
  EXPECT_FALSE(answer(t, bad_utf8, 5));
  auto bad_target = good;
  bad_target[8] = 0xC3;
  EXPECT_FALSE(answer(t, bad_target, 6));
  EXPECT_EQ(t.stats().admin_errors, 3u);
  EXPECT_EQ(t.stats().admin_commands, 0u);
  EXPECT_TRUE(answer(t, good, 7));
}

TEST(Admin, HelpListsTheCommandsAsPythonDoes) {
  AdminTwin t;
  EXPECT_EQ(t.admin_help(),
            "help - list the admin commands of this node\n"
            "bump AMOUNT [DOUBLE] - add AMOUNT to the total (twice with DOUBLE)\n"
            "echo FIRST [REST...] - join the words\n"
            "long COUNT - a reply of COUNT characters\n"
            "refuse - refuse, as a command whose preconditions fail does\n"
            "scale FACTOR");
}

TEST(Admin, ConversionsFollowPython) {
  using seqbus::AdminType;
  using seqbus::detail::admin::convert;
  EXPECT_EQ(std::get<std::int64_t>(*convert(AdminType::integer, "\xc2\xa0-1_2\n")), -12);
  EXPECT_FALSE(convert(AdminType::integer, "1.0"));
  EXPECT_FALSE(convert(AdminType::integer, "99999999999999999999"));
  EXPECT_EQ(std::get<double>(*convert(AdminType::number, "-Infinity")), -INFINITY);
  EXPECT_EQ(std::get<double>(*convert(AdminType::number, "5.")), 5.0);
  EXPECT_TRUE(std::isnan(std::get<double>(*convert(AdminType::number, "nan"))));
  EXPECT_FALSE(convert(AdminType::number, "1e"));
  EXPECT_FALSE(convert(AdminType::number, "1f"));
  EXPECT_FALSE(convert(AdminType::number, "."));
  EXPECT_TRUE(std::get<bool>(*convert(AdminType::boolean, " Y ")));
  EXPECT_FALSE(convert(AdminType::boolean, "2"));
  EXPECT_EQ(seqbus::detail::admin::repr(std::string("\0\xc2\xa0\xf4\x8f\xbf\xbf", 7)), "'\\x00\\xa0\\U0010ffff'");
}

TEST(Admin, RegistrationMistakesAreRefusedByName) {
  AdminTwin t;
  auto none = [](const seqbus::AdminArgs&) { return std::string(); };
  EXPECT_THROW(t.register_admin("help", "", none), std::invalid_argument);
  EXPECT_THROW(t.register_admin("bump", "", none), std::invalid_argument);
  EXPECT_THROW(t.register_admin("9lives", "", none), std::invalid_argument);
  EXPECT_THROW(t.register_admin(std::string(65, 'x'), "", none), std::invalid_argument);
  auto& c = t.register_admin("ok", "", none);
  c.optional("a", seqbus::AdminType::text);
  try {
    c.param("b", seqbus::AdminType::text);
    FAIL() << "a required parameter after an optional one was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "admin command ok: b is required after an optional parameter");
  }
  c.rest("more", seqbus::AdminType::integer);
  EXPECT_THROW(c.optional("c", seqbus::AdminType::text), std::invalid_argument);
}
