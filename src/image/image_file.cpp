// crema::image's image_file, compiled once for every file that includes its header.
#if defined(CREMA_HEADER_ONLY)
#error "crema: the crema::image library is built without CREMA_HEADER_ONLY"
#endif

#include <crema/io/image/detail/image_file_impl.hpp>
