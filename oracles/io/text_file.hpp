// Atomic text output: write a temporary beside the target, then rename, so a
// reader never sees a half-written report or manifest.
#pragma once

#include <filesystem>
#include <string>

namespace ttr::io {

// InputError("<path>: cannot write: <reason>") on failure; no file is left behind.
void write_text_atomic(const std::filesystem::path& path, const std::string& text);

}  // namespace ttr::io
