// seqbus::Node: the base of C++ application nodes, over the C ABI of the Rust node client
// (<seqbus.h>, libseqbus_ffi: rust/crates/ffi). Link seqbus::node (find_package(seqbus)).
//
// A node is a deterministic state machine over the sequenced stream, as in Python
// (runtime/seqbus/node.py): handlers run one at a time in stream order; inside one,
// sequencer_time() and sequence() are those of the message being handled, so a replay, a late
// joiner and every hot-hot instance of an account compute exactly what the live run computed;
// deterministic timers (set_timer) fire between the same two messages everywhere; post() keeps
// a node's commands in order under back-pressure, so hot-hot instances send the same commands
// and the sequencer keeps the first copy. The protocol (gaps, rewinds, fencing, fragments,
// topics, time records) and the walk over each batch with the node's clock run in Rust, the
// same code as Python's nodes.
//
//   class Printer : public seqbus::Node {
//     void on_message(const seqbus::Message& m) override { ... m.data(), m.size() ... }
//   };
//   Printer p;
//   p.run({"bus.toml", "PRINTER", 1, seqbus::Start::rewind()});
//
// Usually a node derives from the typed base seqc generates for its schema (`seqc generate
// --lang cpp`: exchange_node.hpp, `exchange::ExchangeNode`), which hands each message of the
// schema to its handler as a view reading it in place
// (`void on_new_order(const exchange::NewOrderView&, const seqbus::Message&) override`) and
// sends typed (`send_new_order([&](exchange::NewOrderBuilder& b) { b.order_id(1); ... })`).
#pragma once

#include <seqbus.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace seqbus {

/// An error of the node library: a status code (SEQBUS_ERR_*) and its message.
class error : public std::runtime_error {
 public:
  error(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  /// SEQBUS_ERR_*.
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// Back-pressure: the window of commands in flight is full (or posted commands wait, or the
/// node is not ready to send yet). Poll, then send again; or post().
class back_pressure : public error {
 public:
  using error::error;
};

namespace detail {
[[noreturn]] inline void fail(int code, const std::string& doing) {
  std::string m = doing + ": " + seqbus_last_error() + " (" + seqbus_status_name(code) + ")";
  if (code == SEQBUS_ERR_BACKPRESSURE) throw back_pressure(code, m);
  throw error(code, m);
}

inline int check(int code, const std::string& doing) {
  if (code < 0) fail(code, doing);
  return code;
}

/// A duration as the C ABI's nanoseconds (a negative one as 0).
template <class Rep, class Period>
std::uint64_t nanos(std::chrono::duration<Rep, Period> d) {
  auto n = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return n < 0 ? 0 : static_cast<std::uint64_t>(n);
}
}  // namespace detail

/// Log levels: SEQBUS_LOG_ERROR ... SEQBUS_LOG_TRACE.
enum class Level : int {
  error = SEQBUS_LOG_ERROR,
  warn = SEQBUS_LOG_WARN,
  info = SEQBUS_LOG_INFO,
  debug = SEQBUS_LOG_DEBUG,
};

/// One line among the node library's (stderr by default: `PROGRAM: LEVEL: text`).
inline void log(Level level, const std::string& text) {
  seqbus_log(static_cast<int>(level), text.c_str());
}

/// Where the library's lines and log()'s go: stderr, `program: LEVEL: text`, `level` and
/// above (0: the SEQBUS_LOG environment variable's, info when unset). Call it before the first
/// node opens to name the program; the first call holds for the process.
inline void log_to_stderr(const std::string& program, int level = 0) {
  seqbus_log_to_stderr(program.c_str(), level);
}

/// A message type (IDL schema id, template id).
struct Topic {
  std::uint16_t schema_id;
  std::uint16_t template_id;
};

/// Where a node starts reading the stream.
class Start {
 public:
  /// From the live stream.
  static constexpr Start live() noexcept { return Start(SEQBUS_START_LIVE); }
  /// The whole session from its first message (a late joiner; a hot backup started after the
  /// primary: it recomputes the primary's state and sends the same commands).
  static constexpr Start rewind() noexcept { return Start(SEQBUS_START_REWIND); }
  /// From sequence `seq` (1 or more).
  static Start from(std::uint64_t seq) {
    if (seq < 1) throw std::invalid_argument("seqbus::Start::from: sequences start at 1");
    return Start(seq);
  }
  constexpr std::uint64_t value() const noexcept { return v_; }

 private:
  explicit constexpr Start(std::uint64_t v) noexcept : v_(v) {}
  std::uint64_t v_;
};

/// How a node joins the bus (seqbus.run's arguments).
struct Options {
  /// The bus configuration file (TOML; docs/configuration.md).
  std::string config;
  /// 1 to 8 printable ASCII characters; hot-hot instances of one logical node share it.
  std::string account;
  std::uint16_t instance = 1;
  Start start = Start::live();
  /// The address a node of a udp-unicast bus receives on; empty: the configuration's.
  std::string listen = {};
  /// "stop" or "skip": what a handler that throws does; empty: the configuration's
  /// (node.on_error, [node.accounts.NAME]), else the node's default_on_error().
  std::string on_error = {};
  /// How long to wait for the sequencer to tell the node its next command sequence.
  std::chrono::milliseconds ready_timeout{10000};
  /// How long a stopping node keeps reading the stream for its commands to be sequenced.
  std::chrono::milliseconds drain_timeout{5000};
};

/// A message handed to a handler: a view of the bytes in the node's batch (no copy), valid
/// while the handler runs.
class Message {
 public:
  explicit Message(const SeqbusEvent& e) noexcept : e_(&e) {}

  /// The message's sequence and the sequencer's timestamp of it (ns since the epoch).
  std::uint64_t sequence() const noexcept { return e_->sequence; }
  std::uint64_t time_ns() const noexcept { return e_->time_ns; }
  /// Sent under this node's account (by any of its instances).
  bool mine() const noexcept { return (e_->flags & SEQBUS_FLAG_MINE) != 0; }
  /// The message's IDL header.
  std::uint16_t schema_id() const noexcept { return e_->schema_id; }
  std::uint16_t template_id() const noexcept { return e_->template_id; }
  std::uint16_t version() const noexcept { return e_->version; }
  std::uint16_t block_length() const noexcept { return e_->block_length; }
  /// The whole message, its IDL header included (what a generated view wraps).
  const std::uint8_t* data() const noexcept { return e_->body; }
  std::size_t size() const noexcept { return e_->body_len; }
  /// data() and size() as one value (a generated package's dispatch() and views take it).
  std::pair<const std::uint8_t*, std::size_t> span() const noexcept { return {data(), size()}; }
  /// The sender's account (without its padding), instance and command sequence.
  std::string_view sender() const noexcept {
    const char* a = reinterpret_cast<const char*>(e_->sender);
    std::size_t n = 0;
    while (n < sizeof e_->sender && a[n] != '\0') ++n;
    return {a, n};
  }
  std::uint16_t sender_instance() const noexcept { return e_->sender_instance; }
  std::uint64_t command_seq() const noexcept { return e_->command_seq; }
  /// The event as the C ABI hands it.
  const SeqbusEvent& event() const noexcept { return *e_; }

 private:
  const SeqbusEvent* e_;
};

/// A handler (or timer callback) that threw.
struct HandlerFailure {
  /// The message's sequence (a timer's: the record's that made it due).
  std::uint64_t sequence = 0;
  /// "schema S template T" or "timer".
  std::string message_type;
  /// "on_message", "on_rewound", "timer".
  std::string handler;
  /// The exception's what().
  std::string error;
  /// "stopped" or "skipped".
  std::string action;

  std::string describe() const {
    return handler + " raised at #" + std::to_string(sequence) + " (" + message_type + "): " + error +
           "; " + action;
  }
};

/// Counters a node keeps about what crossed to the application (Python's NodeStats).
struct NodeStats {
  std::uint64_t messages = 0;
  std::uint64_t batches = 0;
  std::uint64_t timers_fired = 0;
  /// Messages not handled: the configuration's skip, or a handler that threw under "skip".
  std::uint64_t skipped = 0;
  std::vector<std::uint64_t> skipped_sequences;
  std::optional<HandlerFailure> last_error;
  /// The handler error that stopped the node (fail-stop).
  std::optional<HandlerFailure> failure;
};

/// The base class of C++ application nodes. Subclass it, override the handlers, run() it.
/// A node is used by one thread (stop() may come from any, and from a signal handler).
class Node {
 public:
  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  virtual ~Node() { close_quietly(); }

  // -- the application's hooks ----------------------------------------------------------

  /// Once, before the first message, with blank state (the node may send).
  virtual void on_opened() {}
  /// Every message of the node's topics, in stream order, that dispatch_typed() did not take:
  /// with a generated node base, the messages of other schemas and unknown templates.
  virtual void on_message(const Message&) {}
  /// A rewinding node has caught up with the live stream.
  virtual void on_rewound() {}
  /// Once when run() stops cleanly (stop(), a signal), after the last batch; not after an
  /// error.
  virtual void on_closed() {}
  /// The message types to deliver; nullopt: every application message.
  virtual std::optional<std::vector<Topic>> topics() const { return std::nullopt; }
  /// What a throwing handler does unless the configuration or Options say: "stop" or "skip".
  virtual const char* default_on_error() const { return "stop"; }

  // -- running it -------------------------------------------------------------------------

  /// Connects, opens (on_opened), handles the stream until stop() (or a signal, with
  /// stop_on_signals), drains what it sent, calls on_closed and closes. A handler error under
  /// "stop" is rethrown here after the node is closed (stats().failure names the message).
  void run(const Options& o) {
    open(o);
    try {
      while (!stopped()) poll_once(std::chrono::milliseconds(50));
      drain(o.drain_timeout);
    } catch (...) {
      close_quietly();
      throw;
    }
    on_closed();
    log(Level::info, who() + ": stopped at sequence " + std::to_string(sequence()) + " (" +
                         (signalled_.load() ? "a signal" : "stop()") + "): " + std::to_string(stats_.messages) +
                         " messages handled, " + std::to_string(bus_stats().commands_sent) + " commands sent");
    close();
  }

  /// Connects to the bus, waits until the node may send (what arrives meanwhile is handled
  /// right after) and calls on_opened(). For a loop of one's own: poll_once(), drain(),
  /// close().
  void open(const Options& o) {
    if (node_ != nullptr) throw std::logic_error("seqbus::Node::open: the node is open already");
    account_ = o.account;
    instance_ = o.instance;
    auto t = topics();
    std::vector<SeqbusTopic> ts;
    if (t) {
      for (const Topic& x : *t) ts.push_back(SeqbusTopic{x.schema_id, x.template_id});
    }
    SeqbusNode* n = nullptr;
    detail::check(seqbus_node_open(o.config.c_str(), o.account.c_str(), o.instance, o.start.value(),
                                   t ? ts.data() : nullptr, ts.size(),
                                   o.listen.empty() ? nullptr : o.listen.c_str(), &n),
                  "seqbus node " + o.account + "/" + std::to_string(o.instance) + ": open " + o.config);
    node_ = n;
    std::string policy = o.on_error;
    if (policy.empty()) {
      int c = seqbus_node_on_error(node_);
      policy = c == SEQBUS_ON_ERROR_SKIP ? "skip" : c == SEQBUS_ON_ERROR_STOP ? "stop" : default_on_error();
    }
    if (policy != "stop" && policy != "skip") {
      close_quietly();
      throw std::invalid_argument("seqbus::Options::on_error must be \"stop\" or \"skip\", not \"" + policy + "\"");
    }
    skip_on_error_ = policy == "skip";
    try {
      detail::check(seqbus_node_wait_ready(node_, detail::nanos(o.ready_timeout)),
                    who() + ": waiting for the sequencer");
      rewinding_ = seqbus_node_is_rewinding(node_) != 0;
      log(Level::info, who() + ": opened");
      on_opened();
    } catch (...) {
      close_quietly();
      throw;
    }
  }

  /// Polls once (waiting at most `timeout`) and handles what came; the number of events.
  std::size_t poll_once(std::chrono::nanoseconds timeout, std::uint32_t max_records = 4096) {
    SeqbusNode* n = handle();
    if (!local_timers_.empty()) {
      auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(local_timers_.front().at -
                                                                        std::chrono::steady_clock::now());
      timeout = std::max(std::min(timeout, left), std::chrono::nanoseconds::zero());
    }
    std::uint32_t records = 0;
    detail::check(seqbus_node_poll(n, max_records, detail::nanos(timeout), &records),
                  who() + ": poll");
    std::size_t events = 0;
    SeqbusEvent e;
    bool any = false;
    for (;;) {
      int rc = detail::check(seqbus_node_next(n, &e), who() + ": next");
      if (rc == SEQBUS_END) break;
      any = true;
      ++events;
      handle_event(e);
    }
    if (any) ++stats_.batches;
    fire_local_timers();
    return events;
  }

  /// Keeps reading the stream until every command the node sent or posted is sequenced, at
  /// most `timeout` (handlers keep running: the node's state follows the stream to there).
  void drain(std::chrono::nanoseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (seqbus_node_posted(handle()) > 0 || seqbus_node_in_flight(handle()) > 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        log(Level::warn, who() + " closes with " + std::to_string(seqbus_node_in_flight(handle())) +
                             " commands in flight and " + std::to_string(seqbus_node_posted(handle())) +
                             " queued, not confirmed by the stream in time");
        return;
      }
      poll_once(std::chrono::milliseconds(50));
    }
  }

  /// Flushes what is queued and closes the node's sockets (again: nothing).
  void close() {
    if (node_ == nullptr) return;
    SeqbusNode* n = std::exchange(node_, nullptr);
    detail::check(seqbus_node_close(n), who() + ": close");
  }

  /// Asks the loop to return after the current batch (from any thread or a signal handler).
  void stop() noexcept { stopping_.store(true, std::memory_order_relaxed); }
  bool stopped() const noexcept { return stopping_.load(std::memory_order_relaxed); }

  // -- what handlers may call -------------------------------------------------------------

  /// The sequencer's timestamp (ns since the epoch) of the message being handled: a
  /// deterministic node's only clock.
  std::uint64_t sequencer_time() const { return seqbus_node_time_ns(handle()); }
  /// The sequence of the message being handled (0 before the first).
  std::uint64_t sequence() const { return node_ == nullptr ? 0 : seqbus_node_sequence(node_); }
  /// True while the node replays history, until on_rewound().
  bool is_rewinding() const noexcept { return rewinding_; }

  /// Sends a command (a whole IDL message, header included); this node's command sequence
  /// for it. Throws back_pressure when the window is full or posted commands wait.
  std::uint64_t send(const void* body, std::size_t size) {
    std::uint64_t seq = 0;
    detail::check(seqbus_node_send(handle(), static_cast<const std::uint8_t*>(body), size, &seq), who() + ": send");
    return seq;
  }
  template <class Bytes>
  std::uint64_t send(const Bytes& b) {
    return send(b.data(), b.size());
  }

  /// Sends a command, or queues a copy when the window is full; queued commands leave in order
  /// as the window drains. What a deterministic node sends then depends only on the stream.
  void post(const void* body, std::size_t size) {
    detail::check(seqbus_node_post(handle(), static_cast<const std::uint8_t*>(body), size), who() + ": post");
  }
  template <class Bytes>
  void post(const Bytes& b) {
    post(b.data(), b.size());
  }
  /// Posted commands waiting for the window.
  std::size_t posted() const { return seqbus_node_posted(handle()); }

  /// Fires `callback` at the first point of the stream whose time is at or after `at_ns`
  /// (deterministic: between the same two messages in every instance and replay; during it
  /// sequencer_time() is the time of the record that made it due). Returns its id.
  std::uint64_t set_timer(std::uint64_t at_ns, std::function<void()> callback) {
    std::uint64_t id = seqbus_node_set_timer(handle(), at_ns);
    timers_.emplace(id, std::move(callback));
    return id;
  }
  /// set_timer(sequencer_time() + delay_ns, callback).
  std::uint64_t set_timer_after(std::uint64_t delay_ns, std::function<void()> callback) {
    return set_timer(sequencer_time() + delay_ns, std::move(callback));
  }
  /// Cancels a deterministic timer; false if it fired or was cancelled already.
  bool cancel_timer(std::uint64_t id) {
    timers_.erase(id);
    return seqbus_node_cancel_timer(handle(), id) != 0;
  }
  /// Fires `callback` after `delay` of this machine's clock: NOT deterministic (a replay or a
  /// hot backup will not fire it at the same point of the stream); for housekeeping that does
  /// not change the node's state.
  void set_local_timer(std::chrono::nanoseconds delay, std::function<void()> callback) {
    LocalTimer t{std::chrono::steady_clock::now() + delay, std::move(callback)};
    auto it = local_timers_.begin();
    while (it != local_timers_.end() && it->at <= t.at) ++it;
    local_timers_.insert(it, std::move(t));
  }

  const std::string& account() const noexcept { return account_; }
  std::uint16_t instance() const noexcept { return instance_; }
  /// What crossed to the application.
  const NodeStats& stats() const noexcept { return stats_; }
  /// The protocol's counters and the library's (received, gaps, retransmits, in_flight...).
  SeqbusStats bus_stats() const {
    SeqbusStats s{};
    detail::check(seqbus_node_stats(handle(), &s), who() + ": stats");
    return s;
  }
  /// The C handle (for the C functions of <seqbus.h>); throws when the node is not open.
  SeqbusNode* handle() const {
    if (node_ == nullptr) throw std::logic_error("seqbus::Node: the node is not open (run() or open() it)");
    return node_;
  }

  /// Marks the node as stopped by a signal (stop_on_signals does).
  void stop_by_signal() noexcept {
    signalled_.store(true, std::memory_order_relaxed);
    stop();
  }

 protected:
  /// Where a generated node base (seqc's `<Package>Node`) hands a message of its schema to the
  /// typed handler of its template and returns true; false (the default) leaves the message to
  /// on_message().
  virtual bool dispatch_typed(const Message&) { return false; }

  /// A message to its handler: the typed one of a generated base, else on_message().
  void deliver(const Message& m) {
    if (!dispatch_typed(m)) on_message(m);
  }

 private:
  struct LocalTimer {
    std::chrono::steady_clock::time_point at;
    std::function<void()> callback;
  };

  std::string who() const { return "node " + account_ + "/" + std::to_string(instance_); }

  void close_quietly() noexcept {
    if (node_ != nullptr) seqbus_node_close(std::exchange(node_, nullptr));
  }

  void handle_event(const SeqbusEvent& e) {
    switch (e.kind) {
      case SEQBUS_EVENT_MESSAGE: {
        ++stats_.messages;
        Message m(e);
        try {
          deliver(m);
        } catch (const std::exception& x) {
          failed(x.what(), e.sequence,
                 "schema " + std::to_string(e.schema_id) + " template " + std::to_string(e.template_id), "on_message");
          stats_.skipped_sequences.push_back(e.sequence);
        }
        break;
      }
      case SEQBUS_EVENT_TIMER: {
        auto it = timers_.find(e.timer_id);
        if (it == timers_.end()) break;
        auto callback = std::move(it->second);
        timers_.erase(it);
        ++stats_.timers_fired;
        try {
          callback();
        } catch (const std::exception& x) {
          failed(x.what(), e.sequence, "timer", "timer");
        }
        break;
      }
      case SEQBUS_EVENT_REWOUND:
        rewinding_ = false;
        on_rewound();
        break;
      default:
        break;
    }
  }

  /// Records a handler error; under "stop" the node stops and the error is rethrown, under
  /// "skip" it is counted and the node goes on.
  void failed(const char* what, std::uint64_t seq, const std::string& type, const std::string& handler) {
    HandlerFailure f{seq, type, handler, what, skip_on_error_ ? "skipped" : "stopped"};
    stats_.last_error = f;
    if (skip_on_error_) {
      ++stats_.skipped;
      log(Level::warn, who() + ": " + f.describe());
      return;
    }
    stats_.failure = f;
    stop();
    log(Level::error, who() + ": " + f.describe());
    throw;
  }

  void fire_local_timers() {
    auto now = std::chrono::steady_clock::now();
    while (!local_timers_.empty() && local_timers_.front().at <= now) {
      auto callback = std::move(local_timers_.front().callback);
      local_timers_.erase(local_timers_.begin());
      callback();
    }
  }

  SeqbusNode* node_ = nullptr;
  std::string account_;
  std::uint16_t instance_ = 0;
  bool rewinding_ = false;
  bool skip_on_error_ = false;
  std::atomic<bool> signalled_{false};
  std::atomic<bool> stopping_{false};
  std::unordered_map<std::uint64_t, std::function<void()>> timers_;
  std::vector<LocalTimer> local_timers_;
  NodeStats stats_;
};

namespace detail {
inline std::atomic<Node*>& signalled_node() {
  static std::atomic<Node*> n{nullptr};
  return n;
}
inline void on_stop_signal(int) {
  Node* n = signalled_node().load();
  if (n != nullptr) n->stop_by_signal();
}
}  // namespace detail

/// SIGINT and SIGTERM stop `node` (its run() returns after the current batch, drains and
/// calls on_closed), as `seqbus node` does for Python nodes.
inline void stop_on_signals(Node& node) {
  detail::signalled_node().store(&node);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = detail::on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace seqbus
