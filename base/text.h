// Text that comes from outside (a network message, a file, a client's name): whether it is valid
// UTF-8, and how to show it in one log line, a Status section or a JSON string without letting
// it forge lines of its own.
// Thread-safety: functions are reentrant.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace htam {

// True when `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF). On false, *bad_offset (when given) is the offset of the first bad byte.
bool IsValidUtf8(std::string_view text, size_t* bad_offset = nullptr);

// `text` made safe for one line: control characters (newlines included) and bytes that are not
// valid UTF-8 become \n, \t, \xHH escapes; a backslash becomes "\\". Valid printable UTF-8 is
// kept as it is.
std::string EscapeForLine(std::string_view text);

}  // namespace htam
