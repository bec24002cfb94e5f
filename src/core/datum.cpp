// libcrema's part of io/caffe: the Datum's wire format, read and written, compiled once.
#if !defined(CREMA_CORE_LIBRARY) || defined(CREMA_HEADER_ONLY)
#error "crema: libcrema is built with CREMA_CORE_LIBRARY and without CREMA_HEADER_ONLY"
#endif

#include <crema/io/caffe/detail/datum_impl.hpp>
