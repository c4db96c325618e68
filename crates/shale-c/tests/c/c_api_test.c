/* A test of LevelDB 1.23's C API, written against LevelDB's own c.h and
   nothing else, so that the same program links with Debian's libleveldb
   and with libshaledb and must pass with both (crates/shale-c/tests/c_api.rs
   builds and runs it each way, and under Valgrind). It calls every function
   c.h declares.

   Usage:
     c_api_test suite DIR         every function, in a fresh database in DIR
     c_api_test interop DIR STEP  one step of a database passed between the
                                  two libraries: checks what steps 0..STEP-1
                                  wrote, then writes step STEP's keys */
#include <leveldb/c.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char* phase = "";

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: phase %s: check failed: %s\n", __FILE__,    \
              __LINE__, phase, #cond);                                    \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

#define CHECK_NO_ERROR(err)                                               \
  do {                                                                    \
    if ((err) != NULL) {                                                  \
      fprintf(stderr, "%s:%d: phase %s: error: %s\n", __FILE__, __LINE__, \
              phase, (err));                                              \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

static void start_phase(const char* name) {
  fprintf(stderr, "=== %s\n", name);
  phase = name;
}

static int starts_with(const char* text, const char* prefix) {
  return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* The value of key, or NULL, compared with expected (NULL: absent). */
static void check_get(leveldb_t* db, const leveldb_readoptions_t* options,
                      const char* key, const char* expected) {
  char* err = NULL;
  size_t len = 12345;
  char* value = leveldb_get(db, options, key, strlen(key), &len, &err);
  CHECK_NO_ERROR(err);
  if (expected == NULL) {
    CHECK(value == NULL);
    CHECK(len == 0);
  } else {
    CHECK(value != NULL);
    CHECK(len == strlen(expected));
    CHECK(memcmp(value, expected, len) == 0);
  }
  leveldb_free(value);
}

static void check_iter(leveldb_iterator_t* iter, const char* key,
                       const char* value) {
  size_t len = 0;
  const char* p;
  CHECK(leveldb_iter_valid(iter));
  p = leveldb_iter_key(iter, &len);
  CHECK(len == strlen(key) && memcmp(p, key, len) == 0);
  p = leveldb_iter_value(iter, &len);
  CHECK(len == strlen(value) && memcmp(p, value, len) == 0);
}

/* leveldb_writebatch_iterate's callbacks write what they see here. */
static char batch_trace[256];

static void trace_put(void* state, const char* k, size_t klen, const char* v,
                      size_t vlen) {
  CHECK(state == batch_trace);
  snprintf(batch_trace + strlen(batch_trace),
           sizeof(batch_trace) - strlen(batch_trace), "put(%.*s,%.*s)",
           (int)klen, k, (int)vlen, v);
}

static void trace_delete(void* state, const char* k, size_t klen) {
  CHECK(state == batch_trace);
  snprintf(batch_trace + strlen(batch_trace),
           sizeof(batch_trace) - strlen(batch_trace), "del(%.*s)", (int)klen,
           k);
}

/* A comparator: keys in reverse bytewise order. */
static int comparator_destroyed = 0;
static const char* comparator_name = "shaledb.test.ReverseBytewise";

static void reverse_destroy(void* state) {
  CHECK(state == &comparator_destroyed);
  comparator_destroyed++;
}

static int reverse_compare(void* state, const char* a, size_t alen,
                           const char* b, size_t blen) {
  size_t n = alen < blen ? alen : blen;
  int r = memcmp(a, b, n);
  (void)state;
  if (r == 0) r = alen < blen ? -1 : alen > blen ? 1 : 0;
  return -r;
}

static const char* reverse_name(void* state) {
  (void)state;
  return comparator_name;
}

static const char* other_name(void* state) {
  (void)state;
  return "shaledb.test.SomeOtherOrder";
}

/* A filter policy whose every filter is "fake" and whose answer is set by
   the test: when it says "no", a key present in a table is not found. */
static int filter_destroyed = 0;
static int filter_created = 0;
static int filter_answer = 1;

static void filter_destroy(void* state) {
  CHECK(state == &filter_destroyed);
  filter_destroyed++;
}

static char* filter_create(void* state, const char* const* keys,
                           const size_t* key_lengths, int num_keys,
                           size_t* filter_length) {
  char* filter = malloc(4);
  (void)state;
  (void)keys;
  (void)key_lengths;
  CHECK(num_keys > 0);
  filter_created++;
  memcpy(filter, "fake", 4);
  *filter_length = 4;
  return filter;
}

static uint8_t filter_match(void* state, const char* key, size_t length,
                            const char* filter, size_t filter_length) {
  (void)state;
  (void)key;
  (void)length;
  CHECK(filter_length == 4 && memcmp(filter, "fake", 4) == 0);
  return (uint8_t)filter_answer;
}

static const char* filter_name(void* state) {
  (void)state;
  return "shaledb.test.FakeFilter";
}

static int is_number(const char* text) {
  if (text == NULL || *text == 0) return 0;
  for (; *text; text++)
    if (*text < '0' || *text > '9') return 0;
  return 1;
}

static int suite(const char* dbname) {
  leveldb_env_t* env;
  leveldb_cache_t* cache;
  leveldb_options_t* options;
  leveldb_readoptions_t* roptions;
  leveldb_writeoptions_t* woptions;
  leveldb_t* db;
  char* err = NULL;
  char key[32], value[128];
  int i;

  start_phase("version");
  CHECK(leveldb_major_version() == 1);
  CHECK(leveldb_minor_version() == 23);

  start_phase("env");
  env = leveldb_create_default_env();
  {
    struct stat st;
    char* dir = leveldb_env_get_test_directory(env);
    CHECK(dir != NULL);
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    leveldb_free(dir);
  }
  cache = leveldb_cache_create_lru(100000);

  options = leveldb_options_create();
  /* (LevelDB takes no NULL comparator or env: its options would crash.) */
  leveldb_options_set_filter_policy(options, NULL);
  leveldb_options_set_error_if_exists(options, 1);
  leveldb_options_set_cache(options, cache);
  leveldb_options_set_env(options, env);
  leveldb_options_set_info_log(options, NULL);
  leveldb_options_set_write_buffer_size(options, 100000);
  leveldb_options_set_paranoid_checks(options, 1);
  leveldb_options_set_max_open_files(options, 10);
  leveldb_options_set_block_size(options, 1024);
  leveldb_options_set_block_restart_interval(options, 8);
  leveldb_options_set_max_file_size(options, 3 << 20);
  leveldb_options_set_compression(options, leveldb_no_compression);

  roptions = leveldb_readoptions_create();
  leveldb_readoptions_set_verify_checksums(roptions, 1);
  leveldb_readoptions_set_fill_cache(roptions, 0);

  woptions = leveldb_writeoptions_create();
  leveldb_writeoptions_set_sync(woptions, 1);

  start_phase("destroy missing");
  leveldb_destroy_db(options, dbname, &err);
  CHECK_NO_ERROR(err);

  start_phase("open missing");
  db = leveldb_open(options, dbname, &err);
  CHECK(db == NULL);
  CHECK(err != NULL);
  /* A second failure replaces the first message (freeing it: Valgrind
     would report the first one lost otherwise). */
  db = leveldb_open(options, dbname, &err);
  CHECK(db == NULL);
  CHECK(err != NULL);
  CHECK(starts_with(err, "Invalid argument: "));
  leveldb_free(err);
  err = NULL;

  start_phase("create");
  leveldb_options_set_create_if_missing(options, 1);
  db = leveldb_open(options, dbname, &err);
  CHECK_NO_ERROR(err);
  CHECK(db != NULL);
  check_get(db, roptions, "foo", NULL);

  start_phase("error_if_exists");
  leveldb_close(db);
  db = leveldb_open(options, dbname, &err);
  CHECK(db == NULL);
  CHECK(err != NULL && starts_with(err, "Invalid argument: "));
  leveldb_free(err);
  err = NULL;
  leveldb_options_set_error_if_exists(options, 0);
  db = leveldb_open(options, dbname, &err);
  CHECK_NO_ERROR(err);

  start_phase("put and get");
  leveldb_put(db, woptions, "foo", 3, "hello", 5, &err);
  CHECK_NO_ERROR(err);
  check_get(db, roptions, "foo", "hello");
  leveldb_put(db, woptions, "empty", 5, "", 0, &err);
  CHECK_NO_ERROR(err);
  check_get(db, roptions, "empty", "");
  /* Keys and values are bytes, NUL included. */
  leveldb_put(db, woptions, "n\0l", 3, "v\0v", 3, &err);
  CHECK_NO_ERROR(err);
  {
    size_t len = 0;
    char* got = leveldb_get(db, roptions, "n\0l", 3, &len, &err);
    CHECK_NO_ERROR(err);
    CHECK(got != NULL && len == 3 && memcmp(got, "v\0v", 3) == 0);
    leveldb_free(got);
  }

  start_phase("delete");
  leveldb_delete(db, woptions, "empty", 5, &err);
  CHECK_NO_ERROR(err);
  check_get(db, roptions, "empty", NULL);
  leveldb_delete(db, woptions, "never-there", 11, &err);
  CHECK_NO_ERROR(err);
  leveldb_delete(db, woptions, "n\0l", 3, &err);
  CHECK_NO_ERROR(err);

  start_phase("compact all");
  leveldb_compact_range(db, NULL, 0, NULL, 0);
  check_get(db, roptions, "foo", "hello");

  start_phase("compact range");
  leveldb_compact_range(db, "a", 1, "z", 1);
  check_get(db, roptions, "foo", "hello");

  start_phase("writebatch");
  {
    leveldb_writebatch_t* wb = leveldb_writebatch_create();
    leveldb_writebatch_t* more = leveldb_writebatch_create();
    leveldb_writebatch_put(wb, "foo", 3, "a", 1);
    leveldb_writebatch_clear(wb);
    leveldb_writebatch_put(wb, "bar", 3, "b", 1);
    leveldb_writebatch_put(wb, "box", 3, "c", 1);
    leveldb_writebatch_delete(wb, "bar", 3);
    leveldb_writebatch_put(more, "qux", 3, "d", 1);
    leveldb_writebatch_append(wb, more);
    leveldb_writebatch_destroy(more);
    leveldb_write(db, woptions, wb, &err);
    CHECK_NO_ERROR(err);
    check_get(db, roptions, "foo", "hello");
    check_get(db, roptions, "bar", NULL);
    check_get(db, roptions, "box", "c");
    check_get(db, roptions, "qux", "d");
    batch_trace[0] = 0;
    leveldb_writebatch_iterate(wb, batch_trace, trace_put, trace_delete);
    CHECK(strcmp(batch_trace, "put(bar,b)put(box,c)del(bar)put(qux,d)") == 0);
    leveldb_writebatch_clear(wb);
    batch_trace[0] = 0;
    leveldb_writebatch_iterate(wb, batch_trace, trace_put, trace_delete);
    CHECK(batch_trace[0] == 0);
    leveldb_writebatch_destroy(wb);
  }

  start_phase("iterator");
  {
    leveldb_iterator_t* iter = leveldb_create_iterator(db, roptions);
    CHECK(!leveldb_iter_valid(iter));
    leveldb_iter_seek_to_first(iter);
    check_iter(iter, "box", "c");
    leveldb_iter_next(iter);
    check_iter(iter, "foo", "hello");
    leveldb_iter_prev(iter);
    check_iter(iter, "box", "c");
    leveldb_iter_prev(iter);
    CHECK(!leveldb_iter_valid(iter));
    leveldb_iter_seek_to_last(iter);
    check_iter(iter, "qux", "d");
    leveldb_iter_seek(iter, "b", 1);
    check_iter(iter, "box", "c");
    leveldb_iter_seek(iter, "foo", 3);
    check_iter(iter, "foo", "hello");
    leveldb_iter_seek(iter, "r", 1);
    CHECK(!leveldb_iter_valid(iter));
    leveldb_iter_get_error(iter, &err);
    CHECK_NO_ERROR(err);
    leveldb_iter_destroy(iter);
  }

  start_phase("approximate sizes");
  {
    /* Enough data for several tables at a 100 KB write buffer. */
    int n = 5000;
    uint64_t sizes[2];
    const char* start[2] = {"a", "k00000000000000002500"};
    size_t start_len[2] = {1, 21};
    const char* limit[2] = {"k00000000000000002500", "z"};
    size_t limit_len[2] = {21, 1};
    leveldb_writeoptions_set_sync(woptions, 0);
    for (i = 0; i < n; i++) {
      snprintf(key, sizeof(key), "k%020d", i);
      snprintf(value, sizeof(value), "v%0100d", i);
      leveldb_put(db, woptions, key, strlen(key), value, strlen(value), &err);
      CHECK_NO_ERROR(err);
    }
    leveldb_compact_range(db, NULL, 0, NULL, 0);
    leveldb_approximate_sizes(db, 2, start, start_len, limit, limit_len,
                              sizes);
    CHECK(sizes[0] > 0);
    CHECK(sizes[1] > 0);
    snprintf(value, sizeof(value), "v%0100d", 1234);
    check_get(db, roptions, "k00000000000000001234", value);
    for (i = 0; i < n; i++) {
      snprintf(key, sizeof(key), "k%020d", i);
      leveldb_delete(db, woptions, key, strlen(key), &err);
      CHECK_NO_ERROR(err);
    }
    check_get(db, roptions, "k00000000000000001234", NULL);
  }

  start_phase("property");
  {
    char* prop = leveldb_property_value(db, "nosuchprop");
    CHECK(prop == NULL);
    prop = leveldb_property_value(db, "leveldb.stats");
    CHECK(prop != NULL);
    leveldb_free(prop);
    for (i = 0; i < 7; i++) {
      snprintf(key, sizeof(key), "leveldb.num-files-at-level%d", i);
      prop = leveldb_property_value(db, key);
      CHECK(is_number(prop));
      leveldb_free(prop);
    }
    prop = leveldb_property_value(db, "leveldb.num-files-at-level7");
    CHECK(prop == NULL);
    prop = leveldb_property_value(db, "leveldb.sstables");
    CHECK(prop != NULL && strstr(prop, "--- level 0 ---") != NULL);
    leveldb_free(prop);
    prop = leveldb_property_value(db, "leveldb.approximate-memory-usage");
    CHECK(is_number(prop));
    leveldb_free(prop);
  }

  start_phase("snapshot");
  {
    const leveldb_snapshot_t* snap = leveldb_create_snapshot(db);
    leveldb_delete(db, woptions, "foo", 3, &err);
    CHECK_NO_ERROR(err);
    leveldb_put(db, woptions, "new", 3, "after", 5, &err);
    CHECK_NO_ERROR(err);
    leveldb_readoptions_set_snapshot(roptions, snap);
    check_get(db, roptions, "foo", "hello");
    check_get(db, roptions, "new", NULL);
    {
      leveldb_iterator_t* iter = leveldb_create_iterator(db, roptions);
      leveldb_iter_seek(iter, "foo", 3);
      check_iter(iter, "foo", "hello");
      leveldb_iter_destroy(iter);
    }
    leveldb_readoptions_set_snapshot(roptions, NULL);
    check_get(db, roptions, "foo", NULL);
    check_get(db, roptions, "new", "after");
    leveldb_release_snapshot(db, snap);
  }

  start_phase("repair");
  {
    leveldb_close(db);
    leveldb_options_set_create_if_missing(options, 0);
    leveldb_options_set_error_if_exists(options, 0);
    leveldb_repair_db(options, dbname, &err);
    CHECK_NO_ERROR(err);
    db = leveldb_open(options, dbname, &err);
    CHECK_NO_ERROR(err);
    check_get(db, roptions, "foo", NULL);
    check_get(db, roptions, "box", "c");
    check_get(db, roptions, "new", "after");
    leveldb_options_set_create_if_missing(options, 1);
    leveldb_options_set_error_if_exists(options, 1);
  }

  start_phase("destroy open");
  /* The LOCK is held: destroying an open database fails. */
  leveldb_destroy_db(options, dbname, &err);
  CHECK(err != NULL && starts_with(err, "IO error: "));
  leveldb_free(err);
  err = NULL;

  start_phase("comparator");
  {
    leveldb_comparator_t* cmp = leveldb_comparator_create(
        &comparator_destroyed, reverse_destroy, reverse_compare, reverse_name);
    leveldb_comparator_t* other = leveldb_comparator_create(
        &comparator_destroyed, reverse_destroy, reverse_compare, other_name);
    /* Options of their own: LevelDB's cannot go back to the default
       comparator once one is set. */
    leveldb_options_t* reverse = leveldb_options_create();
    leveldb_options_t* renamed = leveldb_options_create();
    leveldb_options_t* bytewise = leveldb_options_create();
    leveldb_iterator_t* iter;
    leveldb_close(db);
    leveldb_destroy_db(options, dbname, &err);
    CHECK_NO_ERROR(err);
    leveldb_options_set_comparator(reverse, cmp);
    leveldb_options_set_comparator(renamed, other);
    leveldb_options_set_create_if_missing(reverse, 1);
    db = leveldb_open(reverse, dbname, &err);
    CHECK_NO_ERROR(err);
    leveldb_put(db, woptions, "a", 1, "1", 1, &err);
    CHECK_NO_ERROR(err);
    leveldb_put(db, woptions, "b", 1, "2", 1, &err);
    CHECK_NO_ERROR(err);
    leveldb_put(db, woptions, "c", 1, "3", 1, &err);
    CHECK_NO_ERROR(err);
    leveldb_compact_range(db, NULL, 0, NULL, 0);
    iter = leveldb_create_iterator(db, roptions);
    leveldb_iter_seek_to_first(iter);
    check_iter(iter, "c", "3");
    leveldb_iter_next(iter);
    check_iter(iter, "b", "2");
    leveldb_iter_seek(iter, "b", 1);
    check_iter(iter, "b", "2");
    leveldb_iter_seek_to_last(iter);
    check_iter(iter, "a", "1");
    leveldb_iter_destroy(iter);
    leveldb_close(db);

    /* The name recorded when the database was created must match. */
    db = leveldb_open(renamed, dbname, &err);
    CHECK(db == NULL);
    CHECK(err != NULL && starts_with(err, "Invalid argument: "));
    CHECK(strstr(err, comparator_name) != NULL);
    leveldb_free(err);
    err = NULL;
    db = leveldb_open(bytewise, dbname, &err);
    CHECK(db == NULL);
    CHECK(err != NULL && starts_with(err, "Invalid argument: "));
    CHECK(strstr(err, comparator_name) != NULL);
    leveldb_free(err);
    err = NULL;

    db = leveldb_open(reverse, dbname, &err);
    CHECK_NO_ERROR(err);
    check_get(db, roptions, "b", "2");
    leveldb_close(db);
    leveldb_options_destroy(reverse);
    leveldb_options_destroy(renamed);
    leveldb_options_destroy(bytewise);
    leveldb_comparator_destroy(cmp);
    leveldb_comparator_destroy(other);
    CHECK(comparator_destroyed == 2);
    leveldb_destroy_db(options, dbname, &err);
    CHECK_NO_ERROR(err);
  }

  start_phase("filter");
  {
    int run;
    for (run = 0; run < 2; run++) {
      leveldb_filterpolicy_t* policy =
          run == 0 ? leveldb_filterpolicy_create(&filter_destroyed,
                                                 filter_destroy, filter_create,
                                                 filter_match, filter_name)
                   : leveldb_filterpolicy_create_bloom(10);
      leveldb_options_set_filter_policy(options, policy);
      db = leveldb_open(options, dbname, &err);
      CHECK_NO_ERROR(err);
      leveldb_put(db, woptions, "foo", 3, "foovalue", 8, &err);
      CHECK_NO_ERROR(err);
      leveldb_put(db, woptions, "bar", 3, "barvalue", 8, &err);
      CHECK_NO_ERROR(err);
      leveldb_compact_range(db, NULL, 0, NULL, 0);
      filter_answer = 1;
      check_get(db, roptions, "foo", "foovalue");
      check_get(db, roptions, "bar", "barvalue");
      if (run == 0) {
        CHECK(filter_created > 0);
        /* The table's filter is consulted: a "no" hides keys it holds. */
        filter_answer = 0;
        check_get(db, roptions, "foo", NULL);
        check_get(db, roptions, "bar", NULL);
        filter_answer = 1;
        check_get(db, roptions, "foo", "foovalue");
      }
      leveldb_close(db);
      leveldb_options_set_filter_policy(options, NULL);
      leveldb_filterpolicy_destroy(policy);
      leveldb_destroy_db(options, dbname, &err);
      CHECK_NO_ERROR(err);
    }
    CHECK(filter_destroyed == 1);
  }

  start_phase("cleanup");
  leveldb_options_destroy(options);
  leveldb_readoptions_destroy(roptions);
  leveldb_writeoptions_destroy(woptions);
  leveldb_cache_destroy(cache);
  leveldb_env_destroy(env);
  fprintf(stderr, "PASS\n");
  return 0;
}

/* Step STEP of the interop test writes keys "s<STEP>-<i>" for i < 500 (value
   "v<STEP>-<i>") and deletes step STEP-1's keys whose i is a multiple of
   10; odd steps end with a full compaction, even ones leave their writes in
   the log. Keys are ordered by the reverse comparator, so its name is
   checked at each open. */
#define INTEROP_KEYS 500

static void interop_key(char* out, size_t size, int step, int i) {
  snprintf(out, size, "s%d-%05d", step, i);
}

static int interop(const char* dbname, int step) {
  leveldb_comparator_t* cmp = leveldb_comparator_create(
      &comparator_destroyed, reverse_destroy, reverse_compare, reverse_name);
  leveldb_filterpolicy_t* bloom = leveldb_filterpolicy_create_bloom(10);
  leveldb_options_t* options = leveldb_options_create();
  leveldb_readoptions_t* roptions = leveldb_readoptions_create();
  leveldb_writeoptions_t* woptions = leveldb_writeoptions_create();
  leveldb_t* db;
  char* err = NULL;
  char key[32], value[32], previous[32] = "";
  int s, i, expected = 0, seen = 0;

  leveldb_options_set_filter_policy(options, bloom);
  leveldb_options_set_write_buffer_size(options, 8 * 1024);
  leveldb_options_set_compression(options, leveldb_snappy_compression);
  leveldb_readoptions_set_verify_checksums(roptions, 1);

  start_phase("interop: comparator name");
  if (step > 0) {
    /* Opened with the default comparator: LevelDB's name check refuses. */
    db = leveldb_open(options, dbname, &err);
    CHECK(db == NULL);
    CHECK(err != NULL && starts_with(err, "Invalid argument: "));
    CHECK(strstr(err, comparator_name) != NULL);
    leveldb_free(err);
    err = NULL;
  }
  leveldb_options_set_comparator(options, cmp);
  leveldb_options_set_create_if_missing(options, step == 0);
  leveldb_options_set_error_if_exists(options, step == 0);
  db = leveldb_open(options, dbname, &err);
  CHECK_NO_ERROR(err);

  start_phase("interop: earlier steps");
  for (s = 0; s < step; s++) {
    for (i = 0; i < INTEROP_KEYS; i++) {
      int deleted = s == step - 1 ? 0 : i % 10 == 0;
      interop_key(key, sizeof(key), s, i);
      snprintf(value, sizeof(value), "v%d-%d", s, i);
      check_get(db, roptions, key, deleted ? NULL : value);
      expected += !deleted;
    }
  }
  {
    leveldb_iterator_t* iter = leveldb_create_iterator(db, roptions);
    for (leveldb_iter_seek_to_first(iter); leveldb_iter_valid(iter);
         leveldb_iter_next(iter)) {
      size_t len;
      const char* k = leveldb_iter_key(iter, &len);
      CHECK(len < sizeof(key));
      memcpy(key, k, len);
      key[len] = 0;
      /* Reverse order: each key is below the one before it. */
      CHECK(seen == 0 || strcmp(key, previous) < 0);
      strcpy(previous, key);
      seen++;
    }
    leveldb_iter_get_error(iter, &err);
    CHECK_NO_ERROR(err);
    leveldb_iter_destroy(iter);
  }
  CHECK(seen == expected);

  start_phase("interop: this step");
  for (i = 0; i < INTEROP_KEYS; i++) {
    interop_key(key, sizeof(key), step, i);
    snprintf(value, sizeof(value), "v%d-%d", step, i);
    leveldb_put(db, woptions, key, strlen(key), value, strlen(value), &err);
    CHECK_NO_ERROR(err);
    if (step > 0 && i % 10 == 0) {
      interop_key(key, sizeof(key), step - 1, i);
      leveldb_delete(db, woptions, key, strlen(key), &err);
      CHECK_NO_ERROR(err);
    }
  }
  if (step % 2 == 1) leveldb_compact_range(db, NULL, 0, NULL, 0);
  leveldb_close(db);
  leveldb_options_destroy(options);
  leveldb_readoptions_destroy(roptions);
  leveldb_writeoptions_destroy(woptions);
  leveldb_filterpolicy_destroy(bloom);
  leveldb_comparator_destroy(cmp);
  CHECK(comparator_destroyed == 1);
  fprintf(stderr, "PASS\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "suite") == 0) return suite(argv[2]);
  if (argc == 4 && strcmp(argv[1], "interop") == 0)
    return interop(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: %s suite DIR | interop DIR STEP\n", argv[0]);
  return 2;
}
