// Status and Result<T> for every part of htam: the public type of the C++ SDK
// (sdk/include/htam/status.h), so that a client and the daemon speak of errors the same way.
// Thread-safety: immutable values, safe to share after construction.
#pragma once

#include "htam/status.h"
