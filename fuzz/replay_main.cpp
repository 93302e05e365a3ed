// The harnesses without libFuzzer: for builds with g++ (CI) and the asan preset.
// Feeds every corpus file to LLVMFuzzerTestOneInput, then `--mutations N` inputs
// made by deterministic pseudo-random mutations of them (bit flips, interesting
// bytes, insertions, deletions, duplicated ranges, splices of two files,
// truncation), from `--seed S`. Not coverage-guided: a smoke test that the
// corpus and its neighbourhood run clean, and a way to replay one crash file.
//
//   fuzz_replay_<harness> [--mutations N] [--seed S] [--max-len L] PATH...
//
// PATH: files or directories (every regular file inside, sorted by name).
// Exit 0 when every input returned; a finding aborts (exit by signal). Corpus
// files are named on stderr before they run; a crashing mutation is kept in
// $TTR_REPLAY_LAST when that is set (docs/fuzzing-harnesses.md).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

// splitmix64 (Steele, Lea, Flood 2014): a fixed algorithm, so the same seed
// gives the same mutations with every compiler and standard library.
struct SplitMix {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n ? static_cast<std::size_t>(next() % n) : 0; }
};

Bytes read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "replay: cannot read %s\n", p.string().c_str());
    std::exit(2);
  }
  return Bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Bytes that parsers treat specially: JSON punctuation, digits, signs, NUL, the
// ends of the byte range, and the little-endian ends of length fields.
constexpr std::uint8_t kInteresting[] = {0x00, 0x01, 0x7F, 0x80, 0xFF, '"', '{', '}', '[', ']', ',', ':',
                                         '0',  '1',  '9',  '-',  '+',  'e', '.', '\\', 'n', '=', '\n', ' '};

void mutate_once(Bytes& b, const std::vector<Bytes>& corpus, SplitMix& rng, std::size_t max_len) {
  switch (rng.below(8)) {
    case 0:  // flip a bit
      if (!b.empty()) b[rng.below(b.size())] ^= static_cast<std::uint8_t>(1u << rng.below(8));
      break;
    case 1:  // an interesting byte
      if (!b.empty()) b[rng.below(b.size())] = kInteresting[rng.below(sizeof kInteresting)];
      break;
    case 2:  // a random byte
      if (!b.empty()) b[rng.below(b.size())] = static_cast<std::uint8_t>(rng.next());
      break;
    case 3:  // insert a byte
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(rng.below(b.size() + 1)),
               kInteresting[rng.below(sizeof kInteresting)]);
      break;
    case 4: {  // delete a range
      if (b.empty()) break;
      const std::size_t at = rng.below(b.size()), len = 1 + rng.below(std::min<std::size_t>(16, b.size() - at));
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + len));
      break;
    }
    case 5: {  // duplicate a range
      if (b.empty()) break;
      const std::size_t at = rng.below(b.size()), len = 1 + rng.below(std::min<std::size_t>(32, b.size() - at));
      const Bytes piece(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + len));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(rng.below(b.size() + 1)), piece.begin(), piece.end());
      break;
    }
    case 6: {  // splice: our prefix, another file's suffix
      const Bytes& o = corpus[rng.below(corpus.size())];
      const std::size_t cut = rng.below(b.size() + 1), from = rng.below(o.size() + 1);
      b.resize(cut);
      b.insert(b.end(), o.begin() + static_cast<std::ptrdiff_t>(from), o.end());
      break;
    }
    default:  // truncate
      b.resize(rng.below(b.size() + 1));
  }
  if (b.size() > max_len) b.resize(max_len);
}

void save(const char* path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mutations = 0, max_len = 1 << 16;
  std::uint64_t seed = 1;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--mutations" || a == "--seed" || a == "--max-len") && i + 1 < argc) {
      const unsigned long long v = std::strtoull(argv[++i], nullptr, 10);
      (a == "--mutations" ? mutations : a == "--max-len" ? max_len : seed) = v;
      continue;
    }
    const fs::path p(a);
    if (fs::is_directory(p)) {
      std::vector<fs::path> in;
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file()) in.push_back(e.path());
      std::sort(in.begin(), in.end());
      files.insert(files.end(), in.begin(), in.end());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", a.c_str());
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] [--max-len L] FILE|DIR...\n", argv[0]);
    return 2;
  }
  std::vector<Bytes> corpus;
  for (const auto& f : files) {
    corpus.push_back(read_file(f));
    std::fprintf(stderr, "replay: input %s\n", f.string().c_str());
    LLVMFuzzerTestOneInput(corpus.back().data(), corpus.back().size());
  }
  // TTR_REPLAY_LAST=FILE: every mutated input is written there before it runs, so
  // after a crash FILE holds the input that crashed (docs/fuzzing-harnesses.md).
  const char* last = std::getenv("TTR_REPLAY_LAST");
  SplitMix rng{seed};
  for (std::size_t m = 0; m < mutations; ++m) {
    const std::size_t base = rng.below(corpus.size());
    Bytes b = corpus[base];
    const std::size_t rounds = 1 + rng.below(4);
    for (std::size_t r = 0; r < rounds; ++r) mutate_once(b, corpus, rng, max_len);
    if (last) save(last, b);  // a crash leaves its input there
    LLVMFuzzerTestOneInput(b.data(), b.size());
  }
  std::printf("replay: %zu corpus files and %zu mutations ran clean (seed %llu)\n", files.size(), mutations,
              static_cast<unsigned long long>(seed));
  return 0;
}
