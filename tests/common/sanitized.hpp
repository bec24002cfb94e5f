#pragma once

// Defines CREMA_TEST_SANITIZED where the program is built with AddressSanitizer, ThreadSanitizer
// or MemorySanitizer: their allocators cannot be replaced, and they keep memory of their own
// (AddressSanitizer's quarantine holds freed blocks, 256 MiB by default), so tests that count
// allocations or read the process's resident memory say what they skip instead.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CREMA_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define CREMA_TEST_SANITIZED 1
#endif
#endif
