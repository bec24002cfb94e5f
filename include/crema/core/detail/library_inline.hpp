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

// The core's own compiled code (the thread pool, the queues: what does not depend on a template
// argument) is in libcrema where the build links it: CMake's crema::crema, crema.pc and the
// Conan package define CREMA_CORE_LIBRARY. Without it (a file compiled with -I alone, or with
// CREMA_HEADER_ONLY) the core's headers include that code and it is inline: the core needs no
// library to be used, only to be compiled once.
#if defined(CREMA_CORE_LIBRARY) && !defined(CREMA_HEADER_ONLY)
#define CREMA_CORE_IN_HEADERS 0
#define CREMA_CORE_INLINE
#else
#define CREMA_CORE_IN_HEADERS 1
#define CREMA_CORE_INLINE inline
#endif
