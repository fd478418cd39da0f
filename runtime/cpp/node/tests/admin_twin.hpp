// The C++ admin twin: tests/languages/admin_twin.py's TwinNode written in C++, with the same
// admin commands and help, so that its AdminReplies are byte for byte the Python node's
// (test_admin.cpp) and a C++ instance can be a hot backup of a Python one (admin_twin.cpp,
// tests/languages/test_admin_nodes.py).
#pragma once

#include <seqbus/node.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pingpong_node.hpp"

class AdminTwin : public pingpong::PingpongNode {
 public:
  explicit AdminTwin(std::optional<std::vector<std::string>> senders = std::nullopt) : senders_(std::move(senders)) {
    using seqbus::AdminArgs;
    using seqbus::AdminType;
    register_admin("bump", "add AMOUNT to the total (twice with DOUBLE)", [this](const AdminArgs& a) {
      total_ += a.boolean(1, false) ? a.integer(0) * 2 : a.integer(0);
      return "total " + std::to_string(total_);
    })
        .param("amount", AdminType::integer)
        .optional("double", AdminType::boolean);
    register_admin("scale", "", [](const AdminArgs& a) {
      return std::string(a.number(0) > 1 ? "scale up" : "scale down");
    }).param("factor", AdminType::number);
    register_admin("echo", "join the words", [](const AdminArgs& a) {
      std::string out = a.text(0);
      for (std::size_t i = 1; i < a.size(); ++i) out += " " + a.text(i);
      return out;
    })
        .param("first", AdminType::text)
        .rest("rest", AdminType::text);
    register_admin("refuse", "refuse, as a command whose preconditions fail does", [this](const AdminArgs&) -> std::string {
      throw seqbus::admin_error("refused at total " + std::to_string(total_));
    });
    register_admin("long", "a reply of COUNT characters", [](const AdminArgs& a) {
      std::string out;
      for (std::int64_t i = 0; i < a.integer(0); ++i) out += "\xc3\xa9";
      return out;
    }).param("count", AdminType::integer);
  }

  std::optional<std::vector<std::string>> admin_senders() const override { return senders_; }

  void on_ping(const pingpong::PingView& ping, const seqbus::Message& m) override {
    if (m.mine()) return;
    std::uint64_t id = ping.id();
    post_pong([&](pingpong::PongBuilder& b) { b.id(id).ping_sent_at_ns(static_cast<std::uint64_t>(total_)); });
  }

  /// For the tests: names the node without opening it.
  void name(const std::string& account) { name_for_test(account, 1); }

  std::int64_t total_ = 0;

 private:
  std::optional<std::vector<std::string>> senders_;
};
