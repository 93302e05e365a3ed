#include "oracles/io/paths.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include "oracles/error.hpp"

namespace ttr::io {
namespace fs = std::filesystem;

namespace {

struct Identity {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t mode = 0;
  fs::path normal;  // absolute, lexically normal, symlinks of existing prefixes resolved
};

Identity identify(const std::string& path) {
  Identity id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    id.mode = st.st_mode;
  }
  std::error_code ec;
  id.normal = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) id.normal = fs::absolute(path).lexically_normal();
  return id;
}

bool same(const Identity& a, const Identity& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.normal == b.normal;
}

std::string kind_of(mode_t m) {
  if (S_ISREG(m)) return "regular file";
  if (S_ISDIR(m)) return "directory";
  if (S_ISFIFO(m)) return "FIFO";
  if (S_ISCHR(m)) return "character device";
  if (S_ISBLK(m)) return "block device";
  if (S_ISSOCK(m)) return "socket";
  return "special file";
}

}  // namespace

std::string file_kind(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return "missing";
  return kind_of(st.st_mode);
}

void check_paths(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs,
                 const std::vector<NamedPath>& dirs) {
  std::vector<std::pair<const NamedPath*, Identity>> ins, outs;
  for (const NamedPath& p : inputs)
    if (!p.path.empty()) {
      Identity id = identify(p.path);
      if (id.exists && !S_ISREG(id.mode))
        throw InputError(fmt::format("{} {}: is a {}, not a regular file: ttrcheck reads inputs of a known size", p.option,
                                     p.path, kind_of(id.mode)));
      ins.emplace_back(&p, std::move(id));
    }
  auto against_inputs = [&](const NamedPath& o, const Identity& id) {
    for (const auto& [in, iid] : ins)
      if (same(id, iid))
        throw InputError(fmt::format("{} {} is the same file as {} {}: ttrcheck never writes over its inputs", o.option,
                                     o.path, in->option, in->path));
  };
  for (const NamedPath& o : outputs) {
    if (o.path.empty()) continue;
    Identity id = identify(o.path);
    if (id.exists && S_ISDIR(id.mode))
      throw InputError(fmt::format("{} {}: is a directory; name a file", o.option, o.path));
    if (id.exists && !S_ISREG(id.mode))
      throw InputError(fmt::format("{} {}: is a {}, not a regular file: ttrcheck replaces its outputs by renaming a "
                                   "finished temporary over them, which would replace the {} itself; name a regular file",
                                   o.option, o.path, kind_of(id.mode), kind_of(id.mode)));
    against_inputs(o, id);
    for (const auto& [prev, pid] : outs)
      if (same(id, pid))
        throw InputError(fmt::format("{} {} and {} {} name the same file: one output would replace the other", prev->option,
                                     prev->path, o.option, o.path));
    outs.emplace_back(&o, std::move(id));
  }
  for (const NamedPath& d : dirs) {
    if (d.path.empty()) continue;
    const Identity id = identify(d.path);
    if (id.exists && !S_ISDIR(id.mode))
      throw InputError(fmt::format("{} {}: exists and is a {}, not a directory", d.option, d.path, kind_of(id.mode)));
    against_inputs(d, id);
  }
}

}  // namespace ttr::io
