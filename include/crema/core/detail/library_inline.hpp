#pragma once

// The functions of crema's libraries (crema::image) are defined in implementation headers that
// the library compiles once, in its own translation units. With CREMA_HEADER_ONLY (the
// CREMA_HEADER_ONLY CMake option, or -DCREMA_HEADER_ONLY with no library linked) the public
// header includes them instead, and their definitions are inline.
#if defined(CREMA_HEADER_ONLY)
#define CREMA_LIBRARY_INLINE inline
#else
#define CREMA_LIBRARY_INLINE
#endif
