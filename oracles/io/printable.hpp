// User-controlled text (tensor names, keys, paths) as it may appear in a one-line
// error message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ttr::io {

// Control characters become \xNN and a backslash \\, so the message stays on one
// line; text beyond max_bytes is cut at a UTF-8 character boundary and marked "...".
std::string printable(std::string_view s, std::size_t max_bytes = 200);

}  // namespace ttr::io
