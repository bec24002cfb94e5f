// crema::lmdb's environment registry, source and writer, compiled once for every file that
// includes their headers.
#if defined(CREMA_HEADER_ONLY)
#error "crema: the crema::lmdb library is built without CREMA_HEADER_ONLY"
#endif

#include <crema/io/lmdb/detail/lmdb_environment_impl.hpp>
#include <crema/io/lmdb/detail/lmdb_source_impl.hpp>
#include <crema/io/lmdb/detail/lmdb_writer_impl.hpp>
