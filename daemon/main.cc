// htamd: the htam daemon. Parses the configuration table and runs the server.
#include <iostream>

#include "base/log.h"
#include "daemon/config/config.h"
#include "daemon/config/sections.h"
#ifdef HTAM_HAVE_SERVER
#include "daemon/server/run.h"
#endif

int main(int argc, char** argv) {
  htam::ProgramInfo program{
      "htamd", "the htam daemon: memory of GPU-kernel optimization experience", HTAM_VERSION};
  bool exit_now = false;
  auto config = htam::Config::Parse(argc, argv, program, std::cout, &exit_now);
  if (!config.ok()) {
    std::cerr << "htamd: " << config.status().message() << "\n";
    return 2;
  }
  if (exit_now) return 0;
  const htam::config::General general = htam::config::General::From(*config);
  htam::LogLevel level;
  if (!htam::ParseLogLevel(general.log_level, &level)) {
    std::cerr << "htamd: bad general.log_level '" << general.log_level << "'\n";
    return 2;
  }
  htam::SetLogLevel(level);
  htam::LogFormat format;
  if (!htam::ParseLogFormat(general.log_format, &format)) {
    std::cerr << "htamd: bad general.log_format '" << general.log_format << "' (text or json)\n";
    return 2;
  }
  htam::SetLogFormat(format);
#ifdef HTAM_HAVE_SERVER
  return htam::RunDaemon(*config);
#else
  HTAM_LOG(kError, "htamd") << "this build has no server component";
  return 1;
#endif
}
