// Clang's thread safety annotations (clang.llvm.org/docs/ThreadSafetyAnalysis.html): what a
// mutex guards and what a function needs held, checked at compile time by clang's
// -Wthread-safety (on for clang builds, top-level CMakeLists.txt). They expand to nothing
// under other compilers. The names follow the clang documentation's mutex.h; use them with
// the annotated space::Mutex (common/mutex.h), which std::mutex is not.
#pragma once

#if defined(__clang__)
#define SPACE_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define SPACE_THREAD_ANNOTATION_(x)
#endif

// On a class: it is a capability (a mutex) of the given kind.
#define CAPABILITY(x) SPACE_THREAD_ANNOTATION_(capability(x))
// On an RAII class: it holds a capability for its lifetime (MutexLock).
#define SCOPED_CAPABILITY SPACE_THREAD_ANNOTATION_(scoped_lockable)

// On a data member or global: read and written only with `x` held.
#define GUARDED_BY(x) SPACE_THREAD_ANNOTATION_(guarded_by(x))
// On a pointer: what it points to is read and written only with `x` held.
#define PT_GUARDED_BY(x) SPACE_THREAD_ANNOTATION_(pt_guarded_by(x))
// On a mutex: the lock order.
#define ACQUIRED_BEFORE(...) SPACE_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) SPACE_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))

// On a function: the caller must hold the capabilities (exclusively, or at least shared).
#define REQUIRES(...) SPACE_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SPACE_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
// On a function: the caller must not hold them (the function takes them itself).
#define EXCLUDES(...) SPACE_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// On a function: it acquires / releases the capabilities (none named: `this`).
#define ACQUIRE(...) SPACE_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) SPACE_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) SPACE_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) SPACE_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
// On a function: it acquires them when it returns the given value.
#define TRY_ACQUIRE(...) SPACE_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define TRY_ACQUIRE_SHARED(...) SPACE_THREAD_ANNOTATION_(try_acquire_shared_capability(__VA_ARGS__))
// On a function: from its return on, the analysis assumes the capability held.
#define ASSERT_CAPABILITY(x) SPACE_THREAD_ANNOTATION_(assert_capability(x))
#define ASSERT_SHARED_CAPABILITY(x) SPACE_THREAD_ANNOTATION_(assert_shared_capability(x))
// On a function: it returns a reference to the capability `x`.
#define RETURN_CAPABILITY(x) SPACE_THREAD_ANNOTATION_(lock_returned(x))

// On a function: not analysed. Say why where it is used.
#define NO_THREAD_SAFETY_ANALYSIS SPACE_THREAD_ANNOTATION_(no_thread_safety_analysis)
