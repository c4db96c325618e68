// A thin C ABI over the parts of LevelDB 1.23 that ShaleDB's tests and
// benchmarks compare against: TableBuilder, Table, the bloom filter policy,
// DumpFile and DB.
//
// Conventions, so that Rust needs one FFI call per operation:
//  * Batches of byte strings travel as one concatenated buffer plus a u32
//    length per item.
//  * Results are malloc'd buffers handed to Rust, which copies them and
//    releases them with shim_free().
//  * A function that can fail returns nullptr on success, or a malloc'd,
//    NUL-terminated copy of leveldb::Status::ToString().
//  * Every function is noexcept: LevelDB reports errors through Status, and
//    the only exception it can raise is std::bad_alloc. Letting that unwind
//    into Rust would be undefined behaviour; noexcept turns it into
//    std::terminate, a clean abort.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "leveldb/comparator.h"
#include "leveldb/db.h"
#include "leveldb/dumpfile.h"
#include "leveldb/env.h"
#include "leveldb/filter_policy.h"
#include "leveldb/iterator.h"
#include "leveldb/options.h"
#include "leveldb/table.h"
#include "leveldb/table_builder.h"
#include "leveldb/write_batch.h"

// The option structs are mirrored field for field by #[repr(C)] structs in
// src/ffi.rs; change both together. Flags are int32_t 0/1 rather than bool to
// keep the layout obvious on both sides.

// leveldb_shim::TableOptions.
struct ShimTableOptions {
  size_t block_size;
  int32_t block_restart_interval;
  int32_t use_bloom;  // 0 or 1; bloom_bits_per_key is ignored when 0
  int32_t bloom_bits_per_key;
  int32_t snappy;  // 0 or 1
};

// leveldb_shim::DbOptions.
struct ShimDbOptions {
  int32_t create_if_missing;
  int32_t error_if_exists;
  int32_t paranoid_checks;
  int32_t use_bloom;
  int32_t bloom_bits_per_key;
  int32_t snappy;
  int32_t block_restart_interval;
  int32_t max_open_files;
  size_t write_buffer_size;
  size_t max_file_size;
  size_t block_size;
};

// An open database (opaque to Rust) and the filter policy its Options point
// at: Options holds a raw pointer that the DB never frees, and the policy must
// outlive the DB, so both are freed together in shim_db_close().
struct ShimDb {
  std::unique_ptr<const leveldb::FilterPolicy> filter_policy;
  std::unique_ptr<leveldb::DB> db;
};

namespace {

// Copies bytes into a malloc'd buffer that Rust frees with shim_free().
// Never returns nullptr (malloc(0) might), so Rust can free unconditionally.
uint8_t* CopyOut(const void* data, size_t len) {
  auto* out = static_cast<uint8_t*>(std::malloc(len == 0 ? 1 : len));
  if (out == nullptr) std::abort();
  if (len > 0) std::memcpy(out, data, len);
  return out;
}

// nullptr for OK, otherwise the status text as a malloc'd C string.
char* StatusOut(const leveldb::Status& s) {
  if (s.ok()) return nullptr;
  std::string text = s.ToString();
  return reinterpret_cast<char*>(CopyOut(text.c_str(), text.size() + 1));
}

char* ErrorOut(const char* message) {
  return StatusOut(leveldb::Status::InvalidArgument(message));
}

// Cuts a concatenated buffer back into slices, one per length.
std::vector<leveldb::Slice> SplitFlat(const uint8_t* data, const uint32_t* lens,
                                      size_t count) {
  std::vector<leveldb::Slice> slices;
  slices.reserve(count);
  size_t offset = 0;
  for (size_t i = 0; i < count; i++) {
    slices.emplace_back(reinterpret_cast<const char*>(data) + offset, lens[i]);
    offset += lens[i];
  }
  return slices;
}

// Drains an iterator into the flat output layout used by shim_read_table and
// shim_db_scan_all: keys and values concatenated (k0 v0 k1 v1 ...) in *out,
// and 2 * *count lengths (key length, value length, ...) in *lens.
char* CollectEntries(leveldb::Iterator* it, uint8_t** out, size_t* out_len,
                     size_t** lens, size_t* count) {
  std::string data;
  std::vector<size_t> lengths;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    data.append(it->key().data(), it->key().size());
    data.append(it->value().data(), it->value().size());
    lengths.push_back(it->key().size());
    lengths.push_back(it->value().size());
  }
  // An iterator stops at the first corrupt block; only status() tells that
  // apart from the end of the data.
  if (!it->status().ok()) return StatusOut(it->status());

  *out_len = data.size();
  *out = CopyOut(data.data(), data.size());
  *count = lengths.size() / 2;
  *lens = reinterpret_cast<size_t*>(
      CopyOut(lengths.data(), lengths.size() * sizeof(size_t)));
  return nullptr;
}

// A WritableFile that appends to a string, so TableBuilder and DumpFile write
// into memory and the test sees the exact bytes LevelDB produced.
class StringFile final : public leveldb::WritableFile {
 public:
  leveldb::Status Append(const leveldb::Slice& data) override {
    contents_.append(data.data(), data.size());
    return leveldb::Status::OK();
  }
  leveldb::Status Close() override { return leveldb::Status::OK(); }
  leveldb::Status Flush() override { return leveldb::Status::OK(); }
  leveldb::Status Sync() override { return leveldb::Status::OK(); }

  const std::string& contents() const { return contents_; }

 private:
  std::string contents_;
};

// A RandomAccessFile over caller-owned memory. Read() returns a slice into
// that memory instead of copying; Table treats such a result like an mmap'd
// file and does not take ownership of it.
class MemoryFile final : public leveldb::RandomAccessFile {
 public:
  MemoryFile(const uint8_t* data, size_t len)
      : data_(reinterpret_cast<const char*>(data)), len_(len) {}

  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result,
                       char* /*scratch*/) const override {
    if (offset > len_) {
      *result = leveldb::Slice();
      return leveldb::Status::IOError("read past end of in-memory table");
    }
    size_t available = len_ - static_cast<size_t>(offset);
    *result = leveldb::Slice(data_ + offset, n < available ? n : available);
    return leveldb::Status::OK();
  }

 private:
  const char* data_;
  size_t len_;
};

// Table options, plus the filter policy they point at (Options holds a raw
// pointer and never frees it, so its owner must live as long as the options).
struct OwnedTableOptions {
  std::unique_ptr<const leveldb::FilterPolicy> filter_policy;
  leveldb::Options options;

  explicit OwnedTableOptions(const ShimTableOptions& o) {
    if (o.use_bloom) {
      filter_policy.reset(leveldb::NewBloomFilterPolicy(o.bloom_bits_per_key));
    }
    options.block_size = o.block_size;
    options.block_restart_interval = o.block_restart_interval;
    options.filter_policy = filter_policy.get();
    options.compression =
        o.snappy ? leveldb::kSnappyCompression : leveldb::kNoCompression;
    // Table::Open verifies the footer, index and meta block checksums only
    // under paranoid_checks; a compatibility test wants every byte checked.
    options.paranoid_checks = true;
  }
};

}  // namespace

extern "C" {

void shim_free(void* ptr) noexcept { std::free(ptr); }

// Builds a table from `count` sorted entries into memory.
// On success *out/*out_len hold the table file's bytes.
char* shim_build_table(const uint8_t* keys, const uint32_t* key_lens,
                       const uint8_t* values, const uint32_t* value_lens,
                       size_t count, const ShimTableOptions* table_options,
                       uint8_t** out, size_t* out_len) noexcept {
  OwnedTableOptions owned(*table_options);
  std::vector<leveldb::Slice> key_slices = SplitFlat(keys, key_lens, count);
  std::vector<leveldb::Slice> value_slices =
      SplitFlat(values, value_lens, count);

  StringFile file;
  leveldb::TableBuilder builder(owned.options, &file);
  for (size_t i = 0; i < count; i++) {
    // TableBuilder only assert()s ordering, and Debian builds with NDEBUG;
    // check here so unsorted input is an error instead of a broken table.
    if (i > 0 && owned.options.comparator->Compare(key_slices[i - 1],
                                                   key_slices[i]) >= 0) {
      builder.Abandon();
      return ErrorOut("table entries must be strictly increasing by key");
    }
    builder.Add(key_slices[i], value_slices[i]);
  }
  leveldb::Status s = builder.Finish();
  if (!s.ok()) return StatusOut(s);

  *out_len = file.contents().size();
  *out = CopyOut(file.contents().data(), *out_len);
  return nullptr;
}

// Opens table bytes with leveldb::Table and iterates every entry in order.
// On success *out holds keys and values concatenated (k0 v0 k1 v1 ...) and
// *lens holds 2 * *count lengths (key length, value length, ...).
char* shim_read_table(const uint8_t* bytes, size_t len,
                      const ShimTableOptions* table_options, uint8_t** out,
                      size_t* out_len, size_t** lens, size_t* count) noexcept {
  OwnedTableOptions owned(*table_options);
  MemoryFile file(bytes, len);
  leveldb::Table* raw_table = nullptr;
  leveldb::Status s =
      leveldb::Table::Open(owned.options, &file, len, &raw_table);
  if (!s.ok()) return StatusOut(s);
  std::unique_ptr<leveldb::Table> table(raw_table);

  leveldb::ReadOptions read_options;
  read_options.verify_checksums = true;
  std::unique_ptr<leveldb::Iterator> it(table->NewIterator(read_options));
  return CollectEntries(it.get(), out, out_len, lens, count);
}

// leveldb::NewBloomFilterPolicy(bits_per_key)->CreateFilter over the keys.
void shim_bloom_create_filter(int32_t bits_per_key, const uint8_t* keys,
                              const uint32_t* key_lens, size_t count,
                              uint8_t** out, size_t* out_len) noexcept {
  std::unique_ptr<const leveldb::FilterPolicy> policy(
      leveldb::NewBloomFilterPolicy(bits_per_key));
  std::vector<leveldb::Slice> key_slices = SplitFlat(keys, key_lens, count);
  std::string filter;
  policy->CreateFilter(key_slices.data(), static_cast<int>(count), &filter);
  *out_len = filter.size();
  *out = CopyOut(filter.data(), filter.size());
}

int32_t shim_bloom_key_may_match(int32_t bits_per_key, const uint8_t* key,
                                 size_t key_len, const uint8_t* filter,
                                 size_t filter_len) noexcept {
  std::unique_ptr<const leveldb::FilterPolicy> policy(
      leveldb::NewBloomFilterPolicy(bits_per_key));
  return policy->KeyMayMatch(
      leveldb::Slice(reinterpret_cast<const char*>(key), key_len),
      leveldb::Slice(reinterpret_cast<const char*>(filter), filter_len));
}

// leveldb::DumpFile into memory. DumpFile picks the parser (log, MANIFEST,
// table) from the file name, so the path must keep LevelDB's naming.
char* shim_dump_file(const char* path, size_t path_len, uint8_t** out,
                     size_t* out_len) noexcept {
  StringFile dst;
  leveldb::Status s = leveldb::DumpFile(leveldb::Env::Default(),
                                        std::string(path, path_len), &dst);
  if (!s.ok()) return StatusOut(s);
  *out_len = dst.contents().size();
  *out = CopyOut(dst.contents().data(), dst.contents().size());
  return nullptr;
}


char* shim_db_open(const char* path, size_t path_len,
                   const ShimDbOptions* db_options, ShimDb** out) noexcept {
  auto handle = std::make_unique<ShimDb>();
  if (db_options->use_bloom) {
    handle->filter_policy.reset(
        leveldb::NewBloomFilterPolicy(db_options->bloom_bits_per_key));
  }
  leveldb::Options options;
  options.create_if_missing = db_options->create_if_missing;
  options.error_if_exists = db_options->error_if_exists;
  options.paranoid_checks = db_options->paranoid_checks;
  options.write_buffer_size = db_options->write_buffer_size;
  options.max_file_size = db_options->max_file_size;
  options.block_size = db_options->block_size;
  options.block_restart_interval = db_options->block_restart_interval;
  options.filter_policy = handle->filter_policy.get();
  options.compression = db_options->snappy ? leveldb::kSnappyCompression
                                           : leveldb::kNoCompression;
  options.max_open_files = db_options->max_open_files;

  leveldb::DB* db = nullptr;
  leveldb::Status s =
      leveldb::DB::Open(options, std::string(path, path_len), &db);
  if (!s.ok()) return StatusOut(s);
  handle->db.reset(db);
  *out = handle.release();
  return nullptr;
}

void shim_db_close(ShimDb* handle) noexcept {
  // Members are destroyed in reverse order: the DB first, then its policy.
  delete handle;
}

// Applies `count` operations as one WriteBatch: is_put[i] != 0 puts
// key i with value i, otherwise deletes key i (value i must then be empty).
char* shim_db_write(ShimDb* handle, const uint8_t* keys,
                    const uint32_t* key_lens, const uint8_t* values,
                    const uint32_t* value_lens, const uint8_t* is_put,
                    size_t count, int32_t sync) noexcept {
  std::vector<leveldb::Slice> key_slices = SplitFlat(keys, key_lens, count);
  std::vector<leveldb::Slice> value_slices =
      SplitFlat(values, value_lens, count);
  leveldb::WriteBatch batch;
  for (size_t i = 0; i < count; i++) {
    if (is_put[i]) {
      batch.Put(key_slices[i], value_slices[i]);
    } else {
      batch.Delete(key_slices[i]);
    }
  }
  leveldb::WriteOptions write_options;
  write_options.sync = sync;
  return StatusOut(handle->db->Write(write_options, &batch));
}

// On success *found says whether the key exists; if it does, *out/*out_len
// hold its value.
char* shim_db_get(ShimDb* handle, const uint8_t* key, size_t key_len,
                  int32_t* found, uint8_t** out, size_t* out_len) noexcept {
  std::string value;
  leveldb::ReadOptions read_options;
  read_options.verify_checksums = true;
  leveldb::Status s = handle->db->Get(
      read_options, leveldb::Slice(reinterpret_cast<const char*>(key), key_len),
      &value);
  *found = 0;
  if (s.IsNotFound()) return nullptr;
  if (!s.ok()) return StatusOut(s);
  *found = 1;
  *out_len = value.size();
  *out = CopyOut(value.data(), value.size());
  return nullptr;
}

// Forward scan of the whole database; output layout as shim_read_table.
char* shim_db_scan_all(ShimDb* handle, uint8_t** out, size_t* out_len,
                       size_t** lens, size_t* count) noexcept {
  leveldb::ReadOptions read_options;
  read_options.verify_checksums = true;
  std::unique_ptr<leveldb::Iterator> it(handle->db->NewIterator(read_options));
  return CollectEntries(it.get(), out, out_len, lens, count);
}

// A null begin (end) means "before the first key" ("after the last key").
void shim_db_compact_range(ShimDb* handle, const uint8_t* begin,
                           size_t begin_len, const uint8_t* end,
                           size_t end_len) noexcept {
  leveldb::Slice begin_slice(reinterpret_cast<const char*>(begin), begin_len);
  leveldb::Slice end_slice(reinterpret_cast<const char*>(end), end_len);
  handle->db->CompactRange(begin != nullptr ? &begin_slice : nullptr,
                           end != nullptr ? &end_slice : nullptr);
}

// Returns 1 and fills *out/*out_len if LevelDB knows the property, else 0.
int32_t shim_db_property(ShimDb* handle, const char* name, size_t name_len,
                         uint8_t** out, size_t* out_len) noexcept {
  std::string value;
  if (!handle->db->GetProperty(leveldb::Slice(name, name_len), &value)) {
    return 0;
  }
  *out_len = value.size();
  *out = CopyOut(value.data(), value.size());
  return 1;
}

}  // extern "C"
