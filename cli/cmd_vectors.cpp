// `ttrcheck vectors`: a suite's inputs and oracle outputs, plus manifest.json.
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "oracles/error.hpp"
#include "oracles/io/text_file.hpp"
#include "oracles/oracle.hpp"
#include "oracles/vector_files.hpp"
#include "oracles/vectors.hpp"

namespace ttr::cli {
namespace fs = std::filesystem;

namespace {

// Removes what this invocation wrote unless commit() was called.
class Rollback {
 public:
  explicit Rollback(const fs::path& dir) {
    std::error_code ec;
    created_dir_ = !fs::exists(dir, ec);
    if (created_dir_ && !fs::create_directories(dir, ec))
      throw InputError(fmt::format("{}: cannot create directory: {}", dir.string(), ec.message()));
    if (!fs::is_directory(dir, ec)) throw InputError(fmt::format("{}: not a directory", dir.string()));
    dir_ = dir;
  }
  void wrote(const fs::path& p) { files_.push_back(p); }
  void commit() { done_ = true; }
  ~Rollback() {
    if (done_) return;
    std::error_code ec;
    for (const auto& f : files_) fs::remove(f, ec);
    if (created_dir_) fs::remove(dir_, ec);  // only if empty
  }

 private:
  fs::path dir_;
  std::vector<fs::path> files_;
  bool created_dir_ = false, done_ = false;
};

}  // namespace

Command add_vectors(CLI::App& app) {
  struct Opts {
    std::string layer, suite, out;
    std::uint64_t seed = 0;
    unsigned bits = 256;
    bool no_oracle = false, backward = false;
    ShardArgs shard;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("vectors", "write a suite's input vectors and their oracle outputs");
  cmd->add_option("--layer", o->layer, "layer name, or 'all'")->required();
  cmd->add_option("--suite", o->suite, "tiny|demo|standard|stress")->required();
  cmd->add_option("--out", o->out, "output directory (created if absent)")->required();
  cmd->add_option("--seed", o->seed, "random seed (same seed: bit-identical files)")->check(seed_validator());
  cmd->add_option("--bits", o->bits, "oracle MPFR precision")->check(CLI::Range(24u, 100000u));
  cmd->add_flag("--no-oracle", o->no_oracle, "inputs only");
  cmd->add_flag("--backward", o->backward,
                "also write, per case, <stem>.backward.inputs.safetensors (the inputs plus a cotangent of every "
                "output: do, dht, ...) and <stem>.backward.oracle.safetensors (the gradients d<input>)");
  add_shard_options(*cmd, o->shard);
  return [o]() {
    std::vector<const LayerEntry*> layers;
    if (o->layer == "all")
      for (const auto& e : registry()) layers.push_back(&e);
    else
      layers.push_back(&find_layer(o->layer));
    for (const auto* l : layers) suite_cases(l->spec, o->suite);  // unknown suite: fail before writing
    check_outputs({}, {}, {{"--out", o->out}});
    // Shard i of N writes the cases k (over layers × cases, in manifest order)
    // with k mod N = i; its manifest records each case's k for `ttrcheck merge`.
    const Shard shard = o->shard.resolve();
    const fs::path dir(o->out);
    Rollback rb(dir);
    nlohmann::json manifest{{"tool_version", kToolVersion}, {"suite", o->suite}, {"seed", o->seed},
                            {"precision", fmt::format("mpfr:{}", o->bits)}, {"cases", nlohmann::json::array()}};
    nlohmann::json positions = nlohmann::json::array();
    std::uint64_t k = 0;
    for (const auto* l : layers) {
      for (const VectorCase& c : suite_cases(l->spec, o->suite)) {
        if (!shard.owns(k++)) continue;  // another shard's case
        positions.push_back(k - 1);
        VectorFileOptions vo;
        vo.suite = o->suite;
        vo.seed = o->seed;
        vo.bits = o->bits;
        vo.oracle = !o->no_oracle;
        vo.backward = o->backward;
        const CaseFiles files = case_files(*l, c, vo);
        const std::string& stem = files.stem;
        nlohmann::json entry = files.entry;
        auto write = [&](const io::TensorFile& f, const std::string& suffix, const char* key) {
          const fs::path path = dir / (stem + suffix);
          io::write_safetensors_atomic(path, f);
          rb.wrote(path);
          entry[key] = path.filename().string();
        };
        write(files.inputs, ".inputs.safetensors", "inputs");
        if (files.oracle) write(*files.oracle, ".oracle.safetensors", "oracle");
        if (files.backward_inputs) write(*files.backward_inputs, ".backward.inputs.safetensors", "backward_inputs");
        if (files.backward_oracle) write(*files.backward_oracle, ".backward.oracle.safetensors", "backward_oracle");
        manifest["cases"].push_back(entry);
        fmt::print(stderr, "wrote {}\n", stem);
      }
    }
    if (shard.sharded()) {
      const nlohmann::json config{{"layer", o->layer},     {"suite", o->suite},         {"seed", o->seed},
                                  {"bits", o->bits},       {"no_oracle", o->no_oracle}, {"backward", o->backward}};
      manifest["shard"] = shard_json(shard, config);
      manifest["shard"]["planned"] = k;
      manifest["shard"]["positions"] = std::move(positions);
    }
    io::write_text_atomic(dir / "manifest.json", manifest.dump(2) + "\n");
    rb.commit();
    return 0;
  };
}

}  // namespace ttr::cli
