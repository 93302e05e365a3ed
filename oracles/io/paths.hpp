// The one output-path rule of every command, checked before any work is done:
//   * an output may not be the same file as an input or as another output (by
//     device and inode when both exist, through any path, symlink or hard link;
//     by normalised absolute path otherwise);
//   * an existing output must be a regular file (or, for a directory output, a
//     directory). Outputs are written to a temporary beside the target and
//     renamed over it, so that a failed run leaves nothing half-written; a rename
//     over a FIFO, a device node or a socket would replace that node itself
//     (`--out /dev/null` run as root would replace the system's /dev/null), so
//     such a target is refused rather than written through;
//   * an input must be a regular file: its size is known before it is read, so
//     a stream (`--in /dev/zero`) is never read whole.
// Violations are InputErrors naming both options and paths (exit 2).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ttr::io {

// A path and the option that named it ("--out", "--report", ...), for messages.
struct NamedPath {
  std::string option;
  std::string path;
};

// Checks outputs (files) against each other and against the inputs; `dirs`
// are output directories (created if absent) that must not be an input or an
// existing non-directory. Empty paths are ignored (an option not given).
void check_paths(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs,
                 const std::vector<NamedPath>& dirs = {});

// "regular file", "directory", "FIFO", "character device", ... of an existing path.
std::string file_kind(const std::filesystem::path& p);

}  // namespace ttr::io
