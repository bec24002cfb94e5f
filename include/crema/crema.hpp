#pragma once

// What most users of crema need, with nothing but a C++20 compiler, {fmt} and concurrentqueue:
// the buffers, the pipeline and the collectives on host threads. Headers of the optional
// components (CUDA, NCCL, LMDB, images, MPI) are included one by one, and so are those that only
// one of them uses or that bring intrinsics headers (the parameter server's compression, the
// transforms' vector code).

#include <crema/collective/host/device_tree_reducer.hpp>
#include <crema/collective/p2p_sync.hpp>
#include <crema/collective/topology.hpp>
#include <crema/collective/tree_collective.hpp>
#include <crema/core/error.hpp>
#include <crema/core/generator.hpp>
#include <crema/core/host_threads.hpp>
#include <crema/core/queue_pair.hpp>
#include <crema/core/slot_pool.hpp>
#include <crema/core/thread_pool.hpp>
#include <crema/memory/device_span.hpp>
#include <crema/memory/emulated_device_resource.hpp>
#include <crema/memory/emulated_stream.hpp>
#include <crema/memory/head.hpp>
#include <crema/memory/host_malloc_resource.hpp>
#include <crema/memory/limiting_resource_adaptor.hpp>
#include <crema/memory/resource.hpp>
#include <crema/memory/synced_buffer.hpp>
#include <crema/memory/typed_buffer.hpp>
#include <crema/pipeline/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/generator_source.hpp>
#include <crema/pipeline/indexed_source.hpp>
#include <crema/pipeline/lease.hpp>
#include <crema/pipeline/pipeline_options.hpp>
#include <crema/pipeline/sample_context.hpp>
#include <crema/pipeline/source.hpp>
#include <crema/pipeline/source_registry.hpp>
#include <crema/pipeline/stats.hpp>
#include <crema/pipeline/transform.hpp>
#include <crema/pipeline/vector_source.hpp>
#include <crema/version.hpp>
