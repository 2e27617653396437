// RDMAD_SANITIZED: defined to 1 when this file is compiled with AddressSanitizer
// or ThreadSanitizer, by GCC (which says so with __SANITIZE_ADDRESS__ and
// __SANITIZE_THREAD__) or by clang (which says so only through
// __has_feature). Tests of memory use and of limits that the sanitizers'
// allocators and runtimes change look at it.
#ifndef RDMAD_TESTS_SANITIZED_H_
#define RDMAD_TESTS_SANITIZED_H_

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RDMAD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RDMAD_SANITIZED 1
#endif
#endif

#endif  // RDMAD_TESTS_SANITIZED_H_
