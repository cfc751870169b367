// Typed views of the configuration table (options.inc): one struct per section, one field per
// option with the table's type (STRING std::string, INT int64_t, DOUBLE double, BOOL bool), read
// from a Config once by From(). A misspelt option name is then a compile error, where a string
// lookup (Config::GetInt("eval.sedes")) fails only when it runs. Defaults stay in one place, the
// table: a default-constructed struct holds zeros; From(Config::Defaults()) holds the defaults.
// A section added to the table without a struct here does not compile (HTAM_IN_<section>).
// Thread-safety: plain values; From() only reads the Config.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/config/config.h"

namespace htam::config {

namespace detail {
using STRING = std::string;
using INT = int64_t;
using DOUBLE = double;
using BOOL = bool;
}  // namespace detail

// Every row of the table becomes a field of its own section's struct and nothing elsewhere.
#define HTAM_OPTION(section, name, type, def, help) HTAM_IN_##section(detail::type name{};)

// [general]
#define HTAM_IN_general(x) x
#define HTAM_IN_server(x)
#define HTAM_IN_memory(x)
#define HTAM_IN_eval(x)
#define HTAM_IN_worker(x)
#define HTAM_IN_pool(x)
struct General {
#include "daemon/config/options.inc"
  static General From(const Config& c);
};
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

// [server]
#define HTAM_IN_general(x)
#define HTAM_IN_server(x) x
#define HTAM_IN_memory(x)
#define HTAM_IN_eval(x)
#define HTAM_IN_worker(x)
#define HTAM_IN_pool(x)
struct Server {
#include "daemon/config/options.inc"
  static Server From(const Config& c);
};
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

// [memory]
#define HTAM_IN_general(x)
#define HTAM_IN_server(x)
#define HTAM_IN_memory(x) x
#define HTAM_IN_eval(x)
#define HTAM_IN_worker(x)
#define HTAM_IN_pool(x)
struct Memory {
#include "daemon/config/options.inc"
  static Memory From(const Config& c);
};
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

// [eval]
#define HTAM_IN_general(x)
#define HTAM_IN_server(x)
#define HTAM_IN_memory(x)
#define HTAM_IN_eval(x) x
#define HTAM_IN_worker(x)
#define HTAM_IN_pool(x)
struct Eval {
#include "daemon/config/options.inc"
  static Eval From(const Config& c);
};
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

// [worker]
#define HTAM_IN_general(x)
#define HTAM_IN_server(x)
#define HTAM_IN_memory(x)
#define HTAM_IN_eval(x)
#define HTAM_IN_worker(x) x
#define HTAM_IN_pool(x)
struct Worker {
#include "daemon/config/options.inc"
  static Worker From(const Config& c);
};
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

// [pool]
#define HTAM_IN_general(x)
#define HTAM_IN_server(x)
#define HTAM_IN_memory(x)
#define HTAM_IN_eval(x)
#define HTAM_IN_worker(x)
#define HTAM_IN_pool(x) x
struct Pool {
#include "daemon/config/options.inc"
  static Pool From(const Config& c);
};
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

#undef HTAM_OPTION

}  // namespace htam::config
