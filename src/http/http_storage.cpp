// crema::http's http_storage, compiled once for every file that includes its header.
#if defined(CREMA_HEADER_ONLY)
#error "crema: the crema::http library is built without CREMA_HEADER_ONLY"
#endif

#include <crema/io/http/detail/http_storage_impl.hpp>
