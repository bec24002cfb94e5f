// libcrema's part of the pipeline: what depends on no source or transform (the options check,
// the counters, the stall and hang watches, the release poller, a run's failure), compiled once.
#if !defined(CREMA_CORE_LIBRARY) || defined(CREMA_HEADER_ONLY)
#error "crema: libcrema is built with CREMA_CORE_LIBRARY and without CREMA_HEADER_ONLY"
#endif

#include <crema/pipeline/detail/checked_options_impl.hpp>
#include <crema/pipeline/detail/hang_watch_impl.hpp>
#include <crema/pipeline/detail/pipeline_counters_impl.hpp>
#include <crema/pipeline/detail/release_poller_impl.hpp>
#include <crema/pipeline/detail/run_state_impl.hpp>
#include <crema/pipeline/detail/stall_watch_impl.hpp>
#include <crema/pipeline/detail/stats_impl.hpp>
