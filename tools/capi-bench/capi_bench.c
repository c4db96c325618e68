/* capi_bench: db_bench's fillrandom and readrandom through LevelDB's C API
   (leveldb/c.h), to compare ShaleDB through libshaledb with ShaleDB through
   its Rust API (`shale bench`) on the same workload, or with LevelDB when
   linked to libleveldb. Keys and values are made as `shale bench` and
   db_bench make them (crates/shale-cli/src/bench/generator.rs): LevelDB's
   Park-Miller Random, keys "%016d" drawn from Random(1000), values
   consecutive slices of a buffer of 100-byte pieces, each 50 random
   characters ' '..'~' repeated, from Random(301). One thread. Options are
   LevelDB's defaults plus a 10-bit Bloom filter (shale bench --bloom_bits=10).

   Build (scripts/capi-bench does it):
     cc -O2 tools/capi-bench/capi_bench.c -o capi_bench -lshaledb
   Run:
     capi_bench --db=DIR --num=N [--benchmarks=fillrandom,readrandom]
   Prints db_bench's lines: "fillrandom   :  X micros/op;  Y MB/s". */
#define _POSIX_C_SOURCE 200809L
#include <leveldb/c.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  uint32_t seed;
} Random;

static Random random_new(uint32_t seed) {
  Random r;
  r.seed = seed & 0x7fffffffu;
  if (r.seed == 0 || r.seed == 2147483647u) r.seed = 1;
  return r;
}

static uint32_t random_next(Random* r) {
  const uint32_t M = 2147483647u;
  uint64_t product = (uint64_t)r->seed * 16807u;
  uint32_t seed = (uint32_t)((product >> 31) + (product & M));
  if (seed > M) seed -= M;
  r->seed = seed;
  return seed;
}

static uint32_t random_uniform(Random* r, uint32_t n) {
  return random_next(r) % (n ? n : 1);
}

/* db_bench's RandomGenerator with compression_ratio 0.5. */
typedef struct {
  char* data;
  size_t size;
  size_t position;
} Values;

static Values values_new(void) {
  Values v;
  Random rnd = random_new(301);
  v.data = malloc((1 << 20) + 100);
  v.size = 0;
  v.position = 0;
  while (v.size < (1 << 20)) {
    char piece[50];
    int i;
    for (i = 0; i < 50; i++) piece[i] = (char)(' ' + random_uniform(&rnd, 95));
    memcpy(v.data + v.size, piece, 50);
    memcpy(v.data + v.size + 50, piece, 50);
    v.size += 100;
  }
  return v;
}

static const char* values_generate(Values* v, size_t len) {
  if (v->position + len > v->size) v->position = 0;
  v->position += len;
  return v->data + v->position - len;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fail(const char* what, char* err) {
  fprintf(stderr, "%s: %s\n", what, err);
  exit(1);
}

int main(int argc, char** argv) {
  const char* dir = NULL;
  const char* benchmarks = "fillrandom,readrandom";
  long num = 1000000;
  const size_t value_size = 100;
  int i;
  for (i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--db=", 5) == 0) {
      dir = argv[i] + 5;
    } else if (strncmp(argv[i], "--num=", 6) == 0) {
      num = atol(argv[i] + 6);
    } else if (strncmp(argv[i], "--benchmarks=", 13) == 0) {
      benchmarks = argv[i] + 13;
    } else {
      fprintf(stderr, "usage: %s --db=DIR [--num=N] [--benchmarks=LIST]\n",
              argv[0]);
      return 2;
    }
  }
  if (dir == NULL || num <= 0) {
    fprintf(stderr, "--db=DIR and a positive --num are required\n");
    return 2;
  }

  leveldb_options_t* options = leveldb_options_create();
  leveldb_filterpolicy_t* bloom = leveldb_filterpolicy_create_bloom(10);
  leveldb_writeoptions_t* woptions = leveldb_writeoptions_create();
  leveldb_readoptions_t* roptions = leveldb_readoptions_create();
  char* err = NULL;
  leveldb_options_set_create_if_missing(options, 1);
  leveldb_options_set_filter_policy(options, bloom);
  leveldb_destroy_db(options, dir, &err);
  if (err) fail("destroy", err);
  leveldb_t* db = leveldb_open(options, dir, &err);
  if (err) fail("open", err);

  printf("capi_bench: LevelDB C API %d.%d, %ld entries, %zu-byte values\n",
         leveldb_major_version(), leveldb_minor_version(), num, value_size);
  char list[256];
  snprintf(list, sizeof(list), "%s", benchmarks);
  for (char* name = strtok(list, ","); name; name = strtok(NULL, ",")) {
    Random rand = random_new(1000);
    char key[32];
    double start = now();
    if (strcmp(name, "fillrandom") == 0) {
      Values values = values_new();
      uint64_t bytes = 0;
      long n;
      for (n = 0; n < num; n++) {
        int k = (int)random_uniform(&rand, (uint32_t)num);
        snprintf(key, sizeof(key), "%016d", k);
        const char* value = values_generate(&values, value_size);
        leveldb_put(db, woptions, key, 16, value, value_size, &err);
        if (err) fail("put", err);
        bytes += 16 + value_size;
      }
      double seconds = now() - start;
      printf("%-12s : %11.3f micros/op; %6.1f MB/s\n", name,
             seconds * 1e6 / num, bytes / 1048576.0 / seconds);
      free(values.data);
    } else if (strcmp(name, "readrandom") == 0) {
      long found = 0, n;
      for (n = 0; n < num; n++) {
        int k = (int)random_uniform(&rand, (uint32_t)num);
        size_t len;
        snprintf(key, sizeof(key), "%016d", k);
        char* value = leveldb_get(db, roptions, key, 16, &len, &err);
        if (err) fail("get", err);
        if (value) {
          found++;
          leveldb_free(value);
        }
      }
      double seconds = now() - start;
      printf("%-12s : %11.3f micros/op; (%ld of %ld found)\n", name,
             seconds * 1e6 / num, found, num);
    } else {
      fprintf(stderr, "unknown benchmark %s\n", name);
      return 2;
    }
    fflush(stdout);
  }
  leveldb_close(db);
  leveldb_options_destroy(options);
  leveldb_filterpolicy_destroy(bloom);
  leveldb_writeoptions_destroy(woptions);
  leveldb_readoptions_destroy(roptions);
  return 0;
}
