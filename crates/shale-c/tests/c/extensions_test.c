/* The shaledb_* extensions (shaledb/c.h), built against the generated
   headers and libshaledb by crates/shale-c/tests/c_api.rs.
   Usage: extensions_test DIR */
#include <shaledb/c.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                  \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

#define CHECK_NO_ERROR(err)                                               \
  do {                                                                    \
    if ((err) != NULL) {                                                  \
      fprintf(stderr, "%s:%d: error: %s\n", __FILE__, __LINE__, (err));   \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

int main(int argc, char** argv) {
  leveldb_options_t* options = leveldb_options_create();
  leveldb_writeoptions_t* woptions = leveldb_writeoptions_create();
  leveldb_readoptions_t* roptions = leveldb_readoptions_create();
  const char* workers[2] = {"127.0.0.1:1", "127.0.0.1:2"};
  leveldb_t* db;
  char* err = NULL;
  char* text;
  char key[32];
  size_t len;
  int i;
  if (argc != 2) return 2;

  leveldb_options_set_create_if_missing(options, 1);

  /* An unknown executor fails the open. */
  shaledb_options_set_compaction_executor(options, "no-such-executor");
  db = leveldb_open(options, argv[1], &err);
  CHECK(db == NULL && err != NULL);
  CHECK(strstr(err, "no-such-executor") != NULL);
  leveldb_free(err);
  err = NULL;

  /* The remote executor needs workers. */
  shaledb_options_set_compaction_executor(options, "remote");
  db = leveldb_open(options, argv[1], &err);
  CHECK(db == NULL && err != NULL && strstr(err, "remote_workers") != NULL);
  leveldb_free(err);
  err = NULL;

  shaledb_options_set_remote_workers(options, workers, 2);
  shaledb_options_set_remote_token(options, "secret");
  shaledb_options_set_remote_token(options, NULL);
  shaledb_options_set_remote_mode(options, "keys-only", &err);
  CHECK_NO_ERROR(err);
  shaledb_options_set_remote_mode(options, "sideways", &err);
  CHECK(err != NULL && strncmp(err, "Invalid argument: ", 18) == 0);
  leveldb_free(err);
  err = NULL;
  shaledb_options_set_remote_mode(options, "near-data", &err);
  CHECK_NO_ERROR(err);
  /* No workers again: nothing here listens on those ports. */
  shaledb_options_set_remote_workers(options, NULL, 0);

  shaledb_options_set_compaction_executor(options, "streaming");
  shaledb_options_set_max_background_compactions(options, 1);
  db = leveldb_open(options, argv[1], &err);
  CHECK_NO_ERROR(err);
  for (i = 0; i < 1000; i++) {
    snprintf(key, sizeof(key), "key%06d", i);
    leveldb_put(db, woptions, key, strlen(key), key, strlen(key), &err);
    CHECK_NO_ERROR(err);
  }
  shaledb_compact_range(db, NULL, 0, NULL, 0, "streaming", &err);
  CHECK_NO_ERROR(err);
  shaledb_compact_range(db, "key0", 4, "key1", 4, NULL, &err);
  CHECK_NO_ERROR(err);
  shaledb_compact_range(db, NULL, 0, NULL, 0, "no-such-executor", &err);
  CHECK(err != NULL);
  leveldb_free(err);
  err = NULL;
  text = leveldb_get(db, roptions, "key000500", 9, &len, &err);
  CHECK_NO_ERROR(err);
  CHECK(text != NULL && len == 9 && memcmp(text, "key000500", 9) == 0);
  leveldb_free(text);

  text = shaledb_statistics_text(db);
  CHECK(text != NULL && strstr(text, "Level  Files") != NULL);
  leveldb_free(text);
  text = shaledb_statistics_json(db);
  CHECK(text != NULL && text[0] == '{');
  CHECK(strstr(text, "\"levels\":") != NULL);
  CHECK(strstr(text, "\"executors\":") != NULL);
  CHECK(strstr(text, "\"stalls\":") != NULL);
  leveldb_free(text);
  CHECK(shaledb_statistics_text(NULL) == NULL);

  leveldb_close(db);
  leveldb_destroy_db(options, argv[1], &err);
  CHECK_NO_ERROR(err);
  leveldb_options_destroy(options);
  leveldb_writeoptions_destroy(woptions);
  leveldb_readoptions_destroy(roptions);
  fprintf(stderr, "PASS\n");
  return 0;
}
