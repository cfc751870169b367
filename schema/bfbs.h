// The binary schemas (reflection::Schema, `flatc --binary --schema`) built into the program, for
// code that walks records or jobs generically (tools/cli/records_json.cc, the request checks of daemon/server, the job codec's test).
// Library htam_schema_bfbs.
#pragma once

#include <cstdint>
#include <span>

namespace htam::fb {

// schema/htg.fbs; a verified reflection::Schema buffer that lives as long as the program.
std::span<const uint8_t> HtgBinarySchema();
// schema/job.fbs (with the htg.fbs tables it uses), the same way.
std::span<const uint8_t> JobBinarySchema();
// schema/protocol.fbs (wire messages, with the htg.fbs tables they carry), the same way.
std::span<const uint8_t> ProtocolBinarySchema();

}  // namespace htam::fb
