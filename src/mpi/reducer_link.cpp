// crema::mpi's reducer link (agreement, bounded waits, failure naming), compiled once for every
// mpi_reducer<T> of every file that includes it.
#if defined(CREMA_HEADER_ONLY)
#error "crema: the crema::mpi library is built without CREMA_HEADER_ONLY"
#endif

#include <crema/collective/mpi/detail/reducer_link_impl.hpp>
