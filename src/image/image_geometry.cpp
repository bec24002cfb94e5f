// crema::image's image geometry, compiled once for every file that includes its header.
#if defined(CREMA_HEADER_ONLY)
#error "crema: the crema::image library is built without CREMA_HEADER_ONLY"
#endif

#include <crema/io/image/detail/image_geometry_impl.hpp>
