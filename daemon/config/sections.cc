// Typed views of the configuration table: each From() reads its section's rows (sections.h).
#include "daemon/config/sections.h"

namespace htam::config {
namespace {
void Read(const Config& c, const char* name, std::string* v) {
  *v = c.GetString(name);
}
void Read(const Config& c, const char* name, int64_t* v) {
  *v = c.GetInt(name);
}
void Read(const Config& c, const char* name, double* v) {
  *v = c.GetDouble(name);
}
void Read(const Config& c, const char* name, bool* v) {
  *v = c.GetBool(name);
}
}  // namespace

#define HTAM_OPTION(section, name, type, def, help) \
  HTAM_IN_##section(Read(c, #section "." #name, &o.name);)

#define HTAM_IN_general(x) x
#define HTAM_IN_server(x)
#define HTAM_IN_memory(x)
#define HTAM_IN_eval(x)
#define HTAM_IN_worker(x)
#define HTAM_IN_pool(x)
General General::From(const Config& c) {
  General o;
#include "daemon/config/options.inc"
  return o;
}
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

#define HTAM_IN_general(x)
#define HTAM_IN_server(x) x
#define HTAM_IN_memory(x)
#define HTAM_IN_eval(x)
#define HTAM_IN_worker(x)
#define HTAM_IN_pool(x)
Server Server::From(const Config& c) {
  Server o;
#include "daemon/config/options.inc"
  return o;
}
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

#define HTAM_IN_general(x)
#define HTAM_IN_server(x)
#define HTAM_IN_memory(x) x
#define HTAM_IN_eval(x)
#define HTAM_IN_worker(x)
#define HTAM_IN_pool(x)
Memory Memory::From(const Config& c) {
  Memory o;
#include "daemon/config/options.inc"
  return o;
}
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

#define HTAM_IN_general(x)
#define HTAM_IN_server(x)
#define HTAM_IN_memory(x)
#define HTAM_IN_eval(x) x
#define HTAM_IN_worker(x)
#define HTAM_IN_pool(x)
Eval Eval::From(const Config& c) {
  Eval o;
#include "daemon/config/options.inc"
  return o;
}
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

#define HTAM_IN_general(x)
#define HTAM_IN_server(x)
#define HTAM_IN_memory(x)
#define HTAM_IN_eval(x)
#define HTAM_IN_worker(x) x
#define HTAM_IN_pool(x)
Worker Worker::From(const Config& c) {
  Worker o;
#include "daemon/config/options.inc"
  return o;
}
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

#define HTAM_IN_general(x)
#define HTAM_IN_server(x)
#define HTAM_IN_memory(x)
#define HTAM_IN_eval(x)
#define HTAM_IN_worker(x)
#define HTAM_IN_pool(x) x
Pool Pool::From(const Config& c) {
  Pool o;
#include "daemon/config/options.inc"
  return o;
}
#undef HTAM_IN_general
#undef HTAM_IN_server
#undef HTAM_IN_memory
#undef HTAM_IN_eval
#undef HTAM_IN_worker
#undef HTAM_IN_pool

#undef HTAM_OPTION

}  // namespace htam::config
