// seqbus::Node on a real bus: a seqbus-sequencer process (SEQBUS_SEQUENCER) on a udp-unicast
// bus (no multicast, so no network namespace), C++ nodes in this process polled in turn.
//   * two nodes see the same messages with the same clock, and their deterministic timers fire
//     at the same records; posts leave in order through a window of 4 commands;
//   * a late joiner rewinds the session: the same stream, the same timers, on_rewound once;
//   * a hot backup (the same account, instance 2, rewinding) sends the same commands as its
//     primary and the sequencer keeps one copy of each;
//   * a handler that throws stops the node ("stop", the default) or is skipped ("skip");
//   * a generated node base (exchange::ExchangeNode) sends typed, and what it sent comes back to
//     its handler as the codec's bytes; another schema's messages reach on_message.
// Every wait is bounded by time; the sequencer is killed by PID.
#include <seqbus/node.hpp>

#include <exchange_node.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

extern char** environ;

namespace {

using namespace std::chrono_literals;

unsigned free_port() {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
  close(s);
  return ntohs(a.sin_port);
}

/// Whether a UDP socket of this namespace is bound to `port` (/proc/net/udp).
bool udp_bound(unsigned port) {
  std::ifstream f("/proc/net/udp");
  std::string line;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, ":%04X", port);
  std::getline(f, line);
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string slot, local;
    in >> slot >> local;
    if (local.size() >= 5 && local.compare(local.size() - 5, 5, suffix) == 0) return true;
  }
  return false;
}

/// A bus: its configuration and a seqbus-sequencer process.
class Bus {
 public:
  explicit Bus(const std::string& extra = "") {
    char tmpl[] = "/tmp/seqbus-node-bus-XXXXXX";
    dir_ = mkdtemp(tmpl);
    unsigned up = free_port(), rep = free_port();
    std::string subs;
    for (int i = 0; i < 6; ++i) {
      listen_.push_back("127.0.0.1:" + std::to_string(free_port()));
      subs += (i ? ", \"" : "\"") + listen_.back() + "\"";
    }
    config_ = dir_ + "/bus.toml";
    std::ofstream(config_) << "[bus]\nsession = \"CPPNODE\"\n[sequencer]\nupstream = \"127.0.0.1:" << up
                           << "\"\njournal_dir = \"" << dir_ << "/journal\"\nclock_tick_ms = 5\n"
                           << "heartbeat_ms = 50\n[downstream]\ntransport = \"udp-unicast\"\n"
                           << "subscribers = [" << subs << "]\n[replayer]\nlisten = \"127.0.0.1:" << rep
                           << "\"\n[node]\nreplayers = [\"127.0.0.1:" << rep << "\"]\nwindow = 4\n"
                           << extra;
    const char* exe = std::getenv("SEQBUS_SEQUENCER");
    if (exe == nullptr) throw std::runtime_error("SEQBUS_SEQUENCER (the seqbus-sequencer program) is not set");
    std::string log = dir_ + "/sequencer.log";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char* argv[] = {const_cast<char*>(exe), const_cast<char*>(config_.c_str()), nullptr};
    if (posix_spawn(&pid_, exe, &fa, nullptr, argv, environ) != 0) throw std::runtime_error("cannot start the sequencer");
    posix_spawn_file_actions_destroy(&fa);
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!(udp_bound(up) && udp_bound(rep))) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        throw std::runtime_error("the sequencer stopped at start; see " + log);
      }
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("the sequencer did not bind in 20 s");
      std::this_thread::sleep_for(5ms);
    }
  }
  ~Bus() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  seqbus::Options options(const std::string& account, std::uint16_t instance, seqbus::Start start, int slot) const {
    seqbus::Options o{config_, account, instance, start};
    o.listen = listen_.at(static_cast<std::size_t>(slot));
    return o;
  }
  std::string variant(const std::string& name, const std::string& extra) const {
    std::ifstream in(config_);
    std::stringstream text;
    text << in.rdbuf() << extra;
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text.str();
    return path;
  }

 private:
  std::string dir_, config_;
  std::vector<std::string> listen_;
  pid_t pid_ = 0;
};

/// A message body: IDL header (schema 9, `template_id`) and a u32.
std::vector<std::uint8_t> body(std::uint16_t template_id, std::uint32_t n) {
  std::vector<std::uint8_t> b = {4, 0, static_cast<std::uint8_t>(template_id), 0, 9, 0, 1, 0};
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  return b;
}

std::uint32_t payload(const seqbus::Message& m) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{m.data()[8 + i]} << (8 * i);
  return v;
}

/// (sequence, sequencer time, sender, instance-independent command seq, payload)
using Seen = std::tuple<std::uint64_t, std::uint64_t, std::string, std::uint64_t, std::uint16_t, std::uint32_t>;
/// (sequence, time, deadline) of a timer.
using Fired = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>;

/// Records what it sees; posts `count` messages of `template_id` when opened; five timers 20 ms
/// of stream time apart, the first set at the first message of template 1.
class Probe : public seqbus::Node {
 public:
  Probe(std::uint16_t template_id, std::uint32_t count) : template_(template_id), count_(count) {}
  std::vector<Seen> seen;
  std::vector<Fired> fired;
  int rewound = 0;
  bool rewinding_at_first = false;
  std::uint32_t throw_at = 0;  // the payload of a template-2 message whose handler throws

  void on_opened() override {
    for (std::uint32_t i = 0; i < count_; ++i) post(body(template_, i));
  }
  void on_message(const seqbus::Message& m) override {
    if (seen.empty()) rewinding_at_first = is_rewinding();
    EXPECT_EQ(sequence(), m.sequence());
    EXPECT_EQ(sequencer_time(), m.time_ns());
    if (throw_at != 0 && m.template_id() == 2 && payload(m) == throw_at) throw std::runtime_error("a bad message");
    seen.emplace_back(m.sequence(), m.time_ns(), std::string(m.sender()), m.command_seq(), m.template_id(), payload(m));
    if (m.template_id() == 1 && timers_ == 0) arm();
  }
  void on_rewound() override { ++rewound; }
  std::size_t count(std::uint16_t t) const {
    std::size_t n = 0;
    for (const auto& s : seen) n += std::get<4>(s) == t;
    return n;
  }

 private:
  void arm() {
    ++timers_;
    set_timer_after(20'000'000, [this] {
      fired.emplace_back(sequence(), sequencer_time(), 0);
      if (timers_ < 5) arm();
    });
  }
  std::uint16_t template_;
  std::uint32_t count_;
  int timers_ = 0;
};

/// Polls the nodes in turn until `done`, at most `limit`.
template <class Done>
bool poll_until(std::vector<seqbus::Node*> nodes, std::chrono::milliseconds limit, Done done) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    for (auto* n : nodes) n->poll_once(5ms);
  }
  return true;
}

TEST(NodeOnABus, NodesShareTheStreamTimersRewindAndAHotBackupSendsOnce) {
  Bus bus;
  Probe a(1, 30), b(2, 20);
  a.open(bus.options("A", 1, seqbus::Start::rewind(), 0));
  b.open(bus.options("B", 1, seqbus::Start::rewind(), 1));
  auto all = [](const Probe& p) { return p.count(1) == 30 && p.count(2) == 20 && p.fired.size() == 5; };
  ASSERT_TRUE(poll_until({&a, &b}, 30000ms, [&] { return all(a) && all(b); }))
      << "A: " << a.count(1) << "+" << a.count(2) << " timers " << a.fired.size() << "; B: " << b.count(1) << "+"
      << b.count(2) << " timers " << b.fired.size();
  EXPECT_EQ(a.seen, b.seen);
  EXPECT_EQ(a.fired, b.fired);
  for (const auto& [seq, time, at] : a.fired) EXPECT_GT(seq, 0u);
  // each sender's commands once, in the order posted
  std::uint32_t next_a = 0, next_b = 0;
  for (const auto& [seq, time, sender, cmd, t, n] : a.seen) {
    if (sender == "A") {
      EXPECT_EQ(n, next_a++);
      EXPECT_EQ(cmd, n + 1);
    } else {
      EXPECT_EQ(sender, "B");
      EXPECT_EQ(n, next_b++);
    }
  }
  EXPECT_EQ(a.rewound, 1);
  EXPECT_EQ(a.bus_stats().commands_sent, 30u);

  // a late joiner rewinds the session: the same messages and timers, then on_rewound
  Probe late(3, 0);
  late.open(bus.options("LATE", 1, seqbus::Start::rewind(), 2));
  EXPECT_TRUE(late.is_rewinding());
  ASSERT_TRUE(poll_until({&late, &a, &b}, 30000ms, [&] { return all(late) && late.rewound == 1; }));
  EXPECT_TRUE(late.rewinding_at_first);
  EXPECT_FALSE(late.is_rewinding());
  std::vector<Seen> head(late.seen.begin(), late.seen.begin() + static_cast<long>(a.seen.size()));
  EXPECT_EQ(head, a.seen);
  EXPECT_EQ(late.fired, a.fired);

  // a hot backup of A rewinds and posts A's 30 commands again: the sequencer keeps one copy
  Probe backup(1, 30);
  backup.open(bus.options("A", 2, seqbus::Start::rewind(), 3));
  ASSERT_TRUE(poll_until({&backup, &a, &b, &late}, 30000ms, [&] {
    return backup.rewound == 1 && backup.count(1) >= 30 && backup.posted() == 0 &&
           seqbus_node_in_flight(backup.handle()) == 0;
  })) << "backup saw " << backup.count(1) << ", posted " << backup.posted();
  // every command the backup sent is confirmed by the stream; a marker from B sequenced after
  // that: none of them was sequenced again before it
  b.post(body(2, 999));
  ASSERT_TRUE(poll_until({&a, &b, &backup}, 20000ms, [&] { return a.count(2) == 21; }));
  EXPECT_EQ(a.count(1), 30u) << "the backup's commands were sequenced again";
  EXPECT_EQ(backup.count(1), 30u);
  for (const auto& s : backup.seen) {
    if (std::get<2>(s) == "A") {
      EXPECT_LE(std::get<3>(s), 30u);
    }
  }
}

TEST(NodeOnABus, AThrowingHandlerStopsTheNodeOrIsSkipped) {
  Bus bus;
  Probe sender(2, 10);
  sender.open(bus.options("S", 1, seqbus::Start::rewind(), 0));
  Probe skipper(3, 0), stopper(3, 0);
  skipper.throw_at = 4;
  stopper.throw_at = 4;
  auto o = bus.options("SKIP", 1, seqbus::Start::rewind(), 1);
  o.on_error = "skip";
  skipper.open(o);
  stopper.open(bus.options("STOP", 1, seqbus::Start::rewind(), 2));
  ASSERT_TRUE(poll_until({&sender, &skipper}, 20000ms, [&] { return skipper.count(2) == 9; }));
  EXPECT_EQ(skipper.stats().skipped, 1u);
  ASSERT_TRUE(skipper.stats().last_error.has_value());
  EXPECT_EQ(skipper.stats().last_error->action, "skipped");
  EXPECT_FALSE(skipper.stopped());

  bool threw = false;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!threw && std::chrono::steady_clock::now() < deadline) {
    try {
      stopper.poll_once(5ms);
    } catch (const std::runtime_error& e) {
      threw = true;
      EXPECT_STREQ(e.what(), "a bad message");
    }
  }
  ASSERT_TRUE(threw);
  EXPECT_TRUE(stopper.stopped());
  ASSERT_TRUE(stopper.stats().failure.has_value());
  EXPECT_EQ(stopper.stats().failure->handler, "on_message");
  EXPECT_EQ(stopper.count(2), 4u);  // payloads 0..3 before it
}

TEST(NodeOnABus, TheConfigurationsSkipListKeepsAMessageFromTheHandlers) {
  Bus bus;
  Probe sender(2, 6);
  sender.open(bus.options("S", 1, seqbus::Start::rewind(), 0));
  ASSERT_TRUE(poll_until({&sender}, 20000ms, [&] { return sender.count(2) == 6; }));
  auto third = std::get<0>(sender.seen.at(2));
  Probe reader(3, 0);
  auto o = bus.options("READER", 1, seqbus::Start::rewind(), 1);
  o.config = bus.variant("reader.toml", "[node.accounts.READER]\nskip = [" + std::to_string(third) + "]\n");
  reader.open(o);
  ASSERT_TRUE(poll_until({&reader, &sender}, 20000ms, [&] { return reader.rewound == 1 && reader.count(2) == 5; }));
  for (const auto& s : reader.seen) EXPECT_NE(std::get<0>(s), third);
  EXPECT_EQ(reader.bus_stats().skipped, 1u);
}

/// A NewOrder with every kind of field: optional, struct, nested groups, variable-length data.
void fill_order(exchange::NewOrderBuilder& b) {
  b.order_id(42).client_id(7).symbol("AAPL").side(exchange::Side::Sell).quantity(300).stop_price(-5);
  b.price().mantissa(15025).exponent(-2);
  auto legs = b.legs();
  auto leg = legs.next();
  leg.symbol("MSFT").ratio(3).side(exchange::Side::Buy);
  leg.fills().next().qty(10).price(99);
  legs.next().symbol("GOOG").ratio(1).side(exchange::Side::Sell);
  b.account("ACME-1");
  const std::uint8_t memo[] = {1, 2, 3};
  b.memo({memo, sizeof memo});
}

/// Sends a NewOrder and three CancelOrders typed when opened; records what comes back.
class Trader : public exchange::ExchangeNode {
 public:
  std::vector<std::string> calls;
  std::vector<std::vector<std::uint8_t>> mine;
  std::uint64_t sent_seq = 0;

  void on_opened() override {
    sent_seq = send_new_order(fill_order);
    for (std::uint64_t i = 1; i <= 3; ++i) post_cancel_order([i](exchange::CancelOrderBuilder& b) { b.order_id(i); });
  }
  void on_new_order(const exchange::NewOrderView& v, const seqbus::Message& m) override {
    calls.push_back("on_new_order " + std::to_string(v.order_id()));
    if (m.mine()) mine.emplace_back(m.data(), m.data() + m.size());
  }
  void on_cancel_order(const exchange::CancelOrderView& v, const seqbus::Message&) override {
    calls.push_back("on_cancel_order " + std::to_string(v.order_id()));
  }
  void on_message(const seqbus::Message& m) override {
    calls.push_back("on_message " + std::to_string(m.schema_id()) + "/" + std::to_string(m.template_id()));
  }
};

TEST(NodeOnABus, AGeneratedNodeBaseSendsTypedAndItsHandlersGetTheCodecsBytes) {
  std::vector<std::uint8_t> buf(4096);
  exchange::NewOrderBuilder b(buf.data(), buf.size());
  fill_order(b);
  buf.resize(b.finish());
  Bus bus;
  Trader trader;
  Probe other(1, 2);  // two messages of schema 9
  trader.open(bus.options("TRADER", 1, seqbus::Start::rewind(), 0));
  other.open(bus.options("OTHER", 1, seqbus::Start::rewind(), 1));
  ASSERT_TRUE(poll_until({&trader, &other}, 30000ms, [&] { return trader.calls.size() == 6; }))
      << "the trader saw " << trader.calls.size() << " messages";
  EXPECT_EQ(trader.sent_seq, 1u);
  ASSERT_EQ(trader.mine.size(), 1u);
  EXPECT_EQ(trader.mine[0], buf);
  std::vector<std::string> typed, untyped;
  for (const auto& c : trader.calls) (c.rfind("on_message", 0) == 0 ? untyped : typed).push_back(c);
  EXPECT_EQ(typed, (std::vector<std::string>{"on_new_order 42", "on_cancel_order 1", "on_cancel_order 2",
                                             "on_cancel_order 3"}));
  EXPECT_EQ(untyped, (std::vector<std::string>{"on_message 9/1", "on_message 9/1"}));
}

}  // namespace
