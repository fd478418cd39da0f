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
//
// Admin commands (`seqbus admin command ACCOUNT NAME ARGS...`, Python's @admin_command): a node
// registers them in its constructor and the node answers every AdminCommand of its account with
// an AdminReply it posts, byte for byte what a Python instance of the account posts (`help` is
// built in):
//
//   register_admin("bump", "add AMOUNT to the total", [this](const seqbus::AdminArgs& a) {
//     total_ += a.integer(0) * (a.boolean(1, false) ? 2 : 1);
//     return "total " + std::to_string(total_);
//   }).param("amount", seqbus::AdminType::integer).optional("double", seqbus::AdminType::boolean);
#pragma once

#include <bus.hpp>  // the codecs of schema bus (seqc, generated/cpp): AdminCommand, AdminReply
#include <seqbus.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
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

// -- admin commands (Python's runtime/seqbus/admin.py) ----------------------------------------

/// The type of an admin command's argument: how its text converts, as Python's annotations
/// str, int, float and bool do.
enum class AdminType {
  /// The text as it came.
  text,
  /// A std::int64_t: Python's int(text) (blanks around, a sign, '_' between digits).
  integer,
  /// A double: Python's float(text) ("1e3", ".5", "inf", "nan"; no hex, no suffix).
  number,
  /// true/false, yes/no, on/off, 1/0, y/n (any case, blanks around).
  boolean,
};

/// Thrown by an admin command's handler to refuse with a message: a Failed reply whose text is
/// what(), not logged as an error (Python's seqbus.AdminError).
class admin_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The converted arguments of one admin command, by position: the declared parameters first
/// (an optional one not given is absent: has()), then what the rest parameter took.
class AdminArgs {
 public:
  using Value = std::variant<std::string, std::int64_t, double, bool>;

  explicit AdminArgs(std::vector<Value> values) : values_(std::move(values)) {}
  std::size_t size() const noexcept { return values_.size(); }
  bool has(std::size_t i) const noexcept { return i < values_.size(); }
  /// Every argument as converted (a rest parameter's from its position on).
  const std::vector<Value>& values() const noexcept { return values_; }

  const std::string& text(std::size_t i) const { return std::get<std::string>(values_.at(i)); }
  std::string text(std::size_t i, std::string absent) const { return has(i) ? text(i) : absent; }
  std::int64_t integer(std::size_t i) const { return std::get<std::int64_t>(values_.at(i)); }
  std::int64_t integer(std::size_t i, std::int64_t absent) const { return has(i) ? integer(i) : absent; }
  double number(std::size_t i) const { return std::get<double>(values_.at(i)); }
  double number(std::size_t i, double absent) const { return has(i) ? number(i) : absent; }
  bool boolean(std::size_t i) const { return std::get<bool>(values_.at(i)); }
  bool boolean(std::size_t i, bool absent) const { return has(i) ? boolean(i) : absent; }

 private:
  std::vector<Value> values_;
};

/// What an admin command runs: its converted arguments in, the reply's text (UTF-8) out.
using AdminHandler = std::function<std::string(const AdminArgs&)>;

namespace detail {
namespace admin {
/// Longest reply text sent, in characters (code points); a longer one is cut and says so.
inline constexpr std::size_t MAX_REPLY_TEXT = 60000;
/// Longest command name echoed in a reply, in characters.
inline constexpr std::size_t MAX_ECHOED_NAME = 64;
inline constexpr const char* HELP = "help";

/// A command's arguments do not fit its parameters: the reply's text.
struct bad_arguments : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The code point at `s[i]` of valid UTF-8 (i moves past it).
inline std::uint32_t next_code_point(std::string_view s, std::size_t& i) {
  auto b = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(s[k])); };
  std::uint32_t c = b(i);
  std::size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (i + n > s.size()) n = s.size() - i;  // not UTF-8: byte by byte
  if (n == 2) c = (c & 0x1F) << 6 | (b(i + 1) & 0x3F);
  if (n == 3) c = (c & 0x0F) << 12 | (b(i + 1) & 0x3F) << 6 | (b(i + 2) & 0x3F);
  if (n == 4) c = (c & 0x07) << 18 | (b(i + 1) & 0x3F) << 12 | (b(i + 2) & 0x3F) << 6 | (b(i + 3) & 0x3F);
  i += n;
  return c;
}

/// Characters (code points) of UTF-8 text: Python's len().
inline std::size_t length(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

/// The first `n` characters of UTF-8 text: Python's s[:n].
inline std::string_view cut(std::string_view s, std::size_t n) {
  std::size_t i = 0;
  for (std::size_t k = 0; k < n && i < s.size(); ++k) next_code_point(s, i);
  return s.substr(0, i);
}

/// Python's str.isspace() of one character.
inline bool is_space(std::uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Python's str.strip().
inline std::string_view strip(std::string_view s) {
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t i = start;
    if (!is_space(next_code_point(s, i))) break;
    start = i;
  }
  s.remove_prefix(start);
  for (;;) {
    std::size_t last = s.size();
    while (last > 0 && (static_cast<unsigned char>(s[last - 1]) & 0xC0) == 0x80) --last;
    if (last == 0) break;
    std::size_t i = last - 1;
    if (!is_space(next_code_point(s, i))) break;
    s.remove_suffix(s.size() - (last - 1));
  }
  return s;
}

/// Python's str.isprintable() of a non-ASCII character, by the ranges of the control, format,
/// separator, surrogate and private-use characters (unassigned ones are taken as printable).
inline bool is_printable(std::uint32_t c) {
  static constexpr std::uint32_t hidden[][2] = {
      {0x80, 0xA0},       {0xAD, 0xAD},       {0x600, 0x605},     {0x61C, 0x61C},     {0x6DD, 0x6DD},
      {0x70F, 0x70F},     {0x890, 0x891},     {0x8E2, 0x8E2},     {0x1680, 0x1680},   {0x180E, 0x180E},
      {0x2000, 0x200F},   {0x2028, 0x202F},   {0x205F, 0x2064},   {0x2066, 0x206F},   {0x3000, 0x3000},
      {0xD800, 0xF8FF},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
      {0x13430, 0x13438}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F},
      {0xF0000, 0x10FFFF},
  };
  for (const auto& r : hidden) {
    if (c >= r[0] && c <= r[1]) return false;
  }
  return true;
}

/// Python's repr() of a str (UTF-8 in and out).
inline std::string repr(std::string_view s) {
  char quote = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, quote);
  char buf[12];
  for (std::size_t i = 0; i < s.size();) {
    std::size_t at = i;
    std::uint32_t c = next_code_point(s, i);
    if (c == static_cast<std::uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F || (c > 0x7F && !is_printable(c))) {
      std::snprintf(buf, sizeof buf, c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x", c);
      out += buf;
    } else {
      out.append(s.substr(at, i - at));
    }
  }
  out += quote;
  return out;
}

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

/// Digits with single '_' between them from `s[i]` on (Python's digitpart); false if none.
inline bool digits(std::string_view s, std::size_t& i, std::string& out) {
  if (i >= s.size() || s[i] < '0' || s[i] > '9') return false;
  out += s[i++];
  while (i < s.size()) {
    if (s[i] >= '0' && s[i] <= '9') {
      out += s[i++];
    } else if (s[i] == '_' && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') {
      ++i;
    } else {
      break;
    }
  }
  return true;
}

/// `text` as `type` converts it; nullopt when it does not.
inline std::optional<AdminArgs::Value> convert(AdminType type, std::string_view text) {
  switch (type) {
    case AdminType::text:
      return AdminArgs::Value(std::string(text));
    case AdminType::integer: {
      std::string_view s = strip(text);
      std::string clean;
      std::size_t i = 0;
      if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
      if (!digits(s, i, clean) || i != s.size()) return std::nullopt;
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(clean.c_str(), &end, 10);
      if (errno == ERANGE) return std::nullopt;  // past an int64 (Python's int has no bound)
      return AdminArgs::Value(static_cast<std::int64_t>(v));
    }
    case AdminType::number: {
      std::string_view s = strip(text);
      std::string low = ascii_lower(s);
      std::size_t i = 0;
      bool negative = false;
      if (i < low.size() && (low[i] == '+' || low[i] == '-')) negative = low[i++] == '-';
      std::string_view bare = std::string_view(low).substr(i);
      if (bare == "inf" || bare == "infinity") {
        return AdminArgs::Value(negative ? -std::numeric_limits<double>::infinity()
                                         : std::numeric_limits<double>::infinity());
      }
      if (bare == "nan") return AdminArgs::Value(std::numeric_limits<double>::quiet_NaN());
      std::string clean(s.substr(0, i));
      bool whole = digits(s, i, clean);
      bool fraction = false;
      if (i < s.size() && s[i] == '.') {
        clean += s[i++];
        fraction = digits(s, i, clean);
      }
      if (!whole && !fraction) return std::nullopt;
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        clean += s[i++];
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
        if (!digits(s, i, clean)) return std::nullopt;
      }
      if (i != s.size()) return std::nullopt;
      return AdminArgs::Value(std::strtod(clean.c_str(), nullptr));
    }
    case AdminType::boolean: {
      std::string low = ascii_lower(strip(text));
      if (low == "1" || low == "true" || low == "yes" || low == "on" || low == "y") return AdminArgs::Value(true);
      if (low == "0" || low == "false" || low == "no" || low == "off" || low == "n") return AdminArgs::Value(false);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

inline const char* kind(AdminType t) {
  switch (t) {
    case AdminType::text: return "text";
    case AdminType::integer: return "integer";
    case AdminType::number: return "number";
    case AdminType::boolean: return "true/false";
  }
  return "?";
}

inline bool identifier(std::string_view s, std::size_t longest, bool more) {
  if (s.empty() || s.size() > longest) return false;
  auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!letter(s[0])) return false;
  for (char c : s.substr(1)) {
    if (!letter(c) && !(c >= '0' && c <= '9') && !(more && (c == '.' || c == '-'))) return false;
  }
  return true;
}

inline std::string upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}
}  // namespace admin
}  // namespace detail

/// An admin command a node registered (Node::register_admin): its name, help, handler and
/// positional parameters, added in order by param(), optional() and rest(), as a Python
/// @admin_command method's: required ones first, then optional ones, then at most one rest
/// parameter taking what is left. A mistake is std::invalid_argument when the node registers it.
class AdminCommand {
 public:
  struct Param {
    std::string name;
    AdminType type;
    bool required;
  };

  AdminCommand(std::string name, std::string help, AdminHandler handler)
      : name_(std::move(name)), help_(std::move(help)), handler_(std::move(handler)) {
    if (!detail::admin::identifier(name_, 64, true)) {
      throw std::invalid_argument("admin command name " + detail::admin::repr(name_) +
                                  " must be 1-64 characters of letters, digits, '_', '.' or '-', starting with a "
                                  "letter or '_'");
    }
    if (name_ == detail::admin::HELP) throw std::invalid_argument("admin command 'help' is built in");
    if (!handler_) throw std::invalid_argument("admin command " + name_ + ": no handler");
  }

  /// Adds a required parameter (after every other required one).
  AdminCommand& param(const std::string& name, AdminType type) { return add({name, type, true}); }
  /// Adds an optional parameter (absent when not given: AdminArgs::has).
  AdminCommand& optional(const std::string& name, AdminType type) { return add({name, type, false}); }
  /// Adds the rest parameter: it takes every argument after the others, each of `type`.
  AdminCommand& rest(const std::string& name, AdminType type) {
    check(name);
    rest_ = Param{name, type, false};
    return *this;
  }

  const std::string& name() const noexcept { return name_; }
  const std::string& help() const noexcept { return help_; }
  const std::vector<Param>& params() const noexcept { return params_; }
  const std::optional<Param>& rest_param() const noexcept { return rest_; }
  const AdminHandler& handler() const noexcept { return handler_; }

  /// "bump AMOUNT [DOUBLE]", "echo FIRST [REST...]": Python's usage line.
  std::string usage() const {
    std::string out = name_;
    for (const Param& p : params_) {
      out += ' ';
      out += p.required ? detail::admin::upper(p.name) : "[" + detail::admin::upper(p.name) + "]";
    }
    if (rest_) out += " [" + detail::admin::upper(rest_->name) + "...]";
    return out;
  }

  /// The handler's arguments from the command's text (detail::admin::bad_arguments if they do
  /// not fit).
  AdminArgs convert(const std::vector<std::string_view>& args) const {
    std::size_t required = 0;
    for (const Param& p : params_) required += p.required;
    if (args.size() < required || (!rest_ && args.size() > params_.size())) {
      std::string wanted = rest_                         ? "at least " + std::to_string(required)
                           : required == params_.size() ? std::to_string(required)
                                                         : std::to_string(required) + " to " + std::to_string(params_.size());
      throw detail::admin::bad_arguments(name_ + " takes " + wanted + " argument(s), got " +
                                         std::to_string(args.size()) + "; usage: " + usage());
    }
    std::vector<AdminArgs::Value> values;
    values.reserve(args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
      const Param& p = i < params_.size() ? params_[i] : *rest_;
      auto v = detail::admin::convert(p.type, args[i]);
      if (!v) {
        throw detail::admin::bad_arguments(name_ + ": " + p.name + " must be " + detail::admin::kind(p.type) +
                                           ", not " + detail::admin::repr(args[i]) + "; usage: " + usage());
      }
      values.push_back(std::move(*v));
    }
    return AdminArgs(std::move(values));
  }

 private:
  AdminCommand& add(Param p) {
    check(p.name);
    if (p.required && !params_.empty() && !params_.back().required) {
      throw std::invalid_argument("admin command " + name_ + ": " + p.name + " is required after an optional parameter");
    }
    params_.push_back(std::move(p));
    return *this;
  }

  void check(const std::string& p) const {
    if (!detail::admin::identifier(p, 1000, false)) {
      throw std::invalid_argument("admin command " + name_ + ": parameter name " + detail::admin::repr(p) +
                                  " must be an identifier");
    }
    if (rest_) {
      throw std::invalid_argument("admin command " + name_ + ": " + p + " after the rest parameter " + rest_->name);
    }
    for (const Param& q : params_) {
      if (q.name == p) throw std::invalid_argument("admin command " + name_ + ": parameter " + p + " twice");
    }
  }

  std::string name_;
  std::string help_;
  AdminHandler handler_;
  std::vector<Param> params_;
  std::optional<Param> rest_;
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
  /// Admin commands of this node's account it ran (help and refused ones included).
  std::uint64_t admin_commands = 0;
  /// Admin commands whose handler threw (other than admin_error) or that were corrupt.
  std::uint64_t admin_errors = 0;
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
  /// The sender accounts allowed to send this node admin commands (Python's ADMIN_SENDERS);
  /// nullopt (the default): any. Others get a Denied reply.
  virtual std::optional<std::vector<std::string>> admin_senders() const { return std::nullopt; }

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

  // -- admin commands -----------------------------------------------------------------------

  /// Registers admin command `name` (1-64 letters, digits, '_', '.' or '-'; not "help", which
  /// is built in), listed by help with `help`; add its parameters to what this returns. Call it
  /// from the constructor, so that every instance of the account has the same commands from the
  /// first message on. The handler runs in stream order like any other (it must be
  /// deterministic: every instance runs the command at the same point); it returns the reply's
  /// text (UTF-8), throws admin_error to refuse (Failed), and anything else it throws becomes a
  /// Failed reply (logged, counted in stats().admin_errors) without stopping the node.
  AdminCommand& register_admin(const std::string& name, const std::string& help, AdminHandler handler) {
    AdminCommand c(name, help, std::move(handler));
    if (admin_.count(name) != 0) {
      throw std::invalid_argument("admin command " + detail::admin::repr(name) + " registered twice");
    }
    return admin_.emplace(name, std::move(c)).first->second;
  }
  /// The admin commands this node registered, by name (help, built in, is not listed).
  const std::map<std::string, AdminCommand>& admin_commands() const noexcept { return admin_; }

  /// What the built-in help answers: one line per command, help first.
  std::string admin_help() const {
    std::string out = std::string(detail::admin::HELP) + " - list the admin commands of this node";
    for (const auto& [name, c] : admin_) {
      out += '\n';
      out += c.usage();
      if (!c.help().empty()) out += " - " + c.help();
    }
    return out;
  }

  /// The AdminReply this node posts for the AdminCommand `data[0..size)` standing at `sequence`,
  /// sent by account `sender`: the whole message; nullopt when it is for another account or
  /// corrupt (logged, counted). Runs the command's handler. The node calls it for each
  /// AdminCommand it is handed; tests call it without a bus.
  std::optional<std::vector<std::uint8_t>> admin_reply(const std::uint8_t* data, std::size_t size,
                                                       std::uint64_t sequence, std::string_view sender) {
    std::string_view target, name;
    std::uint64_t request_id = 0;
    std::vector<std::string_view> args;
    try {
      bus::AdminCommandView v(data, size);
      target = v.target();
      request_id = v.request_id();
      name = v.name();
      for (const auto& a : v.args()) args.push_back(a.value());
    } catch (const seqbus::codec::decode_error& x) {
      ++stats_.admin_errors;
      log(Level::error, account_ + "/" + std::to_string(instance_) + ": corrupt AdminCommand at #" +
                            std::to_string(sequence) + ": " + x.what());
      return std::nullopt;
    }
    if (target != account_) return std::nullopt;  // the node listed the admin topic: every account's
    ++stats_.admin_commands;
    auto [status, text] = admin_execute(sender, name, args, sequence);
    std::size_t chars = detail::admin::length(text);
    if (chars > detail::admin::MAX_REPLY_TEXT) {
      text = std::string(detail::admin::cut(text, detail::admin::MAX_REPLY_TEXT)) + "... (" +
             std::to_string(chars - detail::admin::MAX_REPLY_TEXT) + " characters cut)";
    }
    std::string_view echoed = detail::admin::cut(name, detail::admin::MAX_ECHOED_NAME);
    std::vector<std::uint8_t> out(8 + bus::AdminReplyBuilder::BLOCK_LENGTH + 2 + 4 + echoed.size() + 4 + text.size());
    bus::AdminReplyBuilder b(out.data(), out.size());
    b.command_sequence(sequence).request_id(request_id).requester(sender).status(status).name(echoed).text(text);
    out.resize(b.finish());
    return out;
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

  /// Names the node without opening it (for tests of admin_reply() without a bus).
  void name_for_test(const std::string& account, std::uint16_t instance) {
    account_ = account;
    instance_ = instance;
  }

 private:
  struct LocalTimer {
    std::chrono::steady_clock::time_point at;
    std::function<void()> callback;
  };

  std::string who() const { return "node " + account_ + "/" + std::to_string(instance_); }

  /// Schema bus (schemas/bus.idl) and its AdminCommand's template.
  static constexpr std::uint16_t ADMIN_SCHEMA = 1;
  static constexpr std::uint16_t ADMIN_COMMAND = 4;

  /// Python's seqbus.admin._execute: the reply's status and text.
  std::pair<bus::AdminStatus, std::string> admin_execute(std::string_view sender, std::string_view name,
                                                         const std::vector<std::string_view>& args,
                                                         std::uint64_t sequence) {
    using bus::AdminStatus;
    if (auto allowed = admin_senders()) {
      if (std::find(allowed->begin(), allowed->end(), sender) == allowed->end()) {
        return {AdminStatus::Denied,
                "account " + detail::admin::repr(sender) + " may not send admin commands to this node"};
      }
    }
    if (name == detail::admin::HELP) {
      if (!args.empty()) return {AdminStatus::BadArguments, "help takes no arguments"};
      return {AdminStatus::Ok, admin_help()};
    }
    auto it = admin_.find(std::string(name));
    if (it == admin_.end()) {
      std::string known = detail::admin::HELP;
      for (const auto& [k, c] : admin_) known += ", " + k;
      return {AdminStatus::UnknownCommand,
              "unknown command " + detail::admin::repr(detail::admin::cut(name, 64)) + "; known: " + known};
    }
    const AdminCommand& c = it->second;
    std::optional<AdminArgs> values;
    try {
      values.emplace(c.convert(args));
    } catch (const detail::admin::bad_arguments& x) {
      return {AdminStatus::BadArguments, x.what()};
    }
    std::string result;
    std::string failure;
    try {
      result = c.handler()(*values);
    } catch (const admin_error& x) {
      return {AdminStatus::Failed, x.what()};
    } catch (const std::exception& x) {
      failure = std::string("exception: ") + x.what();
    } catch (...) {
      failure = "exception: not a std::exception";
    }
    const auto* p = reinterpret_cast<const std::uint8_t*>(result.data());
    if (failure.empty() && seqbus::codec::detail::utf8_valid_prefix(p, result.size()) != result.size()) {
      failure = "exception: the reply is not UTF-8";
    }
    if (!failure.empty()) {
      ++stats_.admin_errors;
      log(Level::error, account_ + "/" + std::to_string(instance_) + ": admin command " + detail::admin::repr(name) +
                            " failed at #" + std::to_string(sequence) + ": " + failure);
      return {AdminStatus::Failed, failure};
    }
    return {AdminStatus::Ok, result};
  }

  /// Runs the AdminCommand `m` if it is for this node's account, and posts the reply.
  void run_admin_command(const Message& m) {
    std::string_view sender(reinterpret_cast<const char*>(m.event().sender), sizeof m.event().sender);
    while (!sender.empty() && (sender.back() == '\0' || sender.back() == ' ')) sender.remove_suffix(1);
    auto reply = admin_reply(m.data(), m.size(), m.sequence(), sender);
    if (reply) post(*reply);
  }

  void close_quietly() noexcept {
    if (node_ != nullptr) seqbus_node_close(std::exchange(node_, nullptr));
  }

  void handle_event(const SeqbusEvent& e) {
    switch (e.kind) {
      case SEQBUS_EVENT_MESSAGE: {
        ++stats_.messages;
        Message m(e);
        try {
          if (e.schema_id == ADMIN_SCHEMA && e.template_id == ADMIN_COMMAND) {
            run_admin_command(m);
            dispatch_typed(m);  // a generated bus base's on_admin_command, as Python's BusNode
            break;
          }
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
  std::map<std::string, AdminCommand> admin_;
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
