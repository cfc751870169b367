// The field-by-field check of a verified request, walked through the embedded binary schema of
// schema/protocol.fbs so that no field added later escapes it: every string (and string in a
// vector or nested table) is valid UTF-8, every float and double is finite. The answer names the
// field ("Submit.summary"), so a client learns what to fix.
// Thread-safety: reentrant; the schema is read-only after its first use.
#pragma once

#include "base/status.h"
#include "htam/schema/protocol_generated.h"

namespace htam::server {

// OK, or InvalidArgument naming the first bad field. `envelope` must have passed the verifier.
Status CheckRequestFields(const fb::Envelope& envelope);

}  // namespace htam::server
