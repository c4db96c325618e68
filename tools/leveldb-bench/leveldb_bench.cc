// leveldb_bench: the LevelDB side of scripts/compare.
//
// A small db_bench-compatible driver over the system's LevelDB 1.23
// (Debian's libleveldb-dev ships the library but not db_bench). It speaks
// the flags and prints the lines of `shale bench`, and generates keys and
// values the same way (see crates/shale-cli/src/bench/generator.rs):
//
//   * Random: the Park-Miller generator, seed = seed * 16807 % (2^31 - 1);
//   * values: consecutive slices of a buffer of 100-byte pieces, each
//     `100 * compression_ratio` random characters ' '..'~' repeated, drawn
//     from Random(301), built until it holds 1 MiB;
//   * keys: key number k as "%016d" (other --key_size values: as shale);
//     thread i draws key numbers from Random(1000 + seed + i).
//
// Build: g++ -O2 -std=c++17 leveldb_bench.cc -o leveldb_bench -lleveldb -lpthread
//
// Benchmarks: fillseq, fillrandom, overwrite, fillsync, readrandom,
// readmissing, readseq, readreverse, seekrandom, deleteseq, deleterandom,
// readrandomwriterandom, compact, stats. At the end: the write amplification
// computed from the leveldb.stats property, and the CPU time used.
//
// --timeline=FILE.csv writes operations per --timeline_interval seconds
// (default 1), in the CSV of `shale bench --timeline`
// (crates/shale-cli/src/bench/timeline.rs), so that one plot can draw every
// engine: `seconds,benchmark,ops,ops_per_sec,p99_micros`, one row per
// benchmark and interval (intervals counted from the end of the first
// open), intervals without an operation included (a write stall shows as
// 0). The P99 is exact over the interval's latencies, as the
// `Percentiles:` line computes it.

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "leveldb/cache.h"
#include "leveldb/db.h"
#include "leveldb/filter_policy.h"
#include "leveldb/options.h"
#include "leveldb/write_batch.h"

namespace {

struct Flags {
  std::string benchmarks = "fillrandom,readrandom";
  long num = 200000;
  long reads = -1;
  int threads = 1;
  int value_size = 100;
  int key_size = 16;
  double compression_ratio = 0.5;
  bool histogram = false;
  std::string db;
  bool use_existing_db = false;
  long seed = 0;
  int readwritepercent = 90;
  long write_buffer_size = -1;
  long max_file_size = -1;
  long block_size = -1;
  long block_restart_interval = -1;
  long bloom_bits = -1;
  long cache_size = -1;
  long open_files = -1;
  std::string compression = "snappy";
  std::string timeline;
  double timeline_interval = 1.0;
};

Flags FLAGS;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "leveldb_bench: %s\n", message.c_str());
  std::exit(2);
}

long ParseLong(const std::string& name, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) {
    Die("invalid value '" + text + "' for --" + name);
  }
  return value;
}

double ParseDouble(const std::string& name, const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') {
    Die("invalid value '" + text + "' for --" + name);
  }
  return value;
}

bool ParseBool(const std::string& name, const std::string& text) {
  if (text == "1" || text == "true") return true;
  if (text == "0" || text == "false") return false;
  Die("invalid value '" + text + "' for --" + name + " (0 or 1)");
}

void ParseFlags(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
      Die("expected --name=value, got '" + arg + "'");
    }
    std::string name = arg.substr(2, eq - 2);
    std::string value = arg.substr(eq + 1);
    if (name == "benchmarks") FLAGS.benchmarks = value;
    else if (name == "num") FLAGS.num = ParseLong(name, value);
    else if (name == "reads") FLAGS.reads = ParseLong(name, value);
    else if (name == "threads") FLAGS.threads = static_cast<int>(ParseLong(name, value));
    else if (name == "value_size") FLAGS.value_size = static_cast<int>(ParseLong(name, value));
    else if (name == "key_size") FLAGS.key_size = static_cast<int>(ParseLong(name, value));
    else if (name == "compression_ratio") FLAGS.compression_ratio = ParseDouble(name, value);
    else if (name == "histogram") FLAGS.histogram = ParseBool(name, value);
    else if (name == "db") FLAGS.db = value;
    else if (name == "use_existing_db") FLAGS.use_existing_db = ParseBool(name, value);
    else if (name == "seed") FLAGS.seed = ParseLong(name, value);
    else if (name == "readwritepercent") FLAGS.readwritepercent = static_cast<int>(ParseLong(name, value));
    else if (name == "write_buffer_size") FLAGS.write_buffer_size = ParseLong(name, value);
    else if (name == "max_file_size") FLAGS.max_file_size = ParseLong(name, value);
    else if (name == "block_size") FLAGS.block_size = ParseLong(name, value);
    else if (name == "block_restart_interval") FLAGS.block_restart_interval = ParseLong(name, value);
    else if (name == "bloom_bits") FLAGS.bloom_bits = ParseLong(name, value);
    else if (name == "cache_size") FLAGS.cache_size = ParseLong(name, value);
    else if (name == "open_files") FLAGS.open_files = ParseLong(name, value);
    else if (name == "compression") FLAGS.compression = value;
    else if (name == "timeline") FLAGS.timeline = value;
    else if (name == "timeline_interval") FLAGS.timeline_interval = ParseDouble(name, value);
    else Die("unknown flag --" + name);
  }
  if (FLAGS.num < 1 || FLAGS.num > 2147483647L) Die("--num must be in 1..2^31-1");
  if (FLAGS.threads < 1) Die("--threads must be at least 1");
  if (!(FLAGS.compression_ratio > 0 && FLAGS.compression_ratio <= 1)) {
    Die("--compression_ratio must be above 0 and at most 1");
  }
  if (FLAGS.compression != "none" && FLAGS.compression != "snappy") {
    Die("--compression must be none or snappy");
  }
  if (FLAGS.db.empty()) Die("--db=DIR is required");
  if (!(FLAGS.timeline_interval > 0 && std::isfinite(FLAGS.timeline_interval))) {
    Die("--timeline_interval must be a positive number of seconds");
  }
}

// LevelDB's util/random.h algorithm: Park-Miller, multiplier 7^5.
class Random {
 public:
  explicit Random(uint32_t seed) : seed_(seed & 0x7fffffffu) {
    if (seed_ == 0 || seed_ == 2147483647u) seed_ = 1;
  }
  uint32_t Next() {
    const uint64_t product = static_cast<uint64_t>(seed_) * 16807u;
    uint32_t folded = static_cast<uint32_t>((product >> 31) + (product & 2147483647u));
    if (folded > 2147483647u) folded -= 2147483647u;
    seed_ = folded;
    return seed_;
  }
  uint32_t Uniform(uint32_t n) { return Next() % n; }

 private:
  uint32_t seed_;
};

// db_bench's value source: slices of a fixed, partly compressible buffer.
class ValueGenerator {
 public:
  ValueGenerator() {
    Random rnd(301);
    const size_t piece_len = 100;
    while (data_.size() < 1048576) {
      size_t raw_len = static_cast<size_t>(piece_len * FLAGS.compression_ratio);
      if (raw_len < 1) raw_len = 1;
      std::string raw;
      for (size_t i = 0; i < raw_len; i++) {
        raw.push_back(static_cast<char>(' ' + rnd.Uniform(95)));
      }
      std::string piece;
      while (piece.size() < piece_len) piece.append(raw);
      piece.resize(piece_len);
      data_.append(piece);
    }
  }
  leveldb::Slice Generate(size_t len) {
    if (pos_ + len > data_.size()) pos_ = 0;
    pos_ += len;
    return leveldb::Slice(data_.data() + pos_ - len, len);
  }

 private:
  std::string data_;
  size_t pos_ = 0;
};

// Key number k, as shale's KeyFormat writes it.
void MakeKey(uint64_t k, std::string* key) {
  const int digits = FLAGS.key_size < 16 ? FLAGS.key_size : 16;
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%0*" PRIu64, digits, k);
  std::string text = buffer;
  if (static_cast<int>(text.size()) > digits) text = text.substr(text.size() - digits);
  text.resize(FLAGS.key_size, '0');
  *key = text;
}

double NowMicros() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count() / 1000.0;
}

// The exact P99 of `latencies` (reordered): the ceil(0.99 n)-th smallest, as
// the `Percentiles:` line computes it.
float P99(std::vector<float>* latencies) {
  size_t index = static_cast<size_t>(std::ceil(0.99 * latencies->size()));
  if (index > 0) index--;
  std::nth_element(latencies->begin(), latencies->begin() + index, latencies->end());
  return (*latencies)[index];
}

// --timeline: the intervals of the whole run, shared by the benchmark
// threads. Each thread keeps the latencies of the interval it is in and hands
// them over when it moves on to the next (one lock per interval, not per
// operation). An interval is summed up (operations, P99) as soon as no
// thread of its benchmark can add to it any more, so only the latencies of
// the last interval or two are kept at any time.
class Timeline {
 public:
  // Where a thread that has finished its benchmark is.
  static constexpr uint64_t kDone = UINT64_MAX;

  Timeline(double interval_seconds, std::FILE* file)
      : start_(NowMicros()), interval_(interval_seconds), file_(file) {}

  // The interval the clock reading `micros` falls in.
  uint64_t IntervalOf(double micros) const {
    double seconds = (micros - start_) * 1e-6;
    return seconds <= 0 ? 0 : static_cast<uint64_t>(seconds / interval_);
  }

  // Opens a segment, starting now, for a benchmark run by `threads` threads;
  // returns its number.
  int Begin(const std::string& name, int threads) {
    double now = NowMicros();
    std::lock_guard<std::mutex> lock(mu_);
    Segment segment;
    segment.name = name;
    segment.start = (now - start_) * 1e-6;
    segment.end = segment.start;
    segment.current.assign(threads, IntervalOf(now));
    segments_.push_back(segment);
    return static_cast<int>(segments_.size()) - 1;
  }

  // Closes `segment` now.
  void End(int segment) {
    double now = NowMicros();
    std::lock_guard<std::mutex> lock(mu_);
    segments_[segment].end = (now - start_) * 1e-6;
  }

  // Thread `thread` of `segment` hands over the latencies of `interval`
  // (emptying `latencies`) and moves on to interval `next` (kDone at its end).
  void Add(int segment, int thread, uint64_t interval, std::vector<float>* latencies, uint64_t next) {
    std::lock_guard<std::mutex> lock(mu_);
    Segment& s = segments_[segment];
    if (!latencies->empty()) {
      std::vector<float>& pending = s.pending[interval];
      pending.insert(pending.end(), latencies->begin(), latencies->end());
      latencies->clear();
    }
    s.current[thread] = next;
    uint64_t oldest = *std::min_element(s.current.begin(), s.current.end());
    while (!s.pending.empty() && s.pending.begin()->first < oldest) {
      std::vector<float>& values = s.pending.begin()->second;
      s.done[s.pending.begin()->first] = Interval{values.size(), P99(&values)};
      s.pending.erase(s.pending.begin());
    }
  }

  // Writes the CSV of `shale bench --timeline` and closes the file.
  void Write() {
    std::lock_guard<std::mutex> lock(mu_);
    std::fprintf(file_, "seconds,benchmark,ops,ops_per_sec,p99_micros\n");
    for (const Segment& s : segments_) {
      uint64_t first = static_cast<uint64_t>(s.start / interval_);
      uint64_t last = static_cast<uint64_t>(s.end / interval_);
      for (uint64_t index = first; index <= last; index++) {
        double window_start = std::max(index * interval_, s.start);
        double window_end = std::min((index + 1) * interval_, s.end);
        auto it = s.done.find(index);
        uint64_t ops = it == s.done.end() ? 0 : it->second.ops;
        double p99 = it == s.done.end() ? 0 : it->second.p99;
        double width = window_end - window_start;
        if (width <= 0 && ops == 0) continue;
        std::fprintf(file_, "%.3f,%s,%" PRIu64 ",%.1f,%.3f\n", window_end, s.name.c_str(), ops,
                     width > 0 ? ops / width : 0.0, p99);
      }
    }
    if (std::fclose(file_) != 0) Die("--timeline " + FLAGS.timeline + ": cannot write the file");
    file_ = nullptr;
  }

 private:
  struct Interval {
    uint64_t ops;
    float p99;
  };
  struct Segment {
    std::string name;
    double start, end;  // seconds since the timeline's start
    std::vector<uint64_t> current;  // the interval each thread is in
    std::map<uint64_t, std::vector<float>> pending;  // latencies, by interval
    std::map<uint64_t, Interval> done;
  };

  const double start_;     // NowMicros() at the start
  const double interval_;  // seconds
  std::FILE* file_;
  std::mutex mu_;
  std::vector<Segment> segments_;
};

struct Stats {
  double start = 0, finish = 0, seconds = 0, last = 0;
  long done = 0;
  int64_t bytes = 0;
  std::string message;
  std::vector<float> latencies;
  // --timeline: this thread's segment and the interval it is in.
  Timeline* timeline = nullptr;
  int segment = 0, thread = 0;
  uint64_t interval = 0;
  std::vector<float> interval_latencies;

  void Start() {
    start = finish = last = NowMicros();
    done = 0;
    bytes = 0;
    seconds = 0;
    message.clear();
    latencies.clear();
    if (timeline != nullptr) interval = timeline->IntervalOf(start);
  }
  void Stop() {
    finish = NowMicros();
    seconds = (finish - start) * 1e-6;
    if (timeline != nullptr) timeline->Add(segment, thread, interval, &interval_latencies, Timeline::kDone);
  }
  void FinishedSingleOp() {
    if (FLAGS.histogram || timeline != nullptr) {
      double now = NowMicros();
      float latency = static_cast<float>(now - last);
      if (FLAGS.histogram) latencies.push_back(latency);
      if (timeline != nullptr) {
        uint64_t index = timeline->IntervalOf(now);
        if (index != interval) {
          timeline->Add(segment, thread, interval, &interval_latencies, index);
          interval = index;
        }
        interval_latencies.push_back(latency);
      }
      last = now;
    }
    done++;
  }
  void AddMessage(const std::string& text) {
    if (text.empty()) return;
    if (!message.empty()) message.push_back(' ');
    message += text;
  }
  void Merge(const Stats& other) {
    latencies.insert(latencies.end(), other.latencies.begin(), other.latencies.end());
    done += other.done;
    bytes += other.bytes;
    seconds += other.seconds;
    start = std::min(start, other.start);
    finish = std::max(finish, other.finish);
    if (message.empty()) message = other.message;
  }
  void Report(const std::string& name) {
    long ops = done < 1 ? 1 : done;
    std::string extra;
    if (bytes > 0) {
      char rate[100];
      std::snprintf(rate, sizeof(rate), "%6.1f MB/s", (bytes / 1048576.0) / ((finish - start) * 1e-6));
      extra = rate;
    }
    if (!message.empty()) {
      if (!extra.empty()) extra.push_back(' ');
      extra += message;
    }
    std::printf("%-12s : %11.3f micros/op;%s%s\n", name.c_str(), seconds * 1e6 / ops, extra.empty() ? "" : " ",
                extra.c_str());
    if (FLAGS.histogram && !latencies.empty()) {
      std::sort(latencies.begin(), latencies.end());
      auto at = [&](double q) {
        size_t index = static_cast<size_t>(std::ceil(q * latencies.size()));
        if (index > 0) index--;
        return latencies[std::min(index, latencies.size() - 1)];
      };
      double sum = 0;
      for (float v : latencies) sum += v;
      std::printf("Microseconds per op:\nCount: %zu  Average: %.4f\nMin: %.4f  Median: %.4f  Max: %.4f\n",
                  latencies.size(), sum / latencies.size(), latencies.front(), at(0.5), latencies.back());
      std::printf("Percentiles: P50: %.2f P99: %.2f P99.9: %.2f P99.99: %.2f\n", at(0.5), at(0.99), at(0.999),
                  at(0.9999));
    }
    std::fflush(stdout);
  }
};

class Benchmark {
 public:
  // `timeline_file`: the --timeline file, open for writing, or null.
  explicit Benchmark(std::FILE* timeline_file) : timeline_file_(timeline_file) {
    if (FLAGS.cache_size >= 0) cache_.reset(leveldb::NewLRUCache(FLAGS.cache_size));
    if (FLAGS.bloom_bits > 0) filter_.reset(leveldb::NewBloomFilterPolicy(static_cast<int>(FLAGS.bloom_bits)));
    if (!FLAGS.use_existing_db) leveldb::DestroyDB(FLAGS.db, leveldb::Options());
  }
  ~Benchmark() { delete db_; }

  void Run() {
    std::printf("LevelDB:    version %d.%d\n", leveldb::kMajorVersion, leveldb::kMinorVersion);
    std::printf("Keys:       %d bytes each\n", FLAGS.key_size);
    std::printf("Values:     %d bytes each (%d bytes after compression)\n", FLAGS.value_size,
                static_cast<int>(FLAGS.value_size * FLAGS.compression_ratio + 0.5));
    std::printf("Entries:    %ld\n", FLAGS.num);
    std::printf("------------------------------------------------\n");
    Open();
    if (timeline_file_ != nullptr) timeline_.reset(new Timeline(FLAGS.timeline_interval, timeline_file_));
    std::stringstream list(FLAGS.benchmarks);
    std::string name;
    while (std::getline(list, name, ',')) {
      if (name.empty()) continue;
      num_ = FLAGS.num;
      reads_ = FLAGS.reads < 0 ? FLAGS.num : FLAGS.reads;
      value_size_ = FLAGS.value_size;
      sync_ = false;
      bool fresh = false;
      void (Benchmark::*method)(Stats*, Random*, int) = nullptr;
      if (name == "fillseq") {
        fresh = true;
        method = &Benchmark::FillSeq;
      } else if (name == "fillrandom") {
        fresh = true;
        method = &Benchmark::FillRandom;
      } else if (name == "overwrite") {
        method = &Benchmark::FillRandom;
      } else if (name == "fillsync") {
        fresh = true;
        num_ /= 1000;
        sync_ = true;
        method = &Benchmark::FillRandom;
      } else if (name == "readrandom") {
        method = &Benchmark::ReadRandom;
      } else if (name == "readmissing") {
        method = &Benchmark::ReadMissing;
      } else if (name == "readseq") {
        method = &Benchmark::ReadSeq;
      } else if (name == "readreverse") {
        method = &Benchmark::ReadReverse;
      } else if (name == "seekrandom") {
        method = &Benchmark::SeekRandom;
      } else if (name == "deleteseq") {
        method = &Benchmark::DeleteSeq;
      } else if (name == "deleterandom") {
        method = &Benchmark::DeleteRandom;
      } else if (name == "readrandomwriterandom") {
        method = &Benchmark::ReadRandomWriteRandom;
      } else if (name == "compact") {
        method = &Benchmark::Compact;
      } else if (name == "stats") {
        std::string stats;
        if (!db_->GetProperty("leveldb.stats", &stats)) stats = "(failed)";
        std::printf("\n%s\n", stats.c_str());
        continue;
      } else {
        Die("unknown benchmark '" + name + "'");
      }
      if (fresh) {
        if (FLAGS.use_existing_db) {
          std::printf("%-12s : skipped (--use_existing_db is true)\n", name.c_str());
          continue;
        }
        delete db_;
        db_ = nullptr;
        leveldb::DestroyDB(FLAGS.db, leveldb::Options());
        Open();
      }
      RunThreads(name, method, name == "compact" ? 1 : FLAGS.threads);
    }
    PrintSummary();
    if (timeline_) {
      timeline_->Write();
      std::printf("Timeline:   %s\n", FLAGS.timeline.c_str());
    }
  }

 private:
  void Open() {
    leveldb::Options options;
    options.create_if_missing = !FLAGS.use_existing_db;
    if (cache_) options.block_cache = cache_.get();
    if (filter_) options.filter_policy = filter_.get();
    if (FLAGS.write_buffer_size > 0) options.write_buffer_size = FLAGS.write_buffer_size;
    if (FLAGS.max_file_size > 0) options.max_file_size = FLAGS.max_file_size;
    if (FLAGS.block_size > 0) options.block_size = FLAGS.block_size;
    if (FLAGS.block_restart_interval > 0) options.block_restart_interval = static_cast<int>(FLAGS.block_restart_interval);
    if (FLAGS.open_files > 0) options.max_open_files = static_cast<int>(FLAGS.open_files);
    options.compression = FLAGS.compression == "none" ? leveldb::kNoCompression : leveldb::kSnappyCompression;
    leveldb::Status s = leveldb::DB::Open(options, FLAGS.db, &db_);
    if (!s.ok()) Die("open error: " + s.ToString());
  }

  void RunThreads(const std::string& name, void (Benchmark::*method)(Stats*, Random*, int), int threads) {
    std::vector<Stats> stats(threads);
    const int segment = timeline_ ? timeline_->Begin(name, threads) : 0;
    for (int i = 0; i < threads; i++) {
      stats[i].timeline = timeline_.get();
      stats[i].segment = segment;
      stats[i].thread = i;
    }
    std::vector<std::thread> workers;
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    for (int i = 0; i < threads; i++) {
      workers.emplace_back([&, i] {
        Random rand(static_cast<uint32_t>(1000 + FLAGS.seed + i));
        ready++;
        while (!go.load()) std::this_thread::yield();
        stats[i].Start();
        (this->*method)(&stats[i], &rand, i);
        stats[i].Stop();
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    go = true;
    for (auto& worker : workers) worker.join();
    if (timeline_) timeline_->End(segment);
    for (int i = 1; i < threads; i++) stats[0].Merge(stats[i]);
    stats[0].Report(name);
  }

  void Write(Stats* stats, Random* rand, bool seq) {
    if (num_ != FLAGS.num) stats->AddMessage("(" + std::to_string(num_) + " ops)");
    ValueGenerator gen;
    leveldb::WriteOptions options;
    options.sync = sync_;
    std::string key;
    int64_t bytes = 0;
    for (long i = 0; i < num_; i++) {
      const uint64_t k = seq ? i : rand->Uniform(static_cast<uint32_t>(FLAGS.num));
      MakeKey(k, &key);
      leveldb::Slice value = gen.Generate(value_size_);
      leveldb::Status s = db_->Put(options, key, value);
      if (!s.ok()) Die("put error: " + s.ToString());
      bytes += value.size() + key.size();
      stats->FinishedSingleOp();
    }
    stats->bytes += bytes;
    user_bytes_ += bytes;
  }
  void FillSeq(Stats* stats, Random* rand, int) { Write(stats, rand, true); }
  void FillRandom(Stats* stats, Random* rand, int) { Write(stats, rand, false); }

  void ReadRandom(Stats* stats, Random* rand, int) {
    leveldb::ReadOptions options;
    std::string key, value;
    long found = 0;
    for (long i = 0; i < reads_; i++) {
      MakeKey(rand->Uniform(static_cast<uint32_t>(FLAGS.num)), &key);
      if (db_->Get(options, key, &value).ok()) found++;
      stats->FinishedSingleOp();
    }
    stats->AddMessage("(" + std::to_string(found) + " of " + std::to_string(num_) + " found)");
  }

  void ReadMissing(Stats* stats, Random* rand, int) {
    leveldb::ReadOptions options;
    std::string key, value;
    for (long i = 0; i < reads_; i++) {
      MakeKey(rand->Uniform(static_cast<uint32_t>(FLAGS.num)), &key);
      key.pop_back();
      db_->Get(options, key, &value);
      stats->FinishedSingleOp();
    }
  }

  void Scan(Stats* stats, bool forward) {
    std::unique_ptr<leveldb::Iterator> iter(db_->NewIterator(leveldb::ReadOptions()));
    int64_t bytes = 0;
    long i = 0;
    for (forward ? iter->SeekToFirst() : iter->SeekToLast(); i < reads_ && iter->Valid();
         forward ? iter->Next() : iter->Prev()) {
      bytes += iter->key().size() + iter->value().size();
      stats->FinishedSingleOp();
      ++i;
    }
    stats->bytes += bytes;
  }
  void ReadSeq(Stats* stats, Random*, int) { Scan(stats, true); }
  void ReadReverse(Stats* stats, Random*, int) { Scan(stats, false); }

  void SeekRandom(Stats* stats, Random* rand, int) {
    leveldb::ReadOptions options;
    std::string key;
    long found = 0;
    for (long i = 0; i < reads_; i++) {
      std::unique_ptr<leveldb::Iterator> iter(db_->NewIterator(options));
      MakeKey(rand->Uniform(static_cast<uint32_t>(FLAGS.num)), &key);
      iter->Seek(key);
      if (iter->Valid() && iter->key() == leveldb::Slice(key)) found++;
      stats->FinishedSingleOp();
    }
    stats->AddMessage("(" + std::to_string(found) + " of " + std::to_string(num_) + " found)");
  }

  void Delete(Stats* stats, Random* rand, bool seq) {
    leveldb::WriteOptions options;
    std::string key;
    for (long i = 0; i < num_; i++) {
      MakeKey(seq ? i : rand->Uniform(static_cast<uint32_t>(FLAGS.num)), &key);
      leveldb::Status s = db_->Delete(options, key);
      if (!s.ok()) Die("del error: " + s.ToString());
      user_bytes_ += key.size();
      stats->FinishedSingleOp();
    }
  }
  void DeleteSeq(Stats* stats, Random* rand, int) { Delete(stats, rand, true); }
  void DeleteRandom(Stats* stats, Random* rand, int) { Delete(stats, rand, false); }

  // RocksDB's mix: of every 100 operations, readwritepercent reads first,
  // then the writes.
  void ReadRandomWriteRandom(Stats* stats, Random* rand, int) {
    leveldb::ReadOptions read_options;
    leveldb::WriteOptions write_options;
    ValueGenerator gen;
    std::string key, value;
    int reads_left = 0, writes_left = 0;
    long reads = 0, writes = 0, found = 0;
    int64_t bytes = 0;
    for (long i = 0; i < reads_; i++) {
      MakeKey(rand->Uniform(static_cast<uint32_t>(FLAGS.num)), &key);
      if (reads_left == 0 && writes_left == 0) {
        reads_left = FLAGS.readwritepercent;
        writes_left = 100 - FLAGS.readwritepercent;
      }
      if (reads_left > 0) {
        if (db_->Get(read_options, key, &value).ok()) found++;
        reads_left--;
        reads++;
      } else {
        leveldb::Slice v = gen.Generate(value_size_);
        leveldb::Status s = db_->Put(write_options, key, v);
        if (!s.ok()) Die("put error: " + s.ToString());
        bytes += key.size() + v.size();
        writes_left--;
        writes++;
      }
      stats->FinishedSingleOp();
    }
    user_bytes_ += bytes;
    stats->AddMessage("( reads:" + std::to_string(reads) + " writes:" + std::to_string(writes) +
                      " total:" + std::to_string(reads_) + " found:" + std::to_string(found) + ")");
  }

  void Compact(Stats* stats, Random*, int) {
    db_->CompactRange(nullptr, nullptr);
    stats->FinishedSingleOp();
  }

  // Write amplification from the per-level "Write(MB)" column of
  // leveldb.stats (flushes and compactions), and the process's CPU time.
  void PrintSummary() {
    std::string stats;
    double written_mb = 0;
    if (db_->GetProperty("leveldb.stats", &stats)) {
      std::istringstream lines(stats);
      std::string line;
      while (std::getline(lines, line)) {
        int level, files;
        double size, time, read, write;
        if (std::sscanf(line.c_str(), "%d %d %lf %lf %lf %lf", &level, &files, &size, &time, &read, &write) == 6) {
          written_mb += write;
        }
      }
    }
    std::printf("------------------------------------------------\n");
    if (user_bytes_ > 0) {
      std::printf("Write amplification: %.2f (%.1f MB written by flushes and compactions for %.1f MB of user data)\n",
                  written_mb * 1048576.0 / user_bytes_, written_mb, user_bytes_ / 1048576.0);
    }
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) == 0) {
      double user = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6;
      double system = usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
      std::printf("CPU: %.2f s (user %.2f, system %.2f)\n", user + system, user, system);
    }
  }

  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  std::FILE* timeline_file_;
  std::unique_ptr<Timeline> timeline_;
  leveldb::DB* db_ = nullptr;
  long num_ = 0;
  long reads_ = 0;
  int value_size_ = 0;
  bool sync_ = false;
  std::atomic<int64_t> user_bytes_{0};
};

}  // namespace

int main(int argc, char** argv) {
  ParseFlags(argc, argv);
  // Before anything else, so that a path that cannot be written stops the
  // run at once, with the database untouched.
  std::FILE* timeline_file = nullptr;
  if (!FLAGS.timeline.empty()) {
    timeline_file = std::fopen(FLAGS.timeline.c_str(), "w");
    if (timeline_file == nullptr) Die("--timeline " + FLAGS.timeline + ": cannot create the file");
  }
  Benchmark benchmark(timeline_file);
  benchmark.Run();
  return 0;
}
