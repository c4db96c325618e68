/* Compiled with -Werror by tests/c_api.rs: LevelDB 1.23's own c.h (Debian's
   /usr/include/leveldb/c.h) and the generated one in one translation unit.
   C lets a function be declared twice only with compatible types, so every
   declaration of the generated header is checked against LevelDB's. */
#include <leveldb/c.h>

/* Both headers use LevelDB's include guard, and both define the anonymous
   compression enum, whose constants cannot be defined twice. */
#undef STORAGE_LEVELDB_INCLUDE_C_H_
#define leveldb_no_compression shaledb_header_no_compression
#define leveldb_snappy_compression shaledb_header_snappy_compression
#include SHALEDB_GENERATED_HEADER
#undef leveldb_no_compression
#undef leveldb_snappy_compression

_Static_assert((int)shaledb_header_no_compression == (int)leveldb_no_compression,
               "leveldb_no_compression differs");
_Static_assert((int)shaledb_header_snappy_compression == (int)leveldb_snappy_compression,
               "leveldb_snappy_compression differs");

int main(void) { return 0; }
