// libcrema's thread_pool: the core's code that depends on no template argument, compiled once.
#if !defined(CREMA_CORE_LIBRARY) || defined(CREMA_HEADER_ONLY)
#error "crema: libcrema is built with CREMA_CORE_LIBRARY and without CREMA_HEADER_ONLY"
#endif

#include <crema/core/detail/thread_pool_impl.hpp>
